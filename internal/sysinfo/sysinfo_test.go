package sysinfo

import (
	"runtime"
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
	if LoadAverage() < 0 {
		t.Errorf("load average %v", LoadAverage())
	}
	runtime.KeepAlive(buf)
}

func TestProcField(t *testing.T) {
	if got := procField("/no/such/file", "VmRSS:"); got != 0 {
		t.Errorf("missing file: %d", got)
	}
}
