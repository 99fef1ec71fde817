package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestModelPathErrors: a mistyped local folder, and a folder that is no checkpoint, are named
// as such (exit 2) by every command that takes -m, with no word of the Hub.
func TestModelPathErrors(t *testing.T) {
	empty := t.TempDir()
	nope := filepath.Join(testdata("tiny-qwen3") + "-nope")
	for _, c := range []struct {
		model, want string
	}{
		{nope, "no such folder (a local path"},
		{"./tiny-qwen3-nope", "no such folder (a local path"},
		{empty, empty + " is not a checkpoint: it has no config.json"},
	} {
		for _, cmd := range [][]string{
			{"generate", "-p", "Hi", "-n", "2"},
			{"chat"},
			{"parity"},
		} {
			args := append(append([]string{}, cmd[0], "--model", c.model), cmd[1:]...)
			_, stderr, code := runOctlm(t, "", args...)
			if code != 2 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "Hugging Face") || strings.Contains(stderr, "tokenizer.json") {
				t.Errorf("octlm %v: exit %d, want 2 and %q:\n%s", args, code, c.want, stderr)
			}
		}
	}
}
