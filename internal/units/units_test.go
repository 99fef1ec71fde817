package units

import "testing"

func TestCommas(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {-1234567, "-1,234,567"}, {596049920, "596,049,920"}} {
		if got := Commas(tt.n); got != tt.want {
			t.Errorf("Commas(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestGroupDigits(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"1234", "1,234"}, {"-100000", "-100,000"}, {"12", "12"}, {"3.5e-05", "3.5e-05"}, {"", ""}, {"-", "-"},
		{"123456789012345678901234", "123,456,789,012,345,678,901,234"}, {"12a4", "12a4"},
	} {
		if got := GroupDigits(tt.in); got != tt.want {
			t.Errorf("GroupDigits(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestBytes(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.00 KiB"}, {1536, "1.50 KiB"}, {1 << 20, "1.00 MiB"},
		{1503238553, "1.40 GiB"}, {1 << 40, "1.00 TiB"}, {-2048, "-2.00 KiB"}, {1 << 62, "4.00 EiB"}} {
		if got := Bytes(tt.n); got != tt.want {
			t.Errorf("Bytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
	if got := BytesFloat(3 * (1 << 60) * 1024); got != "3072.00 EiB" {
		t.Errorf("BytesFloat(3 ZiB) = %q", got)
	}
}
