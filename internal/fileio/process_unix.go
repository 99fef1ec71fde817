//go:build unix

package fileio

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process reports whether process pid runs (a zombie, dead and not yet reaped, does not) and,
// where /proc tells, when it started.
func process(pid int) (running bool, started time.Time) {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false, time.Time{}
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true, time.Time{} // no /proc (macOS, BSD): the signal check is all there is
	}
	// Fields after the command name, which is in parentheses and may hold spaces: state is the
	// first, starttime (clock ticks after boot) the 20th.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return true, time.Time{}
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 20 {
		return true, time.Time{}
	}
	if f[0] == "Z" || f[0] == "X" {
		return false, time.Time{}
	}
	ticks, err := strconv.ParseInt(f[19], 10, 64)
	boot := bootTime()
	if err != nil || boot.IsZero() {
		return true, time.Time{}
	}
	// USER_HZ, the unit of /proc's times, is 100 on every Linux architecture.
	return true, boot.Add(time.Duration(ticks) * (time.Second / 100))
}

// bootTime is the btime line of /proc/stat; zero where it cannot be read.
func bootTime() time.Time {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			if s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return time.Unix(s, 0)
			}
		}
	}
	return time.Time{}
}
