//go:build linux

package sysinfo

import "syscall"

// FreeDiskBytes is the space an unprivileged user may still fill in the file system holding
// path, or -1 when it cannot be told.
func FreeDiskBytes(path string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
