package sysinfo

// Memory the process can still take: the kernel's estimate of available memory (MemAvailable in
// /proc/meminfo), lowered by the memory limit of the process's cgroup (v2 memory.max or v1
// memory.limit_in_bytes, at its own level or any level above) where one is set.

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Available is memory the process can take before the kernel or a cgroup limit stops it.
type Available struct {
	Bytes  int64
	Source string // where the figure comes from: "MemAvailable (/proc/meminfo)" or the cgroup file
}

// String is "12.3 GiB (MemAvailable (/proc/meminfo))".
func (a Available) String() string {
	return fmt.Sprintf("%.1f GiB (%s)", float64(a.Bytes)/(1<<30), a.Source)
}

// ProcessAvailable returns the memory available to this process. It fails where /proc/meminfo
// cannot be read (not Linux); cgroup files it cannot read are skipped.
func ProcessAvailable() (Available, error) {
	return read(osRoot())
}

func osRoot() fs.FS { return os.DirFS("/") }

// read is Read on a file system rooted where / would be (tests pass a fake one).
func read(root fs.FS) (Available, error) {
	avail, err := meminfoField(root, "MemAvailable:")
	if err != nil {
		return Available{}, err
	}
	best := Available{Bytes: avail, Source: "MemAvailable (/proc/meminfo)"}
	for _, c := range cgroupRoom(root) {
		if c.Bytes < best.Bytes {
			best = c
		}
	}
	return best, nil
}

// meminfoField reads one "Key:   123 kB" line of /proc/meminfo, in bytes.
func meminfoField(root fs.FS, key string) (int64, error) {
	f, err := root.Open("proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("sysinfo: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), key); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("sysinfo: /proc/meminfo: %s %q: %w", key, v, err)
			}
			return n << 10, nil
		}
	}
	return 0, fmt.Errorf("sysinfo: /proc/meminfo has no %s line", strings.TrimSuffix(key, ":"))
}

// cgroupRoom is, for every level of the process's memory cgroup (v2 unified or v1 memory
// controller) that sets a limit, the limit less what the cgroup uses, not counting the
// page cache the kernel can drop (inactive_file).
func cgroupRoom(root fs.FS) []Available {
	data, err := fs.ReadFile(root, "proc/self/cgroup")
	if err != nil {
		return nil
	}
	var out []Available
	for _, line := range strings.Split(string(data), "\n") {
		// "0::/path" (v2) or "4:memory:/path" (v1).
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir, limitFile, usageFile, inactiveKey string
		switch {
		case parts[0] == "0" && parts[1] == "":
			dir, limitFile, usageFile, inactiveKey = "sys/fs/cgroup", "memory.max", "memory.current", "inactive_file"
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			dir, limitFile, usageFile, inactiveKey = "sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"
		default:
			continue
		}
		for p := path.Clean("/" + parts[2]); ; p = path.Dir(p) {
			level := strings.TrimSuffix(dir+p, "/")
			if room, ok := levelRoom(root, level, limitFile, usageFile, inactiveKey); ok {
				out = append(out, room)
			}
			if p == "/" {
				break
			}
		}
	}
	return out
}

// levelRoom reads one cgroup level; ok is false where it sets no limit or cannot be read.
func levelRoom(root fs.FS, dir, limitFile, usageFile, inactiveKey string) (Available, bool) {
	limit, err := readInt(root, dir+"/"+limitFile)
	// v1 writes "no limit" as a huge page-aligned number, v2 as "max".
	if err != nil || limit >= math.MaxInt64/2 {
		return Available{}, false
	}
	usage, err := readInt(root, dir+"/"+usageFile)
	if err != nil {
		return Available{}, false
	}
	usage -= statField(root, dir+"/memory.stat", inactiveKey)
	return Available{Bytes: max(limit-max(usage, 0), 0), Source: "/" + dir + "/" + limitFile}, true
}

var errNoLimit = errors.New("no limit")

func readInt(root fs.FS, name string) (int64, error) {
	data, err := fs.ReadFile(root, name)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0, errNoLimit
	}
	return strconv.ParseInt(s, 10, 64)
}

// statField reads "key value" from a memory.stat file; 0 where absent.
func statField(root fs.FS, name, key string) int64 {
	data, err := fs.ReadFile(root, name)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
