package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/tokenizer"
	"github.com/octlm/octlm/xla"
)

// TestNumericFlagsAreUsageErrors: numbers a command cannot honour are refused as usage errors
// (exit 2) before any checkpoint is opened, not turned into a default or an overflow.
func TestNumericFlagsAreUsageErrors(t *testing.T) {
	t.Setenv(xla.EnvBackend, "go")
	missing := filepath.Join(t.TempDir(), "no-such-checkpoint")
	tests := []struct {
		name string
		run  func(args []string, stdout, stderr *bytes.Buffer) error
		args []string
	}{
		{"generate zero new tokens", genCmd, []string{"--model", missing, "--prompt-ids", "1", "--max-new-tokens", "0"}},
		{"generate negative new tokens", genCmd, []string{"--model", missing, "--prompt-ids", "1", "--max-new-tokens", "-3"}},
		{"bench NaN bandwidth", benchCmd, []string{"--model", missing, "--bandwidth-gib", "NaN"}},
		{"bench infinite bandwidth", benchCmd, []string{"--model", missing, "--bandwidth-gib", "+Inf"}},
		{"bench bandwidth past int64", benchCmd, []string{"--model", missing, "--bandwidth-gib", "1e12"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := tt.run(tt.args, &stdout, &stderr)
			var u usageError
			if !errors.As(err, &u) {
				t.Fatalf("err = %v, want a usage error", err)
			}
		})
	}
}

func genCmd(args []string, stdout, stderr *bytes.Buffer) error {
	return runGenerate(args, stdout, stderr)
}
func benchCmd(args []string, stdout, stderr *bytes.Buffer) error {
	return runBench(args, stdout, stderr)
}

// TestStopIDs: the CLI reads the checkpoint's stop tokens through octlm.ReadStopIDs, also for a
// checkpoint without a tokenizer (then with no Qwen3 fall back).
func TestStopIDs(t *testing.T) {
	tests := []struct {
		name   string
		config string // "" writes no generation_config.json
		tok    bool   // load the Qwen3 tokenizer
		want   []int
	}{
		{"eos_token_id", `{"eos_token_id": 7}`, false, []int{7}},
		{"no tokenizer, no eos_token_id", "", false, nil},
		{"the tokenizer's Qwen3 stop tokens", "", true, octlm.Qwen3StopIDs()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.config != "" {
				if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(tt.config), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var tok *tokenizer.Tokenizer
			if tt.tok {
				var err error
				if tok, err = loadTokenizer(qwenTokenizerDir); err != nil {
					t.Fatal(err)
				}
			}
			got, err := stopIDs(dir, tok)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("stop IDs %v, want %v", got, tt.want)
			}
		})
	}
}

// TestTokenizeKeepsOutputBeforeABadLine: the lines before a bad one are written out before
// the error, also when the input arrives all at once (a pipe or file).
func TestTokenizeKeepsOutputBeforeABadLine(t *testing.T) {
	tests := []struct {
		name, args, in string
		lines          int
	}{
		{"encode", "", "\"a\"\n\"b\"\nnot json\n\"c\"\n", 2},
		{"decode", "--decode", "[64]\n[65]\n[66]\n\"x\"\n", 3},
		{"first line bad", "", "1\n\"a\"\n", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"--model", qwenTokenizerDir}
			if tt.args != "" {
				args = append(args, tt.args)
			}
			var out, errOut bytes.Buffer
			err := runTokenizeIO(args, strings.NewReader(tt.in), &out, &errOut)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("line %d", tt.lines+1)) {
				t.Fatalf("err = %v, want one naming line %d", err, tt.lines+1)
			}
			if got := strings.Count(out.String(), "\n"); got != tt.lines {
				t.Errorf("%d lines written before the error, want %d: %q", got, tt.lines, out.String())
			}
		})
	}
}
