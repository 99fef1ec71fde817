//go:build linux

package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// chatOnPTY starts chat on a pseudo-terminal of 100 columns with TERM=xterm (as a terminal
// emulator would), with $XDG_STATE_HOME at state, and returns what it shows and a function
// that types Ctrl-D and waits for the exit status.
func chatOnPTY(t *testing.T, state string, args ...string) (controller *os.File, s *screen, quit func() error) {
	t.Helper()
	return chatOnTerminal(t, true, state, args...)
}

// chatOnTerminal is chatOnPTY; with sized false, the terminal is as bare as a fresh
// pseudo-terminal: no size (0x0) and no TERM.
func chatOnTerminal(t *testing.T, sized bool, state string, args ...string) (controller *os.File, s *screen, quit func() error) {
	t.Helper()
	controller, terminal := openPTY(t)
	if sized {
		if err := unix.IoctlSetWinsize(int(terminal.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 100}); err != nil {
			t.Skipf("setting the terminal size: %v", err)
		}
	}
	cmd := octlmCommand(t, append([]string{"chat", "-m", tokenizerModel(t), "--temperature", "0", "--think=false"}, args...)...)
	var env []string
	for _, e := range cmd.Env {
		if !strings.HasPrefix(e, "TERM=") {
			env = append(env, e)
		}
	}
	cmd.Env = append(env, "XDG_STATE_HOME="+state, "NO_COLOR=")
	if sized {
		cmd.Env = append(cmd.Env, "TERM=xterm")
	}
	s = startOnTerminal(t, cmd, controller, terminal)
	return controller, s, func() error {
		io.WriteString(controller, "\x04") // Ctrl-D
		return waitChatExit(t, cmd, s)
	}
}

// waitChatExit waits for chat to end, at most 60 s, showing its screen if it does not.
func waitChatExit(t *testing.T, cmd *exec.Cmd, s *screen) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- cmd.Wait() }()
	select {
	case err := <-errc:
		return err
	case <-time.After(60 * time.Second):
		t.Fatalf("chat did not end:\n%q", s.text())
		return nil
	}
}

// readTranscript reads what /save wrote.
func readTranscript(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tr chatTranscript
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var turns []string
	for _, m := range tr.Messages {
		if m.Role == "user" {
			turns = append(turns, m.Content)
		}
	}
	return turns
}

// TestChatLineEditing types at chat's prompt as a user does: arrows move the cursor inside the
// line ("helo", Left, Left, "l" sends "hello"), a line ending in \ goes on to the next, a """
// block holds several lines, each reply is followed by a dim line with its tokens and
// tokens/s, and the lines typed are kept (mode 0600) so that a second chat recalls them with Up.
func TestChatLineEditing(t *testing.T) {
	state := t.TempDir()
	saved := filepath.Join(t.TempDir(), "first.json")
	controller, s, quit := chatOnPTY(t, state, "-n", "3")

	s.waitFor(t, ">>> ", 1)
	io.WriteString(controller, "helo\x1b[D\x1b[Dl\r")
	s.waitFor(t, " tokens/s", 1)
	s.waitFor(t, ">>> ", 2)
	io.WriteString(controller, "first line\\\r")
	s.waitFor(t, "... ", 1)
	io.WriteString(controller, "second line\r")
	s.waitFor(t, " tokens/s", 2)
	s.waitFor(t, ">>> ", 3)
	io.WriteString(controller, "\"\"\"\r")
	s.waitFor(t, "... ", 2)
	io.WriteString(controller, "a block\r")
	s.waitFor(t, "... ", 3)
	io.WriteString(controller, "of two lines\"\"\"\r")
	s.waitFor(t, " tokens/s", 3)
	s.waitFor(t, ">>> ", 4)
	io.WriteString(controller, "/save "+saved+"\r")
	s.waitFor(t, "saved 6 messages", 1)
	s.waitFor(t, ">>> ", 5)
	if err := quit(); err != nil {
		t.Fatalf("chat ended with %v, want exit 0:\n%q", err, s.text())
	}
	screen := s.text()
	if want := "\x1b[2m3 tokens, "; !strings.Contains(screen, want) {
		t.Errorf("no dim reply line %q after the replies:\n%q", want, screen)
	}
	if strings.Contains(screen, "^[[D") || strings.Contains(screen, "\x1b[D\x1b[Dl") {
		t.Errorf("the arrows were echoed raw:\n%q", screen)
	}
	want := []string{"hello", "first line\nsecond line", "a block\nof two lines"}
	if got := readTranscript(t, saved); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("turns sent %q, want %q", got, want)
	}

	history := filepath.Join(state, "octlm", "chat_history")
	st, err := os.Stat(history)
	if err != nil {
		t.Fatalf("no history kept: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("history mode %v, want 0600", st.Mode().Perm())
	}
	if data, _ := os.ReadFile(history); !strings.Contains(string(data), "hello\n") {
		t.Errorf("history lacks the edited line:\n%s", data)
	}

	// A second chat, without the reply line: Ctrl-C drops a half-typed line; Up recalls
	// "/save FILE", then "of two lines""" and so on back to "hello".
	second := filepath.Join(t.TempDir(), "second.json")
	controller, s, quit = chatOnPTY(t, state, "-n", "3", "--stats=false")
	s.waitFor(t, ">>> ", 1)
	io.WriteString(controller, "half a thought\x03") // Ctrl-C at the prompt drops the line, not the chat
	s.waitFor(t, "(/bye or Ctrl-D quits)", 1)
	s.waitFor(t, ">>> ", 2)
	io.WriteString(controller, strings.Repeat("\x1b[A", 7)+"\r") // Up x7: "hello"
	s.waitFor(t, ">>> ", 3)
	io.WriteString(controller, "/save "+second+"\r")
	s.waitFor(t, "saved 2 messages", 1)
	s.waitFor(t, ">>> ", 4)
	if err := quit(); err != nil {
		t.Fatalf("second chat ended with %v:\n%q", err, s.text())
	}
	if got := readTranscript(t, second); len(got) != 1 || got[0] != "hello" {
		t.Errorf("Up x7 in a new chat sent %q, want the first chat's \"hello\"", got)
	}
	if strings.Contains(s.text(), "tokens/s") {
		t.Errorf("--stats=false still shows the reply line:\n%q", s.text())
	}
}

// TestParityProgressTerminal: on a terminal, the 40,960-position case of tiny-qwen3-long shows
// positions done of total, the rate and the time left while it runs (the test stops it there),
// and stdout, a pipe, gets none of it.
func TestParityProgressTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of a 40,960-position case")
	}
	controller, terminal := openPTY(t)
	cmd := octlmCommand(t, "parity", "--backend", "go", "--model", testdata("tiny-qwen3-long"))
	var stdout strings.Builder
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, &stdout, terminal
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	terminal.Close()
	s := watch(controller)
	s.waitFor(t, " / 40,960 positions, ", 1)
	s.waitFor(t, " left", 1)
	cmd.Process.Kill()
	cmd.Wait()
	if strings.Contains(stdout.String(), "positions") {
		t.Errorf("progress on stdout: %q", stdout.String())
	}
	if !strings.Contains(s.text(), "case 0, full path: ") {
		t.Errorf("the line does not say which case and path:\n%q", s.text())
	}
}

// TestChatLineEditingBareTerminal: on a pseudo-terminal that reports no size and with no TERM
// (as a test harness makes one), the arrows still edit the line.
func TestChatLineEditingBareTerminal(t *testing.T) {
	saved := filepath.Join(t.TempDir(), "bare.json")
	controller, s, quit := chatOnTerminal(t, false, t.TempDir(), "-n", "2")
	s.waitFor(t, ">>> ", 1)
	io.WriteString(controller, "helo\x1b[D\x1b[Dl\r")
	s.waitFor(t, ">>> ", 2)
	io.WriteString(controller, "/save "+saved+"\r")
	s.waitFor(t, "saved 2 messages", 1)
	s.waitFor(t, ">>> ", 3)
	if err := quit(); err != nil {
		t.Fatalf("chat ended with %v:\n%q", err, s.text())
	}
	if got := readTranscript(t, saved); len(got) != 1 || got[0] != "hello" {
		t.Errorf("sent %q, want \"hello\"", got)
	}
}
