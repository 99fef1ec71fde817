//go:build linux

package main

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stalledHub is a loopback Hub that holds every request open until the test ends; arrived
// receives once per request, so a test knows when a command is waiting on the Hub.
func stalledHub(t *testing.T) (url string, arrived <-chan struct{}) {
	t.Helper()
	ch := make(chan struct{}, 16)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case ch <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv.URL, ch
}

// catchIgnored makes the commands a test starts begin with sigs at their default disposition
// where this process ignores them (a test run under nohup ignores SIGHUP, the commands inherit
// that, and octlm keeps a signal its parent ignored, as nohup asks): a caught signal is reset
// by exec, an ignored one is not. Undone when the test ends.
func catchIgnored(t *testing.T, sigs ...os.Signal) {
	t.Helper()
	var ignored []os.Signal
	for _, s := range sigs {
		if signal.Ignored(s) {
			ignored = append(ignored, s)
		}
	}
	if len(ignored) == 0 {
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, ignored...)
	t.Cleanup(func() { signal.Stop(ch) })
}

// TestSignalsRemoveTemporaries: SIGTERM, SIGINT and SIGHUP end every command that writes the
// same way: exit 128 + the signal's number, the output being written (parity --out's
// temporary file beside the target, scratch folders under $TMPDIR) removed, the target as it
// was. Each command is caught waiting on a Hub that never answers, after it started its
// outputs.
func TestSignalsRemoveTemporaries(t *testing.T) {
	catchIgnored(t, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	signals := []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGTERM, 143}, {syscall.SIGINT, 130}, {syscall.SIGHUP, 129}}
	commands := []struct {
		name string
		args func(out string) []string
	}{
		{"parity --out", func(out string) []string {
			return []string{"parity", "--model", "org/tiny", "--out", filepath.Join(out, "p.jsonl")}
		}},
		{"figures", func(out string) []string {
			return []string{"figures", "--model", "org/tiny", "--out", filepath.Join(out, "figs")}
		}},
		{"generate", func(string) []string { return []string{"generate", "--model", "org/tiny", "-p", "hi"} }},
		// Ctrl-C in chat stops a reply, never the session: while it loads, it ends it.
		{"chat", func(string) []string { return []string{"chat", "--model", "org/tiny"} }},
	}
	for _, c := range commands {
		for _, s := range signals {
			t.Run(c.name+"/"+s.sig.String(), func(t *testing.T) {
				url, arrived := stalledHub(t)
				out, scratch := t.TempDir(), t.TempDir()
				existing := filepath.Join(out, "p.jsonl")
				if err := os.WriteFile(existing, []byte("old rows\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				cmd := octlmCommand(t, c.args(out)...)
				cmd.Env = append(cmd.Env, "HF_ENDPOINT="+url, "HF_HOME="+t.TempDir(), "HF_HUB_OFFLINE=0", "TMPDIR="+scratch)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				select {
				case <-arrived:
				case <-time.After(time.Minute):
					cmd.Process.Kill()
					t.Fatalf("the command never asked the Hub:\n%s", stderr.String())
				}
				if err := cmd.Process.Signal(s.sig); err != nil {
					t.Fatal(err)
				}
				if code := waitExit(t, cmd); code != s.code {
					t.Fatalf("exit %d, want %d\n%s", code, s.code, stderr.String())
				}
				if b, _ := os.ReadFile(existing); string(b) != "old rows\n" {
					t.Errorf("the existing output changed: %q", b)
				}
				for _, dir := range []string{out, scratch} {
					if left := hiddenLeft(t, dir); len(left) > 0 {
						t.Errorf("temporaries left in %s: %v", dir, left)
					}
				}
			})
		}
	}
}

// TestSignalClaims: a claim made once takes the first delivery only, a claim made always
// takes every one, and a released claim takes none; each delivery a claim takes is given to
// its handler.
func TestSignalClaims(t *testing.T) {
	taken := func() bool { _, ok := takenByClaim(syscall.SIGUSR1); return ok }
	if taken() {
		t.Fatal("an unclaimed signal was taken")
	}
	calls := 0
	handler := func(os.Signal) <-chan struct{} { calls++; return nil }
	release := claimSignals(false, handler, syscall.SIGUSR1)
	handlers, ok := takenByClaim(syscall.SIGUSR1)
	if !ok || len(handlers) != 1 || taken() {
		t.Error("a claim made once must take the first delivery and only it")
	}
	for _, h := range handlers {
		h(syscall.SIGUSR1)
	}
	if calls != 1 {
		t.Errorf("the handler ran %d times, want 1", calls)
	}
	release()
	release = claimSignals(true, nil, syscall.SIGUSR1)
	for i := range 3 {
		if !taken() {
			t.Errorf("delivery %d not taken by a claim made always", i+1)
		}
	}
	release()
	if taken() {
		t.Error("a released claim took a signal")
	}
}

// startedUntil starts cmd and returns once a line of its stderr contains marker, with the rest of
// stderr to read from r and what was read so far in text; a command that ends first is a test
// failure naming what (the step it never reached).
func startedUntil(t *testing.T, cmd *exec.Cmd, marker, what string) (r *bufio.Reader, text *strings.Builder) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r, text = bufio.NewReader(stderr), &strings.Builder{}
	for !strings.Contains(text.String(), marker) {
		line, err := r.ReadString('\n')
		text.WriteString(line)
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%s never %s: %s", cmd.Args[1], what, text.String())
		}
	}
	return r, text
}

// synthStarted starts synth writing a checkpoint large enough to take a while into out and
// returns once the weights file is being written (its first progress line).
func synthStarted(t *testing.T, out string) *exec.Cmd {
	t.Helper()
	cmd := octlmCommand(t, "synth", "--like", "tiny", "--no-tokenizer", "--vocab", "1000000", "--out", out)
	r, _ := startedUntil(t, cmd, "synth: model.safetensors", "started the weights")
	go io.Copy(io.Discard, r)
	return cmd
}

// TestSynthKilled: synth ended by SIGTERM removes its hidden folder (exit 143); ended by
// SIGKILL it cannot, so the next synth beside it, with --force or to another folder, removes
// what the dead one left.
func TestSynthKilled(t *testing.T) {
	t.Run("SIGTERM", func(t *testing.T) {
		root := t.TempDir()
		cmd := synthStarted(t, filepath.Join(root, "ckpt"))
		cmd.Process.Signal(syscall.SIGTERM)
		if code := waitExit(t, cmd); code != 143 {
			t.Fatalf("exit %d, want 143", code)
		}
		if left, _ := os.ReadDir(root); len(left) > 0 {
			t.Errorf("left %v", left)
		}
	})
	for _, next := range []string{"same folder --force", "another folder"} {
		t.Run("SIGKILL then "+next, func(t *testing.T) {
			root := t.TempDir()
			out := filepath.Join(root, "ckpt")
			cmd := synthStarted(t, out)
			cmd.Process.Kill()
			waitExit(t, cmd)
			left := hiddenLeft(t, root)
			if len(left) != 1 || !strings.Contains(left[0], ".synth-") {
				t.Fatalf("after SIGKILL: %v, want the hidden folder of the killed run", left)
			}
			args := []string{"--like", "tiny", "--no-tokenizer", "--force", "--out", out}
			if next == "another folder" {
				args = []string{"--like", "tiny", "--no-tokenizer", "--out", filepath.Join(root, "other")}
			}
			if err := runSynth(args, io.Discard, io.Discard); err != nil {
				t.Fatal(err)
			}
			if left := hiddenLeft(t, root); len(left) > 0 {
				t.Errorf("the next run left %v", left)
			}
		})
	}
}

// prefillStarted starts generate on a prompt of 40,000 token IDs (a prefill of minutes on the
// pure-Go backend, which reads no context until the first token) and returns once the weights
// are loaded, with the rest of stderr being collected into the returned builder.
func prefillStarted(t *testing.T, scratch string) (*exec.Cmd, *strings.Builder, <-chan struct{}) {
	t.Helper()
	ids := strings.TrimSuffix(strings.Repeat("5,", 40_000), ",")
	cmd := octlmCommand(t, "generate", "--model", testdata("tiny-qwen3"), "--prompt-ids", ids, "--max-new-tokens", "1")
	cmd.Env = append(cmd.Env, "TMPDIR="+scratch)
	r, text := startedUntil(t, cmd, "): done in", "finished loading")
	copied := make(chan struct{})
	go func() { io.Copy(text, r); close(copied) }()
	return cmd, text, copied
}

// TestSignalDuringCPUWork: a command that claimed a signal to stop gracefully but is stuck in
// work that reads no context (generate's prefill of a long prompt) is ended anyway once
// signalGrace has passed: exit 128 + the signal's number, well before the prefill would end,
// nothing left in $TMPDIR; a second signal ends it at once, without waiting for the grace.
func TestSignalDuringCPUWork(t *testing.T) {
	tests := []struct {
		name  string
		sigs  []syscall.Signal
		codes []int
		grace bool // ended by the grace, not by a second signal
	}{
		{"SIGTERM", []syscall.Signal{syscall.SIGTERM}, []int{143}, true},
		{"SIGINT", []syscall.Signal{syscall.SIGINT}, []int{130}, true},
		// The two are taken in either order: the claim takes one, the other ends the process.
		{"SIGINT then SIGTERM", []syscall.Signal{syscall.SIGINT, syscall.SIGTERM}, []int{130, 143}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scratch := t.TempDir()
			cmd, stderr, copied := prefillStarted(t, scratch)
			for _, s := range tt.sigs {
				if err := cmd.Process.Signal(s); err != nil {
					t.Fatal(err)
				}
			}
			ended := make(chan error, 1)
			go func() { ended <- cmd.Wait() }()
			select {
			case <-ended:
			case <-time.After(signalGrace + 15*time.Second): // the prefill alone takes minutes
				cmd.Process.Kill()
				<-ended
				t.Fatalf("still running %v after the signal", signalGrace+15*time.Second)
			}
			<-copied
			code := cmd.ProcessState.ExitCode()
			if !slices.Contains(tt.codes, code) {
				t.Errorf("exit %d, want one of %v\n%s", code, tt.codes, stderr.String())
			}
			byGrace := strings.Contains(stderr.String(), "still busy")
			if byGrace != tt.grace {
				t.Errorf("ended by the grace: %v, want %v\n%s", byGrace, tt.grace, stderr.String())
			}
			if left := hiddenLeft(t, scratch); len(left) > 0 {
				t.Errorf("temporaries left: %v", left)
			}
		})
	}
}
