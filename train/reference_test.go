package train

import (
	"math"
	"os/exec"
	"path/filepath"
	"testing"
)

// fixtureRun is one run of testdata/tiny-qwen3-finetune or tiny-qwen35-finetune.
type fixtureRun struct {
	name, model, data, dir string
	lora                   bool
}

var fixtureRuns = []fixtureRun{
	{"lora", "../testdata/tiny-qwen3", "../testdata/tiny-qwen3-finetune/train.jsonl", "../testdata/tiny-qwen3-finetune/lora", true},
	{"lora-clip-warmup", "../testdata/tiny-qwen3", "../testdata/tiny-qwen3-finetune/train.jsonl", "../testdata/tiny-qwen3-finetune/lora-clip-warmup", true},
	{"full-untied", "../testdata/tiny-qwen3-untied", "../testdata/tiny-qwen3-finetune/train-untied.jsonl", "../testdata/tiny-qwen3-finetune/full-untied", false},
	{"qwen35-lora", "../testdata/tiny-qwen35", "../testdata/tiny-qwen35-finetune/train.jsonl", "../testdata/tiny-qwen35-finetune/lora", true},
}

// readTensorFile reads every tensor of a safetensors file as float32.
func readTensorFile(t *testing.T, path string) map[string][]float32 {
	t.Helper()
	out, err := ReadTensors(path)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tensorGap is TensorGaps; a tensor missing on either side fails the test.
func tensorGap(t *testing.T, what string, got, want map[string][]float32) map[string]float64 {
	t.Helper()
	gaps, err := TensorGaps(got, want)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return gaps
}

// worst is the largest gap and its tensor.
func worst(gaps map[string]float64) (string, float64) { return WorstGap(gaps) }

// referenceLosses reads a reference-losses.json.
func referenceLosses(t *testing.T, path string) []LogRow {
	t.Helper()
	rows, err := ReadReferenceLosses(path)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// finalWeightsFile is where a run's final trainable weights are stored in dir.
func finalWeightsFile(r fixtureRun, dir string) string {
	if r.lora {
		return filepath.Join(dir, "reference-adapter", "adapter_model.safetensors")
	}
	return filepath.Join(dir, "reference-model.safetensors")
}

// TestReferenceTrainScript runs parity/reference_train.py on each fixture run and checks that it
// reproduces the fixture's gradients, losses and final weights. Both are float64 runs stored in
// float32; the Qwen3 fixtures were made by another float64 forward, and the two agree to 2e-10
// of the first loss (1.1e-8 of a later step's loss or gradient norm) and 2.4e-7 of each tensor's
// largest entry (a few float32 roundings); Qwen3.5's exactly.
func TestReferenceTrainScript(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PyTorch")
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import torch, numpy").Run(); err != nil {
		t.Skipf("/usr/bin/python3 has no torch and numpy: %v", err)
	}
	for _, r := range fixtureRuns {
		t.Run(r.name, func(t *testing.T) {
			out := t.TempDir()
			args := []string{"../parity/reference_train.py", "--model", r.model, "--data", r.data,
				"--settings", filepath.Join(r.dir, "train.json"), "--out", out}
			if r.lora {
				args = append(args, "--init-adapter", filepath.Join(r.dir, "init-adapter"))
			}
			if msg, err := exec.Command("/usr/bin/python3", args...).CombinedOutput(); err != nil {
				t.Fatalf("%v\n%s", err, msg)
			}
			for _, file := range []struct{ what, got, want string }{
				{"gradients", filepath.Join(out, "reference-gradients.safetensors"), filepath.Join(r.dir, "reference-gradients.safetensors")},
				{"final weights", finalWeightsFile(r, out), finalWeightsFile(r, r.dir)},
			} {
				name, gap := worst(tensorGap(t, file.what, readTensorFile(t, file.got), readTensorFile(t, file.want)))
				t.Logf("%s: worst %.3g of the tensor's largest entry (%s)", file.what, gap, name)
				if gap > 1e-6 {
					t.Errorf("%s: %s differs by %.3g of its largest entry", file.what, name, gap)
				}
			}
			got, want := referenceLosses(t, filepath.Join(out, "reference-losses.json")), referenceLosses(t, filepath.Join(r.dir, "reference-losses.json"))
			if len(got) != len(want) {
				t.Fatalf("%d steps, the fixture %d", len(got), len(want))
			}
			for i := range want {
				g, w := got[i], want[i]
				if g.Tokens != w.Tokens || math.Abs(g.Loss-w.Loss) > 1e-7*w.Loss || math.Abs(g.GradNorm-w.GradNorm) > 1e-7*w.GradNorm || math.Abs(g.LR-w.LR) > 1e-15 {
					t.Errorf("step %d: %+v, the fixture %+v", w.Step, g, w)
				}
			}
		})
	}
}
