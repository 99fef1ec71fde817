package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/octlm/octlm/octlm/synth"
	"github.com/octlm/octlm/parity"
	"github.com/octlm/octlm/xla"
)

// fixtureAdapter is the LoRA adapter fine-tuned on tiny-qwen3 (testdata/tiny-qwen3-finetune).
func fixtureAdapter() string { return testdata("tiny-qwen3-finetune", "lora", "reference-adapter") }

// TestParityAdapterLlamaCpp checks octlm with the adapter unmerged against llama.cpp's logits of
// the same base + adapter (testdata/tiny-qwen3-finetune/lora/llamacpp-reference): every gated row
// within 1e-4 with the adapter, and far off without it (the reference is not the base model's),
// on the pure-Go backend and on ONNX Runtime where it is found.
func TestParityAdapterLlamaCpp(t *testing.T) {
	ref := testdata("tiny-qwen3-finetune", "lora", "llamacpp-reference")
	tests := []struct {
		name    string
		backend string
		adapter string
		// every gated row's max |error| within maxErr (with the adapter), or all above minErr
		maxErr, minErr float64
	}{
		{"go, with the adapter", "go", fixtureAdapter(), 1e-4, 0},
		{"go, without it", "go", "", 0, 1},
		{"onnx, with the adapter", "onnx", fixtureAdapter(), 1e-4, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := xla.DefaultPlaces().FindONNX(); err != nil && tt.backend == "onnx" {
				t.Skip("no ONNX Runtime library found; install it with: " + xla.ONNXInstallCommand)
			}
			out := filepath.Join(t.TempDir(), "rows.jsonl")
			args := []string{"--model", testdata("tiny-qwen3"), "--backend", tt.backend, "--reference", ref, "--out", out}
			if tt.adapter != "" {
				args = append(args, "--adapter", tt.adapter)
			}
			var stdout, stderr bytes.Buffer
			err := runParity(args, &stdout, &stderr)
			if tt.adapter != "" && err != nil {
				t.Fatalf("%v\n%s%s", err, stdout.String(), stderr.String())
			}
			if tt.adapter == "" && !errors.Is(err, parity.ErrFailed) {
				t.Fatalf("err = %v, want the gate to fail", err)
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			gated := 0
			for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
				var row struct {
					Type         string            `json:"type"`
					Adapter      string            `json:"adapter"`
					AdapterFiles map[string]string `json:"adapter_files"`
					MaxAbs       float64           `json:"max_absolute_error"`
				}
				if err := json.Unmarshal([]byte(line), &row); err != nil {
					t.Fatalf("line %d: %v", i, err)
				}
				switch row.Type {
				case "run":
					_, hashed := row.AdapterFiles["adapter_model.safetensors"]
					if row.Adapter != tt.adapter || hashed != (tt.adapter != "") {
						t.Errorf("run line names adapter %q with files %v, want %q", row.Adapter, row.AdapterFiles, tt.adapter)
					}
				case "logit_parity":
					gated++
					if tt.adapter != "" && !(row.MaxAbs <= tt.maxErr) || tt.adapter == "" && !(row.MaxAbs > tt.minErr) {
						t.Errorf("line %d: max |error| %g (want ≤ %g with the adapter, > %g without)", i, row.MaxAbs, tt.maxErr, tt.minErr)
					}
				}
			}
			if gated != 8 {
				t.Errorf("%d gated rows, want 8", gated)
			}
			if tt.adapter != "" && !strings.Contains(stdout.String(), "adapter    "+tt.adapter) {
				t.Errorf("the report does not name the adapter:\n%s", stdout.String())
			}
		})
	}
}

// copyAdapter copies the fixture adapter into a temporary folder with its config's text
// edited by edit.
func copyAdapter(t *testing.T, edit func(string) string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"adapter_config.json", "adapter_model.safetensors"} {
		data, err := os.ReadFile(filepath.Join(fixtureAdapter(), name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "adapter_config.json" {
			data = []byte(edit(string(data)))
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// textModels writes two random checkpoints with Qwen3's tokenizer (chat needs one): fit has
// tiny-qwen3's Linear shapes, so the fixture adapter applies to it; misfit has other shapes.
func textModels(t *testing.T) (fit, misfit string) {
	t.Helper()
	fit, misfit = filepath.Join(t.TempDir(), "fit"), filepath.Join(t.TempDir(), "misfit")
	cfg := synth.Tiny()
	cfg.VocabSize, cfg.BOSTokenID, cfg.EOSTokenID = 151936, 151643, 151645
	if err := synth.Write(fit, cfg, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(misfit, synth.TinyText(), 1, nil); err != nil {
		t.Fatal(err)
	}
	return fit, misfit
}

// TestAdapterRefused: every command with --adapter refuses, before loading, an adapter octlm
// cannot apply exactly or that does not fit the model, naming the file or what does not fit;
// parity refuses --adapter without an explicit --reference.
func TestAdapterRefused(t *testing.T) {
	t.Setenv(xla.EnvBackend, "go")
	dora := copyAdapter(t, func(s string) string { return strings.Replace(s, `"use_dora": false`, `"use_dora": true`, 1) })
	textFit, textMisfit := textModels(t)
	tests := []struct {
		name    string
		adapter string
		misfit  bool   // on a model of other shapes
		want    string // in the error
	}{
		{"DoRA", dora, false, "adapter_config.json"},
		{"no such folder", filepath.Join(t.TempDir(), "none"), false, "--adapter"},
		{"another model's shapes", fixtureAdapter(), true, "does not fit the model"},
	}
	commands := []struct {
		name        string
		fit, misfit string
		run         func(model string, args []string, stdout, stderr *bytes.Buffer) error
	}{
		{"generate", testdata("tiny-qwen3"), testdata("tiny-qwen3-mha"), func(m string, a []string, o, e *bytes.Buffer) error {
			return runGenerate(append(a, "--prompt-ids", "1,2", "-n", "2"), o, e)
		}},
		{"chat", textFit, textMisfit, func(m string, a []string, o, e *bytes.Buffer) error {
			return runChatIO(a, strings.NewReader("hi\n"), o, e)
		}},
		{"parity", testdata("tiny-qwen3"), testdata("tiny-qwen3-mha"), func(m string, a []string, o, e *bytes.Buffer) error {
			return runParity(append(a, "--reference", filepath.Join(m, "reference")), o, e)
		}},
		{"bench", testdata("tiny-qwen3"), testdata("tiny-qwen3-mha"), func(m string, a []string, o, e *bytes.Buffer) error {
			return runBench(append(a, "--prompt", "4", "--decode", "2"), o, e)
		}},
	}
	for _, c := range commands {
		for _, tt := range tests {
			t.Run(c.name+"/"+tt.name, func(t *testing.T) {
				model := c.fit
				if tt.misfit {
					model = c.misfit
				}
				var stdout, stderr bytes.Buffer
				err := c.run(model, []string{"--model", model, "--adapter", tt.adapter}, &stdout, &stderr)
				if err == nil || errors.Is(err, errCheckFailed) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want bad input naming %q", err, tt.want)
				}
				if strings.Contains(stderr.String(), "loading") {
					t.Errorf("loaded the model before refusing the adapter:\n%s", stderr.String())
				}
			})
		}
	}
	var stdout, stderr bytes.Buffer
	err := runParity([]string{"--model", testdata("tiny-qwen3"), "--adapter", fixtureAdapter()}, &stdout, &stderr)
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--reference") {
		t.Errorf("parity --adapter without --reference: %v, want a usage error asking for --reference", err)
	}
}

// TestChatAdapter: a piped chat with the adapter replies, and greedily not as the base model does.
func TestChatAdapter(t *testing.T) {
	t.Setenv(xla.EnvBackend, "go")
	fit, _ := textModels(t)
	reply := func(args ...string) string {
		var stdout, stderr bytes.Buffer
		err := runChatIO(append([]string{"--model", fit, "--temperature", "0", "-n", "16", "--think=false"}, args...),
			strings.NewReader("What is 2 + 2?\n"), &stdout, &stderr)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		return stdout.String()
	}
	base, adapted := reply(), reply("--adapter", fixtureAdapter())
	if adapted == "" || adapted == base {
		t.Errorf("reply with the adapter %q, without %q: want a reply, and a different one", adapted, base)
	}
}

// TestGenerateAdapter: the adapter changes tiny-qwen3's greedy continuation, and generating with
// it unmerged gives the tokens of the checkpoint `octlm merge` writes (W + scale·B·A rounded
// once to bfloat16).
func TestGenerateAdapter(t *testing.T) {
	t.Setenv(xla.EnvBackend, "go")
	merged := filepath.Join(t.TempDir(), "merged")
	if got := run([]string{"merge", "--model", testdata("tiny-qwen3"), "--adapter", fixtureAdapter(), "--out", merged}); got != 0 {
		t.Fatalf("octlm merge exited %d", got)
	}
	generate := func(t *testing.T, args ...string) []int {
		t.Helper()
		var stdout, stderr bytes.Buffer
		err := runGenerate(append(args, "--temperature", "0", "-n", "24", "--json"), &stdout, &stderr)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		var res generationResult
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
			t.Fatalf("%v\n%s", err, stdout.String())
		}
		return res.GeneratedIDs
	}
	for _, prompt := range []string{"165,77,202", "77,202,24,37"} {
		t.Run(prompt, func(t *testing.T) {
			base := generate(t, "--model", testdata("tiny-qwen3"), "--prompt-ids", prompt)
			adapted := generate(t, "--model", testdata("tiny-qwen3"), "--adapter", fixtureAdapter(), "--prompt-ids", prompt)
			fromMerged := generate(t, "--model", merged, "--prompt-ids", prompt)
			if slices.Equal(base, adapted) {
				t.Errorf("the adapter changed nothing: %v", base)
			}
			if !slices.Equal(adapted, fromMerged) {
				t.Errorf("unmerged adapter %v\nmerged checkpoint %v", adapted, fromMerged)
			}
		})
	}
}
