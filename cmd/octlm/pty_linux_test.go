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

// screen collects what the command writes to the terminal.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func watch(r io.Reader) *screen {
	s := &screen{}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			s.mu.Lock()
			s.buf.Write(b[:n])
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

// waitFor waits until the screen shows want at least n times.
func (s *screen) waitFor(t *testing.T, want string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(s.text(), want) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal never showed %q %d times:\n%q", want, n, s.text())
		}
		time.Sleep(20 * time.Millisecond)
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
	time.Sleep(500 * time.Millisecond) // the reply streams
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
