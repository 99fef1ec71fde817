//go:build !unix

package main

import "os/exec"

// killGroup leaves cmd as it is: outside Unix, cancellation kills nbconvert alone.
func killGroup(cmd *exec.Cmd) {}
