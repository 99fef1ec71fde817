package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/octlm/octlm/xla"
)

func TestBenchUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"no model", nil},
		{"bad dtype", []string{"--model", testdata("tiny-qwen3"), "--dtype", "f8"}},
		{"zero prompt", []string{"--model", testdata("tiny-qwen3"), "--prompt", "0"}},
		{"small bandwidth read", []string{"--model", testdata("tiny-qwen3"), "--bandwidth-gib", "0.5"}},
		{"zero reps", []string{"--model", testdata("tiny-qwen3"), "--reps", "0"}},
		{"stray argument", []string{"--model", testdata("tiny-qwen3"), "extra"}},
		{"negative depth", []string{"--model", testdata("tiny-qwen3"), "--depth", "-1"}},
		{"unknown KV cache dtype", []string{"--model", testdata("tiny-qwen3"), "--kv-dtype", "f8"}},
		{"unknown depth fill", []string{"--model", testdata("tiny-qwen3"), "--depth", "8", "--depth-fill", "ones"}},
		{"batch 0", []string{"--model", testdata("tiny-qwen3"), "--batch", "0"}},
		{"batch not a number", []string{"--model", testdata("tiny-qwen3"), "--batch", "1,two"}},
		{"batch given twice", []string{"--model", testdata("tiny-qwen3"), "--batch", "2,4,2"}},
		{"batch too large", []string{"--model", testdata("tiny-qwen3"), "--batch", "5000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := runBench(tt.args, &out, &errOut)
			var ue usageError
			if !errors.As(err, &ue) {
				t.Fatalf("got %v, want a usage error", err)
			}
			if out.Len() != 0 {
				t.Fatalf("wrote results for bad usage: %q", out.String())
			}
		})
	}
}

// TestBenchJSON runs the benchmark on the tiny fixture and checks the JSON carries the keys the
// issue names, with results on stdout only.
func TestBenchJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 1 GiB for the bandwidth measurement")
	}
	var out, errOut bytes.Buffer
	err := runBench([]string{"--model", testdata("tiny-qwen3"), "--backend", "go", "--prompt", "8", "--decode", "3", "--batch", "3", "--json"}, &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out.String())
	}
	for _, key := range []string{"prefill_tokens_per_second", "decode_tokens_per_second", "decode_ms_per_token",
		"roofline_ratio", "read_bandwidth_bytes_per_second", "load_read_ratio", "peak_rss_bytes",
		"compile_seconds", "backend", "dtype", "time_to_first_token_seconds", "kv_cache_bytes_per_position"} {
		if _, ok := got[key]; !ok {
			t.Errorf("missing key %q", key)
		}
	}
	if got["backend"] != "go" || got["dtype"] != "f32" || got["decode_tokens"] != 3.0 {
		t.Errorf("backend %v, dtype %v, decode_tokens %v: want go, f32, 3", got["backend"], got["dtype"], got["decode_tokens"])
	}
	// --batch 3: a row for B=1 and one for B=3, in the keys of the single-sequence decode.
	rows, _ := got["batches"].([]any)
	var batches []float64
	for _, r := range rows {
		row, _ := r.(map[string]any)
		for _, key := range []string{"decode_tokens_per_second", "decode_seconds", "decode_ms_per_step", "speed_up"} {
			if _, ok := row[key].(float64); !ok {
				t.Errorf("batch row %v lacks %q", row, key)
			}
		}
		b, _ := row["batch"].(float64)
		batches = append(batches, b)
		if row["decode_tokens"] != 3.0 {
			t.Errorf("batch row %v: decode_tokens %v, want 3", row, row["decode_tokens"])
		}
	}
	if !slices.Equal(batches, []float64{1, 3}) {
		t.Errorf("batch rows for %v, want 1 and 3", batches)
	}
	if !strings.Contains(errOut.String(), "loading") {
		t.Errorf("no progress on stderr: %q", errOut.String())
	}
}

// TestBenchBeyondContext: lengths past the context are refused, huge ones too (their sum must
// not overflow int on its way to the KV cache).
func TestBenchBeyondContext(t *testing.T) {
	t.Setenv(xla.EnvBackend, "go")
	for _, n := range []string{"40961", "4611686018427387904"} {
		var out, errOut bytes.Buffer
		err := runBench([]string{"--model", testdata("tiny-qwen3"), "--prompt", n, "--decode", n}, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), "context length") {
			t.Errorf("--prompt %s --decode %s: %v, want a context-length error", n, n, err)
		}
		err = runBench([]string{"--model", testdata("tiny-qwen3"), "--depth", n, "--depth-fill", "zeros"}, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), "context length") {
			t.Errorf("--depth %s: %v, want a context-length error", n, err)
		}
	}
}
