// Package sysinfo reads the process and machine facts octlm reports and checks against: resident
// memory, memory available, load average and the processor's name. It reads Linux's /proc;
// elsewhere every function returns zero or "".
package sysinfo

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
)

// RSS is the process's resident set size now (VmRSS), in bytes.
func RSS() int64 { return procField("/proc/self/status", "VmRSS:") << 10 }

// PeakRSS is the process's peak resident set size (VmHWM) since it started or since the last
// ResetPeakRSS, in bytes.
func PeakRSS() int64 { return procField("/proc/self/status", "VmHWM:") << 10 }

// HugePageRSS is how much of the process's anonymous memory is resident on transparent huge
// pages (AnonHugePages in /proc/self/smaps_rollup, Linux ≥ 4.14), in bytes.
func HugePageRSS() int64 { return procField("/proc/self/smaps_rollup", "AnonHugePages:") << 10 }

// ResetPeakRSS sets the peak back to the current RSS (Linux ≥ 4.0); it reports whether it could.
func ResetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// MemTotal is the machine's memory, in bytes.
func MemTotal() int64 { return procField("/proc/meminfo", "MemTotal:") << 10 }

// MemAvailable is the memory the kernel estimates can be allocated without swapping, in bytes.
func MemAvailable() int64 { return procField("/proc/meminfo", "MemAvailable:") << 10 }

// LoadAverage is the one-minute load average: other work competing for the cores.
func LoadAverage() float64 {
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

// CPUModel is the first "model name" of /proc/cpuinfo.
func CPUModel() string { return cpuinfo("model name") }

// CPUVendor is the first "vendor_id" of /proc/cpuinfo ("GenuineIntel", "AuthenticAMD"), or ""
// where there is none.
func CPUVendor() string { return cpuinfo("vendor_id") }

// cpuinfo is the first value of key in /proc/cpuinfo, or "".
func cpuinfo(key string) string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	return firstField(f, key)
}

// firstField is the value of the first "key : value" line of r, trimmed, or "".
func firstField(r io.Reader, key string) string {
	s := bufio.NewScanner(r)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// procField reads the number of a "Key:   123 kB" line.
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
