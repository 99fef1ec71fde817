package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/parity"
	"github.com/octlm/octlm/xla"
)

func testdata(parts ...string) string {
	return filepath.Join(append([]string{"..", "..", "testdata"}, parts...)...)
}

// movedReference copies tiny-qwen3's reference into a temporary folder with one logit of case 2
// moved by 0.01.
func movedReference(t *testing.T) string {
	t.Helper()
	ref, err := parity.ReadReference(testdata("tiny-qwen3", "reference"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range ref.Cases {
		l, err := c.Logits()
		if err != nil {
			t.Fatal(err)
		}
		if c.Index == 2 {
			l.Data[5*l.Vocab+100] -= 0.01
		}
		ids := make([]byte, 8*len(c.IDs))
		for i, id := range c.IDs {
			binary.LittleEndian.PutUint64(ids[8*i:], uint64(id))
		}
		data := make([]byte, 4*len(l.Data))
		for i, v := range l.Data {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
		}
		err = loader.WriteFile(filepath.Join(dir, parity.ReferenceFileName(c.Index)), []loader.WriteTensor{
			{Name: parity.IDsTensor, DType: loader.I64, Shape: []int{len(c.IDs)}, Data: ids},
			{Name: parity.LogitsTensor, DType: loader.F32, Shape: []int{l.Rows, l.Vocab}, Data: data},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// brokenCheckpoint is a folder with tiny-qwen3's config and reference but a truncated checkpoint.
func brokenCheckpoint(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cfg, err := os.ReadFile(testdata("tiny-qwen3", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	weights, err := os.ReadFile(testdata("tiny-qwen3", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644)
	os.WriteFile(filepath.Join(dir, "model.safetensors"), weights[:len(weights)/2], 0o644)
	return dir
}

// TestParityExitCodes runs `octlm parity` through the command dispatcher: 0 when the gate passes,
// 1 when it fails, 2 on bad input or usage.
func TestParityExitCodes(t *testing.T) {
	t.Setenv(xla.EnvBackend, "go")
	moved := movedReference(t)
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"bundled, no flags", nil, 0},
		{"tiny-qwen3", []string{"--model", testdata("tiny-qwen3")}, 0},
		{"tiny-qwen3-mha", []string{"--model", testdata("tiny-qwen3-mha"), "--reference", testdata("tiny-qwen3-mha", "reference")}, 0},
		{"tiny-qwen3-untied (sharded)", []string{"--model", testdata("tiny-qwen3-untied")}, 0},
		{"untied model, tied model's reference", []string{"--model", testdata("tiny-qwen3-untied"), "--reference", testdata("tiny-qwen3", "reference")}, 2},
		{"help", []string{"-h"}, 0},
		{"one logit moved by 0.01", []string{"--reference", moved}, 1},
		{"moved, explicit model", []string{"--model", testdata("tiny-qwen3"), "--reference", moved, "--backend", "go"}, 1},
		{"missing reference", []string{"--reference", filepath.Join(t.TempDir(), "none")}, 2},
		{"checkpoint without a reference", []string{"--model", brokenCheckpoint(t)}, 2},
		{"vocabulary mismatch", []string{"--reference", testdata("tiny-qwen3-mha", "reference")}, 2},
		{"unreadable checkpoint", []string{"--model", brokenCheckpoint(t), "--reference", testdata("tiny-qwen3", "reference")}, 2},
		{"no such model folder", []string{"--model", filepath.Join(t.TempDir(), "nope")}, 2},
		{"unknown backend", []string{"--backend", "tpu"}, 2},
		{"f32 in --dtypes", []string{"--dtypes", "f32"}, 2},
		{"bad --dtypes", []string{"--dtypes", "bf16,int8"}, 2},
		{"extra argument", []string{"extra"}, 2},
		{"unknown flag", []string{"--tolerance", "0.1"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := run(append([]string{"parity"}, tt.args...)); got != tt.want {
				t.Errorf("octlm parity %q exited %d, want %d", tt.args, got, tt.want)
			}
		})
	}
}

// TestParityONNX runs parity on ONNX Runtime for both fixtures (its graph differs: RMSNorm
// divides by Sqrt, the embedding is sliced per token) where the library is found; CI installs it.
func TestParityONNX(t *testing.T) {
	if _, _, err := xla.DefaultPlaces().FindONNX(); err != nil {
		t.Skip("no ONNX Runtime library found; install it with: " + xla.ONNXInstallCommand)
	}
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"tiny-qwen3", []string{"--model", testdata("tiny-qwen3")}, 0},
		{"tiny-qwen3-mha", []string{"--model", testdata("tiny-qwen3-mha")}, 0},
		{"tiny-qwen3-untied", []string{"--model", testdata("tiny-qwen3-untied")}, 0},
		// A float16 KV cache is written by slices: ONNX Runtime has no float16 scatter-add.
		{"tiny-qwen3 f16", []string{"--model", testdata("tiny-qwen3"), "--dtypes", "f16"}, 0},
		{"one logit moved by 0.01", []string{"--reference", movedReference(t)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := run(append([]string{"parity", "--backend", "onnx"}, tt.args...)); got != tt.want {
				t.Errorf("octlm parity --backend onnx %q exited %d, want %d", tt.args, got, tt.want)
			}
		})
	}
}

// TestParityOutput checks what a passing and a failing run print and write.
func TestParityOutput(t *testing.T) {
	t.Setenv(xla.EnvBackend, "go")
	tests := []struct {
		name       string
		args       []string
		wantErr    string
		wantStdout []string
		okRows     int
		// wantNumbers: a line of stdout starting with the key holds the value (± 1e-4) as its
		// last field (table rows) or after the key (messages). The decoder's own error at the
		// moved logit (~3e-5) adds to or subtracts from 0.01 depending on the CPU's kernels, so
		// such numbers are never compared as formatted text.
		wantNumbers map[string]float64
	}{
		{"bundled", nil, "", []string{"model      tiny-qwen3 (bundled)", "peak RSS   ", "   3  cached        188", "PASS: all 8 comparisons within 0.001",
			"top token agrees at 520 of 520 positions"}, 8, nil},
		{"moved logit", []string{"--reference", movedReference(t)}, "float32 full logit parity failed on case 2: ",
			[]string{"FAIL: float32 full logit parity failed on case 2: ", "(2 of 8 comparisons failed"}, 6,
			map[string]float64{"   2  full           64 ": 0.01, "   2  cached         64 ": 0.01, "FAIL: float32 full logit parity failed on case 2: ": 0.01}},
		{"half precision", []string{"--dtypes", "bf16"}, "", []string{"half precision, not gated", "bf16      3  cached        188",
			"greedy tokens against the float32 model's", "PASS: all 8"}, 8, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "rows.jsonl")
			var stdout, stderr bytes.Buffer
			err := runParity(append(tt.args, "--out", out), &stdout, &stderr)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("err = %v\n%s", err, stderr.String())
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) || !errors.Is(err, errCheckFailed) || !errors.Is(err, parity.ErrFailed)):
				t.Fatalf("err = %v, want a failed check starting %q", err, tt.wantErr)
			}
			for _, w := range tt.wantStdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
			for key, want := range tt.wantNumbers {
				if got, ok := numberAfter(stdout.String(), key); !ok || math.Abs(got-want) > 1e-4 {
					t.Errorf("stdout line %q: %v (found %v), want %v ± 1e-4:\n%s", key, got, ok, want, stdout.String())
				}
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			wantKeys := []string{"argmax_agreement", "argmax_matches", "case", "max_absolute_error", "mean_absolute_error", "path", "positions", "tolerance", "type"}
			ok, gated := 0, 0
			for i, line := range lines {
				var row map[string]any
				if err := json.Unmarshal([]byte(line), &row); err != nil {
					t.Fatalf("line %d: %v", i, err)
				}
				if i == 0 {
					rss, _ := row["peak_rss_bytes"].(float64)
					if row["type"] != "run" || row["backend"] != "go" || row["model"] != "tiny-qwen3 (bundled)" ||
						(runtime.GOOS == "linux" && !(rss > 0)) {
						t.Errorf("first line %s", line)
					}
					continue
				}
				if row["type"] != "logit_parity" {
					continue
				}
				gated++
				keys := make([]string, 0, len(row))
				for k := range row {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				if !slices.Equal(keys, wantKeys) {
					t.Errorf("line %d keys %v, want %v", i, keys, wantKeys)
				}
				if row["max_absolute_error"].(float64) <= parity.Tolerance {
					ok++
				}
			}
			if gated != 8 || ok != tt.okRows {
				t.Errorf("%d gated rows, %d within the gate; want 8 and %d", gated, ok, tt.okRows)
			}
		})
	}
}

func TestParseHalfDTypes(t *testing.T) {
	got, err := parseHalfDTypes("bf16, float16")
	if err != nil || len(got) != 2 || got[0] != "bf16" || got[1] != "f16" {
		t.Errorf("parseHalfDTypes = %v, %v", got, err)
	}
	for _, bad := range []string{"f32", "bf16,bf16", "bf16,", "int8"} {
		var ue usageError
		if _, err := parseHalfDTypes(bad); !errors.As(err, &ue) {
			t.Errorf("parseHalfDTypes(%q) = %v, want a usage error", bad, err)
		}
	}
}

// numberAfter finds the first line of out that starts with key and parses the first number
// after it (the max abs err column of a table row, or the number in a message).
func numberAfter(out, key string) (float64, bool) {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, key)
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, false
		}
		v, err := strconv.ParseFloat(strings.TrimRight(fields[0], ":;,"), 64)
		return v, err == nil
	}
	return 0, false
}

// TestParityHalfNoRoom: --dtypes on a reference whose case fills the context (the long-context
// fixture: 40960 of 40960 positions) leaves no room for the half-precision report's greedy
// tokens. It used to run the whole gated float32 run first (9 minutes) and then fail; it is
// refused before any backend is opened or model loaded, saying why, and --out is left alone.
func TestParityHalfNoRoom(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "p.jsonl")
	var stderr bytes.Buffer
	err := runParity([]string{"--backend", "go", "--model", testdata("tiny-qwen3-long"), "--dtypes", "bf16,f16", "--out", out}, io.Discard, &stderr)
	if err == nil || errors.Is(err, errCheckFailed) {
		t.Fatalf("got %v, want bad input (exit status 2)", err)
	}
	for _, want := range []string{"--dtypes", "40960 positions", "32 greedy tokens", "at most 40928 positions"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(stderr.String(), "backend:") || strings.Contains(stderr.String(), "loading") {
		t.Errorf("work began before the refusal:\n%s", stderr.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left %v in the --out folder", entries)
	}
}
