//go:build linux

package loader

import (
	"os"
	"syscall"
)

// mapFile maps the whole file read-only so tensors decode straight from the page cache, with
// no intermediate copy. It returns nil when the file cannot be mapped (reads then use ReadAt).
func mapFile(f *os.File, size int64) []byte {
	if size <= 0 || int64(int(size)) != size {
		return nil
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil
	}
	_ = syscall.Madvise(data, syscall.MADV_SEQUENTIAL)
	return data
}

func unmapFile(data []byte) error { return syscall.Munmap(data) }

// releasePages drops the mapping's pages that lie wholly inside data[lo:hi] from this process
// (the page cache keeps them), so streaming a file never adds it to the resident set.
func releasePages(data []byte, lo, hi int64) {
	const page = 4096
	lo, hi = max(lo, 0), min(hi, int64(len(data)))
	start := (lo + page - 1) &^ (page - 1)
	end := hi &^ (page - 1)
	if end > start {
		_ = syscall.Madvise(data[start:end], syscall.MADV_DONTNEED)
	}
}
