//go:build unix

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// prepareTerminal makes a bare terminal usable by the line editor: one that reports no size
// (0 columns, as a freshly made pseudo-terminal does) is given 80x24, and an unset TERM reads as
// vt100 (the only escapes the editor writes), instead of the editor falling back to raw input
// where arrows arrive as ^[[D.
func prepareTerminal(f *os.File) {
	if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col == 0 {
		ws.Col, ws.Row = 80, max(ws.Row, 24)
		unix.IoctlSetWinsize(int(f.Fd()), unix.TIOCSWINSZ, ws)
	}
	if _, set := os.LookupEnv("TERM"); !set {
		os.Setenv("TERM", "vt100")
	}
}
