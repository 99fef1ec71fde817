//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// killGroup makes cmd the leader of a process group and, on cancellation, kills the whole group:
// nbconvert's kernel (gonb) and the cell program it is running go with it.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
