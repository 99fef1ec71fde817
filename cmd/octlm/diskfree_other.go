//go:build !linux

package main

// freeDiskBytes cannot tell the free space on this platform: -1.
func freeDiskBytes(string) int64 { return -1 }
