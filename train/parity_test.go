package train

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/octlm/octlm/loader"
)

// parityGates are the gates of a fixture run: gradients and losses as the issue sets them, the
// final adapter per architecture (Qwen3.5's float32 floor is 3.3e-6, Qwen3's 1.6e-7).
type parityGates struct{ grads, loss, adapter float64 }

// runFixture trains r in Go on the pure-Go backend: the step-1 gradients, every step's result,
// and the trainer after the last step.
func runFixture(t *testing.T, r fixtureRun, mo ModelOptions, edit func(*Settings)) ([][]float32, []StepResult, *Trainer) {
	t.Helper()
	res, err := RunReference(backendForTest(t), ReferenceRun{Model: r.model, Data: r.data, Dir: r.dir, LoRA: r.lora}, mo, edit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(res.Trainer.Close)
	return res.Grads, res.Steps, res.Trainer
}

// byName keys tensors by the trainer's names.
func byName(tr *Trainer, values [][]float32) map[string][]float32 {
	out := map[string][]float32{}
	for i, x := range tr.Trainable {
		out[x.Name] = values[i]
	}
	return out
}

// TestGradientParity trains each fixture run on the pure-Go backend and compares its step-1
// gradients, every step's loss, gradient norm, learning rate and counted tokens, and the final
// weights with the float64 PyTorch reference.
func TestGradientParity(t *testing.T) {
	gates := map[string]parityGates{
		"lora":             {grads: 1e-4, loss: 1e-4, adapter: 1e-5},
		"lora-clip-warmup": {grads: 1e-4, loss: 1e-4, adapter: 1e-5},
		"full-untied":      {grads: 1e-4, loss: 1e-4},
		"qwen35-lora":      {grads: 1e-4, loss: 1e-4, adapter: 5e-5},
	}
	for _, r := range fixtureRuns {
		t.Run(r.name, func(t *testing.T) {
			gate := gates[r.name]
			grads, results, tr := runFixture(t, r, ModelOptions{}, nil)
			name, gap := worst(tensorGap(t, "gradients", byName(tr, grads), readTensorFile(t, filepath.Join(r.dir, "reference-gradients.safetensors"))))
			t.Logf("gradients: worst %.3g of the tensor's largest entry (%s)", gap, name)
			if gap > gate.grads {
				t.Errorf("gradients: %s differs by %.3g of its largest entry, gate %g", name, gap, gate.grads)
			}
			want := referenceLosses(t, filepath.Join(r.dir, "reference-losses.json"))
			if len(results) != len(want) {
				t.Fatalf("%d steps, the reference %d", len(results), len(want))
			}
			var worstLoss, worstNorm float64
			for i, w := range want {
				g := results[i]
				worstLoss = max(worstLoss, math.Abs(g.Loss-w.Loss))
				worstNorm = max(worstNorm, math.Abs(g.GradNorm-w.GradNorm)/w.GradNorm)
				if math.Abs(g.Loss-w.Loss) > gate.loss || g.Tokens != w.Tokens || math.Abs(g.LR-w.LR) > 1e-12 {
					t.Errorf("step %d: loss %.8f tokens %d lr %g; reference %.8f, %d, %g", w.Step, g.Loss, g.Tokens, g.LR, w.Loss, w.Tokens, w.LR)
				}
				if math.Abs(g.GradNorm-w.GradNorm) > 1e-4*w.GradNorm {
					t.Errorf("step %d: gradient norm %.8f, reference %.8f", w.Step, g.GradNorm, w.GradNorm)
				}
			}
			t.Logf("losses: worst |Δ| %.3g; gradient norms: worst relative %.3g", worstLoss, worstNorm)
			final := map[string][]float32{}
			for _, x := range tr.Trainable {
				final[x.Name] = x.Data
			}
			ref := readTensorFile(t, finalWeightsFile(r, r.dir))
			if r.lora {
				name, gap := worst(tensorGap(t, "final adapter", final, ref))
				t.Logf("final adapter: worst %.3g of the tensor's largest entry (%s)", gap, name)
				if gap > gate.adapter {
					t.Errorf("final adapter: %s differs by %.3g of its largest entry, gate %g", name, gap, gate.adapter)
				}
				return
			}
			// A full fine-tune: every entry within 1e-5, but for 0.01% (Adam divides by √v: on a
			// near-zero gradient float32 noise can flip the sign of an update of size lr).
			total, off := 0, 0
			worstEntry := 0.0
			for name, w := range ref {
				g := final[name]
				if len(g) != len(w) {
					t.Fatalf("final weights: %q missing or of another size", name)
				}
				for i := range w {
					d := math.Abs(float64(g[i]) - float64(w[i]))
					worstEntry = max(worstEntry, d)
					if d > 1e-5 {
						off++
					}
				}
				total += len(w)
			}
			t.Logf("final weights: %d of %d entries beyond 1e-5 (worst %.3g)", off, total, worstEntry)
			if float64(off) > 1e-4*float64(total) {
				t.Errorf("final weights: %d of %d entries beyond 1e-5, more than 0.01%%", off, total)
			}
		})
	}
}

// TestFullResultIsTheWholeCheckpoint: a full fine-tune of Qwen3.5 writes every tensor of the
// base checkpoint, the ones it does not train (vision tower, MTP head) byte for byte; a tied
// model's stored lm_head copy is left out (the trained embedding is the head).
func TestFullResultIsTheWholeCheckpoint(t *testing.T) {
	for _, model := range []string{"../testdata/tiny-qwen35", "../testdata/tiny-qwen3"} {
		m, err := OpenModel(model, ModelOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rows := []Example{{IDs: []int32{1, 2, 3, 4}, Labels: []int32{1, 2, 3, 4}}}
		weights, closeWeights, err := CheckpointWeights(model)
		if err != nil {
			t.Fatal(err)
		}
		s := toySettings(true)
		s.Batch, s.Steps = 1, 1
		tr, err := NewTrainer(m, backendForTest(t), weights, rows, s, nil)
		closeWeights()
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		if _, err := tr.RunStep(false); err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		if err := tr.WriteResult(out, model, model, loader.BF16, 0); err != nil {
			t.Fatal(err)
		}
		base := readTensorFile(t, filepath.Join(model, "model.safetensors"))
		got := readTensorFile(t, filepath.Join(out, "model.safetensors"))
		trained := map[string]bool{}
		for _, x := range tr.Trainable {
			trained[x.Name] = true
		}
		for name, w := range base {
			g, ok := got[name]
			switch {
			case name == "lm_head.weight" && !trained[name]:
				if ok {
					t.Errorf("%s: the tied head's stored copy was written", model)
				}
			case !ok:
				t.Errorf("%s: %s missing from the result", model, name)
			case !trained[name] && !slices.Equal(g, w):
				t.Errorf("%s: %s not copied as it was", model, name)
			}
		}
	}
}

// TestBaseBF16Stored runs the fixture's LoRA runs with the frozen weights held in bfloat16: the
// checkpoints are bfloat16, so every number must be the float32 run's.
func TestBaseBF16Stored(t *testing.T) {
	for _, r := range []fixtureRun{fixtureRuns[0], fixtureRuns[3]} {
		_, want, a := runFixture(t, r, ModelOptions{}, nil)
		_, got, b := runFixture(t, r, ModelOptions{}, func(s *Settings) { s.Base = BaseBF16Stored })
		for i, p := range b.params {
			if want := map[bool]string{false: "bfloat16", true: "float32"}[p.Float32]; !strings.EqualFold(b.base[i].DType().String(), want) {
				t.Fatalf("%s: %s held as %s, want %s", r.name, p.Name, b.base[i].DType(), want)
			}
		}
		for i := range want {
			if got[i].Loss != want[i].Loss || got[i].GradNorm != want[i].GradNorm {
				t.Errorf("%s step %d: loss %v, norm %v with bfloat16 base weights; %v, %v in float32", r.name, i+1, got[i].Loss, got[i].GradNorm, want[i].Loss, want[i].GradNorm)
			}
		}
		for i, x := range a.Trainable {
			if !slices.Equal(x.Data, b.Trainable[i].Data) {
				t.Errorf("%s: %s differs with bfloat16 base weights", r.name, x.Name)
			}
		}
	}
}

// TestRecomputeAndBF16Base: with each layer recomputed in the backward pass (--gradient-checkpointing)
// the run is the same; with the base run in bfloat16 (--base-dtype bf16) it stays near the
// float64 reference, as bfloat16 activations allow.
func TestRecomputeAndBF16Base(t *testing.T) {
	for _, r := range []fixtureRun{fixtureRuns[0], fixtureRuns[3]} {
		want := referenceLosses(t, filepath.Join(r.dir, "reference-losses.json"))
		_, plain, a := runFixture(t, r, ModelOptions{}, nil)
		_, again, b := runFixture(t, r, ModelOptions{RecomputeLayers: true}, nil)
		for i := range plain {
			if math.Abs(plain[i].Loss-again[i].Loss) > 1e-6 || math.Abs(plain[i].GradNorm-again[i].GradNorm) > 1e-6*plain[i].GradNorm {
				t.Errorf("%s step %d: recomputed layers give %+v, kept %+v", r.name, i+1, again[i], plain[i])
			}
		}
		gaps := tensorGap(t, "recomputed", byName(b, dataOf(b)), byName(a, dataOf(a)))
		if name, gap := worst(gaps); gap > 1e-6 {
			t.Errorf("%s: %s differs by %.3g with recomputed layers", r.name, name, gap)
		}
		_, half, _ := runFixture(t, r, ModelOptions{}, func(s *Settings) { s.Base = BaseBF16 })
		worstRel := 0.0
		for i, w := range want {
			worstRel = max(worstRel, math.Abs(half[i].Loss-w.Loss)/w.Loss)
		}
		t.Logf("%s: bfloat16 base: losses within %.3g (relative) of the float64 reference", r.name, worstRel)
		if worstRel > 2e-2 {
			t.Errorf("%s: the bfloat16 base's losses are %.3g (relative) from the reference", r.name, worstRel)
		}
	}
}

// dataOf is the trainer's tensors' values.
func dataOf(tr *Trainer) [][]float32 {
	out := make([][]float32, len(tr.Trainable))
	for i, x := range tr.Trainable {
		out[i] = x.Data
	}
	return out
}
