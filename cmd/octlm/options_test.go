package main

import (
	"strings"
	"testing"
)

// TestOutOfRangeOptions: values octlm used to accept with exit status 0 are usage errors
// (exit 2) that name the option and its range.
func TestOutOfRangeOptions(t *testing.T) {
	gen := []string{"generate", "-m", testdata("tiny-qwen3"), "--prompt-ids", "1,2", "-n", "1"}
	tests := []struct {
		args []string
		want []string
	}{
		{append(gen, "--repetition-penalty", "0"), []string{"--repetition-penalty", "greater than 0"}},
		{append(gen, "--backend", "go,parallelism=-1"), []string{"parallelism", "from 1 to 1024", `"-1"`}},
		{append(gen, "--backend", "onnx,intra_op_num_threads=999999999999"), []string{"intra_op_num_threads", "from 0 to 1024"}},
		{append(gen, "--backend", "go,,,,"), []string{`backend "go"`, "is empty"}},
		{[]string{"backends", "--backend", "go,parallelism=-1"}, []string{"parallelism", "from 1 to 1024"}},
		{[]string{"parity", "--backend", "go,,"}, []string{"is empty"}},
	}
	for _, tt := range tests {
		_, stderr, code := runOctlm(t, "", tt.args...)
		if code != 2 {
			t.Errorf("octlm %q: exit %d, want 2\n%s", tt.args, code, stderr)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("octlm %q: stderr lacks %q:\n%s", tt.args, w, stderr)
			}
		}
	}
}
