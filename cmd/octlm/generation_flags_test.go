package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/octlm/octlm/octlm"
)

// TestGenerationFlags: with no flags the sampling settings are octlm.QwenDefaults (plus a
// seed drawn at random); given flags override them; a setting out of range is a usage error.
func TestGenerationFlags(t *testing.T) {
	qwen := octlm.QwenDefaults()
	seeded := func(s octlm.Sampling, seed uint64) octlm.Sampling { s.Seed = seed; return s }
	tests := []struct {
		name      string
		args      []string
		want      octlm.GenerateOptions
		wantUsage bool
		seedGiven bool
	}{
		{"defaults", nil, octlm.GenerateOptions{MaxNewTokens: 7, Sampling: qwen}, false, false},
		{"seed kept", []string{"--seed", "3"}, octlm.GenerateOptions{MaxNewTokens: 7, Sampling: seeded(qwen, 3)}, false, true},
		{"overrides", []string{"-n", "2", "--temperature", "0", "--top-k", "5", "--top-p", "0.5", "--min-p", "0.1", "--repetition-penalty", "1.2", "--seed", "9"},
			octlm.GenerateOptions{MaxNewTokens: 2, Sampling: octlm.Sampling{Temperature: 0, TopK: 5, TopP: 0.5, MinP: 0.1, RepetitionPenalty: 1.2, Seed: 9}}, false, true},
		{"no new tokens", []string{"--max-new-tokens", "0"}, octlm.GenerateOptions{}, true, false},
		{"top-p past 1", []string{"--top-p", "1.5"}, octlm.GenerateOptions{}, true, false},
		{"negative temperature", []string{"--temperature", "-1"}, octlm.GenerateOptions{}, true, false},
		{"zero repetition penalty", []string{"--repetition-penalty", "0"}, octlm.GenerateOptions{}, true, false},
		{"negative repetition penalty", []string{"--repetition-penalty", "-0.5"}, octlm.GenerateOptions{}, true, false},
		{"NaN repetition penalty", []string{"--repetition-penalty", "NaN"}, octlm.GenerateOptions{}, true, false},
		{"infinite repetition penalty", []string{"--repetition-penalty", "+Inf"}, octlm.GenerateOptions{}, true, false},
		{"float16 KV cache", []string{"--kv-dtype", "f16"}, octlm.GenerateOptions{MaxNewTokens: 7, Sampling: qwen, KVDType: octlm.Float16}, false, false},
		{"float32 KV cache", []string{"--kv-dtype", "f32"}, octlm.GenerateOptions{MaxNewTokens: 7, Sampling: qwen, KVDType: octlm.Float32}, false, false},
		{"unknown KV cache dtype", []string{"--kv-dtype", "f8"}, octlm.GenerateOptions{}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var gf generationFlags
			gf.register(fs, 7, "most tokens", "shown")
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			got, err := gf.options(fs)
			var u usageError
			if tt.wantUsage {
				if !errors.As(err, &u) {
					t.Fatalf("err = %v, want a usage error", err)
				}
				if flag := tt.args[0]; !strings.Contains(err.Error(), flag) && !strings.Contains(err.Error(), strings.TrimPrefix(flag, "--")) {
					t.Errorf("error %q does not name %s", err, flag)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.seedGiven {
				got.Sampling.Seed = tt.want.Sampling.Seed // drawn at random
			}
			if got.MaxNewTokens != tt.want.MaxNewTokens || got.Sampling != tt.want.Sampling || got.KVDType != tt.want.KVDType {
				t.Errorf("options %+v, want %+v", got, tt.want)
			}
		})
	}
}
