//go:build linux

package main

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
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

// TestSignalsRemoveTemporaries: SIGTERM, SIGINT and SIGHUP end every command that writes the
// same way: exit 128 + the signal's number, the output being written (parity --out's
// temporary file beside the target, scratch folders under $TMPDIR) removed, the target as it
// was. Each command is caught waiting on a Hub that never answers, after it started its
// outputs.
func TestSignalsRemoveTemporaries(t *testing.T) {
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
// takes every one, and a released claim takes none.
func TestSignalClaims(t *testing.T) {
	if takenByClaim(syscall.SIGUSR1) {
		t.Fatal("an unclaimed signal was taken")
	}
	release := claimSignals(false, syscall.SIGUSR1)
	if !takenByClaim(syscall.SIGUSR1) || takenByClaim(syscall.SIGUSR1) {
		t.Error("a claim made once must take the first delivery and only it")
	}
	release()
	release = claimSignals(true, syscall.SIGUSR1)
	for i := range 3 {
		if !takenByClaim(syscall.SIGUSR1) {
			t.Errorf("delivery %d not taken by a claim made always", i+1)
		}
	}
	release()
	if takenByClaim(syscall.SIGUSR1) {
		t.Error("a released claim took a signal")
	}
}

// synthStarted starts synth writing a checkpoint large enough to take a while into out and
// returns once the weights file is being written (its first progress line).
func synthStarted(t *testing.T, out string) *exec.Cmd {
	t.Helper()
	cmd := octlmCommand(t, "synth", "--like", "tiny", "--no-tokenizer", "--vocab", "1000000", "--out", out)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stderr)
	var text strings.Builder
	for !strings.Contains(text.String(), "synth: model.safetensors") {
		line, err := r.ReadString('\n')
		text.WriteString(line)
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("synth never started the weights: %s", text.String())
		}
	}
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
