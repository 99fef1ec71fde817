package main

import (
	"bytes"
	"errors"
	"testing"

	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/xla"
)

// TestGenerateBeyondContext: a prompt plus --max-new-tokens past the context length (40,960 in
// tiny-qwen3's config) is bad input, exit status 2, before anything is generated; filling the
// context exactly is allowed (not run here: 40,957 decode steps).
func TestGenerateBeyondContext(t *testing.T) {
	t.Setenv(xla.EnvBackend, "go")
	for _, maxNew := range []string{"40958", "1000000", "4611686018427387904"} {
		args := []string{"--model", testdata("tiny-qwen3"), "--prompt-ids", "5,6,7", "--temperature", "0", "--max-new-tokens", maxNew}
		var stdout, stderr bytes.Buffer
		err := runGenerate(args, &stdout, &stderr)
		var ce *octlm.ContextError
		if !errors.As(err, &ce) || ce.Prompt != 3 || ce.ContextLength != 40960 || stdout.Len() != 0 {
			t.Errorf("--max-new-tokens %s: %v (stdout %q), want a *ContextError and no output", maxNew, err, stdout.String())
		}
		if code := run(append([]string{"generate"}, args...)); code != 2 {
			t.Errorf("--max-new-tokens %s: exit status %d, want 2", maxNew, code)
		}
	}
}
