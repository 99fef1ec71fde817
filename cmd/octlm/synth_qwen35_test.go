package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// qwen35SynthArgs write a Qwen3.5 checkpoint small in every way but its vocabulary, so that its
// weights take a few seconds to write (130 MiB).
func qwen35SynthArgs(out string) []string {
	return []string{"synth", "--like", "qwen3.5-0.8b", "--hidden", "64", "--ff", "128", "--layers", "4", "--vocab", "1000000", "--out", out}
}

// TestSynthQwen35Stopped: Qwen3.5's shapes go through the same atomic writer as Qwen3's: a
// signal while the weights are written removes the hidden folder and exits with 128 + the
// signal (143 for SIGTERM, not 130); after a SIGKILL the next run beside it removes what the
// killed one left.
func TestSynthQwen35Stopped(t *testing.T) {
	tests := []struct {
		name string
		sig  syscall.Signal
		code int
	}{
		{"SIGTERM", syscall.SIGTERM, 143},
		{"SIGINT", syscall.SIGINT, 130},
		{"SIGKILL", syscall.SIGKILL, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			out := filepath.Join(root, "ckpt")
			cmd := octlmCommand(t, qwen35SynthArgs(out)...)
			r, _ := startedUntil(t, cmd, "synth: model.safetensors", "started the weights")
			go io.Copy(io.Discard, r)
			cmd.Process.Signal(tt.sig)
			code := waitExit(t, cmd)
			if tt.sig != syscall.SIGKILL {
				if code != tt.code {
					t.Errorf("exit %d, want %d", code, tt.code)
				}
				if left, _ := os.ReadDir(root); len(left) > 0 {
					t.Errorf("left %v", left)
				}
				return
			}
			if left := hiddenLeft(t, root); len(left) != 1 || !strings.Contains(left[0], ".synth-") {
				t.Fatalf("after SIGKILL: %v, want the hidden folder of the killed run", left)
			}
			if err := runSynth([]string{"--like", "tiny", "--no-tokenizer", "--out", filepath.Join(root, "other")}, io.Discard, io.Discard); err != nil {
				t.Fatal(err)
			}
			if left := hiddenLeft(t, root); len(left) > 0 {
				t.Errorf("the next run left %v", left)
			}
		})
	}
}
