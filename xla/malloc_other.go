//go:build !linux || !cgo

package xla

// nativeHeapBound reports false outside Linux with cgo: there is no glibc malloc to set.
func nativeHeapBound() (arenas, mmapThreshold int, ok bool) { return 0, 0, false }
