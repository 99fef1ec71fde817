//go:build !linux || !cgo

package xla

// boundNativeHeap does nothing outside Linux with cgo: there is no glibc malloc to set.
func boundNativeHeap() bool { return false }
