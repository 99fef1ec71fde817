package main

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	_ "github.com/gomlx/compute/gobackend"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/parity"
	"github.com/octlm/octlm/xla"
)

// qwen35TraceReference writes a reference folder holding tiny-qwen35's case 1 and an activation
// dump of it made from octlm's own hidden states with one value moved after layer 1 at
// position 3.
func qwen35TraceReference(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(testdata("tiny-qwen35", "reference", parity.ReferenceFileName(1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, parity.ReferenceFileName(0)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	ref, err := parity.ReadReference(dir)
	if err != nil {
		t.Fatal(err)
	}
	backend, err := compute.NewWithConfig("go")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Finalize()
	m, err := octlm.Load(testdata("tiny-qwen35"), octlm.LoadOptions{Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ids := ref.Cases[0].IDs
	hidden, err := m.Trace(ids)
	if err != nil {
		t.Fatal(err)
	}
	width := m.Shape().Width
	hidden[2][3*width] += 1 // after layer 1, position 3
	idBytes := make([]byte, 8*len(ids))
	for i, id := range ids {
		binary.LittleEndian.PutUint64(idBytes[8*i:], uint64(id))
	}
	var h []byte
	for _, layer := range hidden {
		for _, v := range layer {
			h = binary.LittleEndian.AppendUint32(h, math.Float32bits(v))
		}
	}
	err = loader.WriteFile(filepath.Join(dir, parity.ActivationsFileName(0)), []loader.WriteTensor{
		{Name: parity.IDsTensor, DType: loader.I64, Shape: []int{len(ids)}, Data: idBytes},
		{Name: "hidden", DType: loader.F32, Shape: []int{len(hidden), len(ids), width}, Data: h},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// qwen35LogitsOnly is a reference folder with tiny-qwen35's case 0 logits and no activations.
func qwen35LogitsOnly(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(testdata("tiny-qwen35", "reference", parity.ReferenceFileName(0)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, parity.ReferenceFileName(0)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestQwen35Commands runs the commands on Qwen3.5 checkpoints: the fixture, and a small one
// synth writes in the Hub's multimodal layout at qwen3.5-0.8b's head geometry.
func TestQwen35Commands(t *testing.T) {
	fixture := testdata("tiny-qwen35")
	synthDir := filepath.Join(t.TempDir(), "q35")
	traceRef := qwen35TraceReference(t)
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   []string
		stderr   []string
		notInOut []string
	}{
		{"parity", []string{"parity", "--model", fixture}, 0, []string{"PASS: all 10 comparisons"}, nil, nil},
		{"parity sharded, untied, trace", []string{"parity", "--model", testdata("tiny-qwen35-sharded"), "--trace"}, 0,
			[]string{"PASS: all 8 comparisons", "case 3: every hidden state agrees"}, nil, nil},
		{"parity trace without dumps", []string{"parity", "--model", fixture, "--reference", qwen35LogitsOnly(t), "--trace"}, 2, nil, []string{"reference-activations-0.safetensors"}, nil},
		{"parity trace", []string{"parity", "--model", fixture, "--reference", traceRef, "--trace"}, 0,
			[]string{"part first after layer 1 (linear_attention), at position 3", "embedding"}, nil, nil},
		{"inspect", []string{"inspect", fixture}, 0, []string{"Qwen3_5ForConditionalGeneration", "LLLF", "model.visual.* 2 tensors", "mtp.* 2 tensors"}, nil, nil},
		{"generate ids", []string{"generate", "-m", fixture, "--prompt-ids", "1,2,3", "--temperature", "0", "--max-new-tokens", "24"}, 0,
			[]string{"365 365 365 365 365 365 365 381 129 102 13 490 365 365 365 365 365 365 365 365 365 194 387 399"}, nil, nil},
		{"generate text", []string{"generate", "-m", fixture, "-p", "hello"}, 2, nil, []string{"--prompt-ids", "Qwen3.5 runs on token IDs"}, nil},
		{"generate bad id", []string{"generate", "-m", fixture, "--prompt-ids", "1,512"}, 2, nil, []string{"outside the vocabulary [0, 512)"}, nil},
		{"synth", []string{"synth", "--like", "qwen3.5-0.8b", "--layers", "4", "--vocab", "1024", "--hidden", "64", "--ff", "96", "--out", synthDir}, 0,
			[]string{"Qwen3.5 (4 layers: 3 linear_attention, 1 full_attention)"}, nil, nil},
		{"synth inspect", []string{"inspect", synthDir}, 0, []string{"attention 8/2 heads × 256 (64 rotary)", "DeltaNet 16 key / 16 value heads", "F32 x3"}, nil, nil},
		{"synth generate", []string{"generate", "-m", synthDir, "--prompt-ids", "5,6,7", "--temperature", "0", "--max-new-tokens", "4"}, 0, nil, []string{"4 generated"}, nil},
		{"synth bench", []string{"bench", "--model", synthDir, "--prompt", "8", "--decode", "4"}, 0, []string{"prefill", "decode"}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runOctlm(t, "", tt.args...)
			if code != tt.code {
				t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			for _, want := range tt.stdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout)
				}
			}
			for _, want := range tt.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
		})
	}
}

// TestQwen35ONNX runs parity and greedy generation on ONNX Runtime, where it is installed.
func TestQwen35ONNX(t *testing.T) {
	if _, _, err := xla.DefaultPlaces().FindONNX(); err != nil {
		t.Skip("no ONNX Runtime library found; install it with: " + xla.ONNXInstallCommand)
	}
	fixture := testdata("tiny-qwen35")
	tests := []struct {
		name   string
		args   []string
		stdout string
	}{
		{"parity", []string{"parity", "--backend", "onnx", "--model", fixture}, "PASS: all 10 comparisons"},
		{"generate", []string{"generate", "--backend", "onnx", "-m", fixture, "--prompt-ids", "7", "--temperature", "0", "--max-new-tokens", "24"},
			"381 381 341 426 156 290 102 479 466 268 501 501 501 469 470 490 388 216 59 135 87 311 397 36"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runOctlm(t, "", tt.args...)
			if code != 0 || !strings.Contains(stdout, tt.stdout) {
				t.Errorf("octlm %q: exit %d, stdout lacks %q\nstdout:\n%s\nstderr:\n%s", tt.args, code, tt.stdout, stdout, stderr)
			}
		})
	}
}
