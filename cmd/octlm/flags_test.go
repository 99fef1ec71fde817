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

// TestStopIDs reads generation_config.json's eos_token_id; a file that is there but unreadable
// is an error naming it, not a silent fall back.
func TestStopIDs(t *testing.T) {
	tests := []struct {
		name    string
		config  string // "" writes no generation_config.json
		want    []int
		wantErr bool
	}{
		{"list", `{"eos_token_id": [151645, 151643]}`, []int{151645, 151643}, false},
		{"one", `{"eos_token_id": 7}`, []int{7}, false},
		{"null is absent", `{"eos_token_id": null}`, nil, false},
		{"absent", `{"bos_token_id": 1}`, nil, false},
		{"no file", "", nil, false},
		{"malformed", `{"eos_token_id": [1, 2`, nil, true},
		{"wrong type", `{"eos_token_id": "eos"}`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.config != "" {
				if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(tt.config), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := stopIDs(dir, nil)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
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
