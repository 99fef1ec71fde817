//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: the controller (what the test reads and types into)
// and the terminal the command runs on.
func openPTY(t *testing.T) (controller, terminal *os.File) {
	t.Helper()
	c, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(c.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		c.Close()
		t.Skipf("unlocking the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(c.Fd()), unix.TIOCGPTN)
	if err != nil {
		c.Close()
		t.Skipf("pseudo-terminal number: %v", err)
	}
	term, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		c.Close()
		t.Skipf("opening /dev/pts/%d: %v", n, err)
	}
	t.Cleanup(func() { c.Close(); term.Close() })
	return c, term
}

// screen collects what the command writes to the terminal; changed is closed and replaced
// whenever more arrives, so that waitFor waits on output, not on a clock.
type screen struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
	closed  bool
}

func watch(r io.Reader) *screen {
	s := &screen{changed: make(chan struct{})}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			s.mu.Lock()
			s.buf.Write(b[:n])
			close(s.changed)
			s.changed = make(chan struct{})
			s.closed = err != nil
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return s
}

func (s *screen) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor waits until the screen shows want at least n times (bounded, so that a hang fails
// the test rather than the whole run).
func (s *screen) waitFor(t *testing.T, want string, n int) {
	t.Helper()
	s.waitUntil(t, fmt.Sprintf("%q %d times", want, n), func(text string) bool { return strings.Count(text, want) >= n })
}

// waitUntil waits until ok holds for what the screen shows.
func (s *screen) waitUntil(t *testing.T, what string, ok func(string) bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		s.mu.Lock()
		text, changed, closed := s.buf.String(), s.changed, s.closed
		s.mu.Unlock()
		if ok(text) {
			return
		}
		if closed {
			t.Fatalf("the terminal closed without showing %s:\n%q", what, text)
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the terminal never showed %s:\n%q", what, text)
		}
	}
}

// TestChatTerminal runs chat on a pseudo-terminal as a user would: the >>> prompt, a reply
// streaming, Ctrl-C typed (the terminal sends SIGINT) stopping the reply, the chat going on, and
// Ctrl-D ending it with exit status 0.
func TestChatTerminal(t *testing.T) {
	controller, terminal := openPTY(t)
	cmd := octlmCommand(t, "chat", "-m", tokenizerModel(t), "-n", "40000", "--temperature", "0", "--think=false")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = terminal, terminal, terminal
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	terminal.Close() // the command holds its own copy
	s := watch(controller)

	s.waitFor(t, ">>> ", 1)
	if !strings.Contains(s.text(), "/help for commands") {
		t.Errorf("no greeting on a terminal:\n%q", s.text())
	}
	io.WriteString(controller, "Tell me a long story\n")
	// The reply streams (this random model's greedy reply is blank lines): wait for its first
	// bytes after the echoed line, then press Ctrl-C.
	s.waitUntil(t, "a reply", func(text string) bool {
		_, reply, ok := strings.Cut(text, "Tell me a long story\r\n")
		return ok && reply != ""
	})
	io.WriteString(controller, "\x03") // Ctrl-C
	s.waitFor(t, "[interrupted]", 1)
	s.waitFor(t, ">>> ", 2)
	io.WriteString(controller, "/stats\n")
	s.waitFor(t, "2 messages", 1)
	s.waitFor(t, ">>> ", 3)
	io.WriteString(controller, "\x04") // Ctrl-D
	errc := make(chan error, 1)
	go func() { errc <- cmd.Wait() }()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("chat ended with %v, want exit 0\n%q", err, s.text())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("chat did not end on Ctrl-D:\n%q", s.text())
	}
}
