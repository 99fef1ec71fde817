package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/octlm/octlm/loader"
)

// TestTinyTextModel follows the quickstart: `octlm synth --like tiny` writes a checkpoint of a
// few MB whose vocabulary holds Qwen3's tokenizer, so `generate -p Hello` turns text into text
// and chat holds a turn; with --no-tokenizer, tiny is still the fixture's shape.
func TestTinyTextModel(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "qwen3-tiny")
	var out bytes.Buffer
	if err := runSynth([]string{"--like", "tiny", "--out", dir}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, loader.SingleFileName))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 12<<20 {
		t.Errorf("the tiny text model's weights are %d bytes, want a few MB", st.Size())
	}
	stdout, stderr, code := runOctlm(t, "", "generate", "-m", dir, "-p", "Hello", "-n", "8", "--temperature", "0")
	if code != 0 || strings.TrimSpace(stdout) == "" || !utf8.ValidString(stdout) {
		t.Fatalf("generate -p Hello: exit %d, stdout %q\nstderr: %s", code, stdout, stderr)
	}
	stdout, stderr, code = runOctlm(t, "Hello\n/stats\n", "chat", "-m", dir, "-n", "8")
	if code != 0 || !strings.Contains(stdout, "2 messages") {
		t.Errorf("chat: exit %d, stdout %q\nstderr: %s", code, stdout, stderr)
	}

	fixture := filepath.Join(t.TempDir(), "fixture")
	if err := runSynth([]string{"--like", "tiny", "--no-tokenizer", "--out", fixture}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if cfg, err := os.ReadFile(filepath.Join(fixture, "config.json")); err != nil || !strings.Contains(string(cfg), `"vocab_size": 320`) {
		t.Errorf("--like tiny --no-tokenizer: %v\n%s", err, cfg)
	}
}
