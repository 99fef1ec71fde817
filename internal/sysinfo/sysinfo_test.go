package sysinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestReadsProc(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	rss, peak, total, avail := RSS(), PeakRSS(), MemTotal(), MemAvailable()
	if rss < int64(len(buf)) || peak < rss {
		t.Errorf("RSS %d, peak %d: want ≥ the %d bytes just touched, peak ≥ RSS", rss, peak, len(buf))
	}
	if total <= 0 || avail <= 0 || avail > total {
		t.Errorf("MemTotal %d, MemAvailable %d", total, avail)
	}
	if huge := HugePageRSS(); huge < 0 || huge > rss {
		t.Errorf("AnonHugePages %d with RSS %d", huge, rss)
	}
	if LoadAverage() < 0 {
		t.Errorf("load average %v", LoadAverage())
	}
	runtime.KeepAlive(buf)
}

// TestFirstField: the first "key : value" line's value, trimmed, whatever the spacing around the
// colon; "" where the key is missing or only begins another key.
func TestFirstField(t *testing.T) {
	const cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n" +
		"model name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu vme\n\nprocessor\t: 1\nvendor_id\t: Other\n"
	tests := []struct{ key, want string }{
		{"vendor_id", "GenuineIntel"},
		{"model name", "Intel(R) Xeon(R) Processor"},
		{"cpu family", "6"},
		{"flags", "fpu vme"},
		{"vendor", ""},
		{"stepping", ""},
	}
	for _, tt := range tests {
		if got := firstField(strings.NewReader(cpuinfo), tt.key); got != tt.want {
			t.Errorf("firstField(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" && CPUVendor() == "" {
		t.Error("CPUVendor() is empty on linux/amd64")
	}
}

func TestProcField(t *testing.T) {
	if got := procField("/no/such/file", "VmRSS:"); got != 0 {
		t.Errorf("missing file: %d", got)
	}
}

// TestFreeDiskBytes: the free space of a folder on a real file system is positive on Linux, and
// a path that does not exist cannot be told (-1).
func TestFreeDiskBytes(t *testing.T) {
	tests := []struct {
		name string
		path string
		ok   bool
	}{
		{"a temporary folder", t.TempDir(), runtime.GOOS == "linux"},
		{"no such path", "/no/such/folder/octlm", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FreeDiskBytes(tt.path)
			if tt.ok && got <= 0 || !tt.ok && got != -1 {
				t.Errorf("FreeDiskBytes(%q) = %d, want %s", tt.path, got, map[bool]string{true: "> 0", false: "-1"}[tt.ok])
			}
		})
	}
}
