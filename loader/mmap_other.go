//go:build !linux

package loader

import "os"

// mapFile does not map files on this platform: reads use ReadAt into bounded buffers.
func mapFile(f *os.File, size int64) []byte { return nil }

func unmapFile(data []byte) error { return nil }

func releasePages(data []byte, lo, hi int64) {}
