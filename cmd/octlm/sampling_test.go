package main

import (
	"errors"
	"flag"
	"io"
	"testing"

	"github.com/octlm/octlm/octlm"
)

// TestSamplingFlags: with no flags the settings are octlm.QwenDefaults (plus a seed); given flags
// override them; an out-of-range one is a usage error.
func TestSamplingFlags(t *testing.T) {
	qwen := octlm.QwenDefaults()
	tests := []struct {
		name      string
		args      []string
		want      octlm.Sampling
		wantUsage bool
		seedGiven bool
	}{
		{"defaults", nil, qwen, false, false},
		{"seed kept", []string{"--seed", "0"}, qwen, false, true},
		{"overrides", []string{"--temperature", "0", "--top-k", "5", "--top-p", "0.5", "--min-p", "0.1", "--repetition-penalty", "1.2", "--seed", "9"},
			octlm.Sampling{Temperature: 0, TopK: 5, TopP: 0.5, MinP: 0.1, RepetitionPenalty: 1.2, Seed: 9}, false, true},
		{"top-p past 1", []string{"--top-p", "1.5"}, octlm.Sampling{}, true, false},
		{"negative temperature", []string{"--temperature", "-1"}, octlm.Sampling{}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var sf samplingFlags
			sf.register(fs, "shown")
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			got, err := sf.sampling(fs)
			var u usageError
			if tt.wantUsage {
				if !errors.As(err, &u) {
					t.Fatalf("err = %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.seedGiven {
				got.Seed = tt.want.Seed // drawn at random
			}
			if got != tt.want {
				t.Errorf("sampling %+v, want %+v", got, tt.want)
			}
		})
	}
}
