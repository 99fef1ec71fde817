package bench

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// Process and machine facts read from /proc (Linux); zero or "" elsewhere.

// peakRSS is the process's peak resident set size (VmHWM) since start or the last resetPeakRSS.
func peakRSS() int64 { return procField("/proc/self/status", "VmHWM:") << 10 }


// resetPeakRSS sets VmHWM back to the current RSS (Linux ≥ 4.0); it reports whether it could.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// memTotal is the machine's memory in bytes.
func memTotal() int64 { return procField("/proc/meminfo", "MemTotal:") << 10 }

// loadAverage is the one-minute load average: other work competing for the cores.
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(fields[0], 64)
	return v
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// procField reads a "Key:   123 kB" line's number.
func procField(path, key string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), key); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
