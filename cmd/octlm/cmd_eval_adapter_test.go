package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm/lora"
)

// adapterEvalModel writes tiny-qwen3 (the model the fixture adapter was trained on) in float32,
// so that merging rounds nothing, with a byte-level tokenizer whose IDs fit its 320-token
// vocabulary (octlm/tokenizer's small fixture; eos_token <s>).
func adapterEvalModel(t *testing.T) string {
	t.Helper()
	src := testdata("tiny-qwen3")
	dir := filepath.Join(t.TempDir(), "tiny-qwen3-f32")
	ck, err := loader.OpenCheckpoint(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var specs []loader.TensorSpec
	var entries []loader.Entry
	for e, err := range ck.Tensors() {
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, loader.TensorSpec{Name: e.Info.Name, DType: loader.F32, Shape: e.Info.Shape})
		entries = append(entries, e)
	}
	err = lora.WriteModel(dir, src, specs, func(i int, w io.Writer) error {
		v := make([]float32, entries[i].Info.NumElements())
		if err := entries[i].File.ReadFloat32(entries[i].Info, v); err != nil {
			return err
		}
		return lora.EncodeFloat32(w, v, loader.F32)
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(filepath.Join("..", "..", "octlm", "tokenizer", "testdata", "small.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tok, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"eos_token": "<s>"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// evalRun is what one octlm eval run wrote: each loglikelihood request's log-likelihood (keyed
// "task doc_id request"), each generation ("task doc_id"), and the results file.
type evalRun struct {
	logLikelihoods map[string]float64
	generations    map[string]string
	results        map[string]map[string]any
	config         map[string]any
}

// runEvalSamples runs octlm eval with args and --output/--log-samples, and reads back what it
// wrote.
func runEvalSamples(t *testing.T, args ...string) evalRun {
	t.Helper()
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := runEval(context.Background(), append(args, "--output", out, "--log-samples"), &stdout, &stderr); err != nil {
		t.Fatalf("octlm eval %v: %v\n%s", args, err, stderr.String())
	}
	run := evalRun{logLikelihoods: map[string]float64{}, generations: map[string]string{}}
	var res struct {
		Results map[string]map[string]any `json:"results"`
		Configs map[string]map[string]any `json:"configs"`
		Config  map[string]any            `json:"config"`
	}
	readResults(t, out, &res)
	run.results, run.config = res.Results, res.Config
	samples, _ := filepath.Glob(filepath.Join(out, "*", "samples_*.jsonl"))
	for _, f := range samples {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
			var s struct {
				DocID  int     `json:"doc_id"`
				Filter string  `json:"filter"`
				Resps  [][]any `json:"resps"`
			}
			if err := json.Unmarshal(line, &s); err != nil {
				t.Fatalf("%s line %d: %v", f, i+1, err)
			}
			task := strings.TrimPrefix(filepath.Base(f), "samples_")
			task = task[:strings.LastIndex(task, "_")]
			for r, resp := range s.Resps {
				key := fmt.Sprintf("%s %d %d", task, s.DocID, r)
				v := resp[0]
				if pair, ok := v.([]any); ok { // loglikelihood: (log-likelihood, is_greedy)
					v = pair[0]
				}
				if res.Configs[task]["output_type"] == "generate_until" {
					run.generations[key+" "+s.Filter] = fmt.Sprint(v)
					continue
				}
				ll, err := strconv.ParseFloat(fmt.Sprint(v), 64)
				if err != nil {
					t.Fatalf("%s line %d: %v", f, i+1, err)
				}
				run.logLikelihoods[key] = ll
			}
		}
	}
	if len(run.logLikelihoods) == 0 {
		t.Fatalf("octlm eval %v: no log-likelihoods in the samples", args)
	}
	return run
}

// TestEvalAdapter: --adapter changes tiny-qwen3's log-likelihoods, gives those of the
// checkpoint `octlm merge` writes (float32, so within float32 rounding) and is named in the
// results' config; --batch 4 gives the same numbers.
func TestEvalAdapter(t *testing.T) {
	model := adapterEvalModel(t)
	merged := filepath.Join(t.TempDir(), "merged")
	var stderr bytes.Buffer
	if err := runMerge([]string{"--model", model, "--adapter", fixtureAdapter(), "--out", merged}, &stderr); err != nil {
		t.Fatalf("octlm merge: %v\n%s", err, stderr.String())
	}
	tasks := testdata("eval-tasks")
	common := []string{"--backend", "go", "--tasks", tasks, "--max-length", "48", "--limit", "3"}
	base := runEvalSamples(t, append([]string{"--model", model}, common...)...)
	adapted := runEvalSamples(t, append([]string{"--model", model, "--adapter", fixtureAdapter()}, common...)...)
	fromMerged := runEvalSamples(t, append([]string{"--model", merged}, common...)...)
	batched := runEvalSamples(t, append([]string{"--model", model, "--adapter", fixtureAdapter(), "--batch", "4"}, common...)...)

	if got := adapted.config["adapter"]; got != fixtureAdapter() {
		t.Errorf("config.adapter = %v, want %s", got, fixtureAdapter())
	}
	if got := base.config["adapter"]; got != nil {
		t.Errorf("config.adapter without --adapter = %v, want null", got)
	}
	if args, _ := adapted.config["model_args"].(string); !bytes.Contains([]byte(args), []byte("peft="+fixtureAdapter())) {
		t.Errorf("model_args %q does not name the adapter", args)
	}
	if len(adapted.logLikelihoods) != len(base.logLikelihoods) || len(adapted.logLikelihoods) != len(fromMerged.logLikelihoods) {
		t.Fatalf("%d, %d and %d log-likelihoods", len(base.logLikelihoods), len(adapted.logLikelihoods), len(fromMerged.logLikelihoods))
	}
	changed, worst, least := 0, 0.0, math.Inf(1)
	for k, ll := range adapted.logLikelihoods {
		moved := math.Abs(ll - base.logLikelihoods[k])
		if moved > 1e-2 {
			changed++
		}
		least = min(least, moved)
		m := fromMerged.logLikelihoods[k]
		if !(math.Abs(ll-m) <= 1e-4) {
			t.Errorf("%s: log-likelihood %v with the adapter, %v from the merged checkpoint", k, ll, m)
		}
		worst = max(worst, math.Abs(ll-m))
		// Batched requests run other shapes (padding, the cache read in blocks beside the
		// chunk): float32 rounding, a few ulps of a sum over the continuation's tokens.
		if b := batched.logLikelihoods[k]; !(math.Abs(ll-b) <= 1e-5+1e-6*math.Abs(ll)) {
			t.Errorf("%s: log-likelihood %v with the adapter, %v at --batch 4", k, ll, b)
		}
	}
	if batched.config["batch_size"] != 4.0 {
		t.Errorf("config.batch_size = %v, want 4", batched.config["batch_size"])
	}
	t.Logf("%d log-likelihoods: unmerged vs merged within %.2g; moved by the adapter %d of them by > 0.01 (least %.3g)", len(adapted.logLikelihoods), worst, changed, least)
	if changed < len(adapted.logLikelihoods)/2 {
		t.Errorf("the adapter moved only %d of %d log-likelihoods by more than 0.01", changed, len(adapted.logLikelihoods))
	}
	for k, g := range adapted.generations {
		if fromMerged.generations[k] != g || batched.generations[k] != g {
			t.Errorf("%s: generated %q with the adapter, %q from the merged checkpoint, %q at --batch 4", k, g, fromMerged.generations[k], batched.generations[k])
		}
	}
}
