//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
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

// end is how much the screen shows so far: a mark for waitInOrder.
func (s *screen) end() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Len()
}

// waitInOrder waits until the screen shows each of parts, in this order, after its first at
// bytes. The line editor draws its prompt more than once per line, so counting prompts from the
// start says little: a wait for "the next prompt" is one for ">>> " after a mark.
func (s *screen) waitInOrder(t *testing.T, at int, parts ...string) {
	t.Helper()
	s.waitUntil(t, fmt.Sprintf("%q in this order after byte %d", parts, at), func(text string) bool {
		return inOrder(text[at:], parts...)
	})
}

// inOrder reports whether text holds each of parts, one after the other.
func inOrder(text string, parts ...string) bool {
	for _, p := range parts {
		i := strings.Index(text, p)
		if i < 0 {
			return false
		}
		text = text[i+len(p):]
	}
	return true
}

// waitClosed waits until the terminal has closed (every process on it has gone) and returns
// all it showed.
func (s *screen) waitClosed(t *testing.T) string {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		s.mu.Lock()
		text, changed, closed := s.buf.String(), s.changed, s.closed
		s.mu.Unlock()
		if closed {
			return text
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the terminal was not closed:\n%q", text)
		}
	}
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
// Ctrl-D ending it with exit status 0. Keys are typed only once chat shows it waits for them,
// and Enter is \r, as a terminal sends it to the line editor's raw mode.
func TestChatTerminal(t *testing.T) {
	controller, terminal := openPTY(t)
	cmd := octlmCommand(t, "chat", "-m", tokenizerModel(t), "-n", "40000", "--temperature", "0", "--think=false")
	cmd.Env = append(cmd.Env, "XDG_STATE_HOME="+t.TempDir()) // the line editor's history stays here
	s := startOnTerminal(t, cmd, controller, terminal)

	s.waitFor(t, ">>> ", 1)
	if !strings.Contains(s.text(), "/help for commands") {
		t.Errorf("no greeting on a terminal:\n%q", s.text())
	}
	at := s.end()
	io.WriteString(controller, "Tell me a long story\r")
	// The reply streams (this random model's greedy reply is blank lines): wait for its first
	// bytes after the line typed, which the editor ends with \r\n, then press Ctrl-C.
	s.waitUntil(t, "a reply", func(text string) bool {
		_, after, typed := strings.Cut(text[at:], "Tell me a long story")
		_, reply, ended := strings.Cut(after, "\r\n")
		return typed && ended && reply != ""
	})
	at = s.end()
	io.WriteString(controller, "\x03") // Ctrl-C
	s.waitInOrder(t, at, "[interrupted]", ">>> ")
	at = s.end()
	io.WriteString(controller, "/stats\r")
	s.waitInOrder(t, at, "2 messages", ">>> ")
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

// startOnTerminal starts cmd with terminal as its controlling terminal (its own session) and
// returns what it shows on controller; the command is killed when the test ends, if still running.
func startOnTerminal(t *testing.T, cmd *exec.Cmd, controller, terminal *os.File) *screen {
	t.Helper()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = terminal, terminal, terminal
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	terminal.Close() // the command holds its own copy
	return watch(controller)
}
