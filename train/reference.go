package train

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/gomlx/compute"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm/lora"
)

// ReferenceSettings are a parity fixture run's train.json (testdata/tiny-qwen3-finetune/NAME/,
// written by parity/reference_train.py): the hyperparameters the float64 PyTorch reference ran.
type ReferenceSettings struct {
	Steps       int     `json:"steps"`
	Batch       int     `json:"batch"`
	LR          float64 `json:"lr"`
	WeightDecay float64 `json:"weight_decay"`
	MaxGradNorm float64 `json:"max_grad_norm"`
	Schedule    string  `json:"schedule"`
	Warmup      int     `json:"warmup"`
	Beta1       float64 `json:"beta1"`
	Beta2       float64 `json:"beta2"`
	Eps         float64 `json:"eps"`
	Full        bool    `json:"full"`
}

// ReadReferenceSettings reads a fixture run's train.json.
func ReadReferenceSettings(path string) (ReferenceSettings, error) {
	var rs ReferenceSettings
	data, err := os.ReadFile(path)
	if err != nil {
		return rs, err
	}
	if err := json.Unmarshal(data, &rs); err != nil {
		return rs, fmt.Errorf("%s: %w", path, err)
	}
	return rs, nil
}

// Settings are the trainer's settings for the reference's run (one micro-batch a step, rows in
// file order).
func (rs ReferenceSettings) Settings() Settings {
	return Settings{Steps: rs.Steps, Batch: rs.Batch, GradAccum: 1, LR: rs.LR,
		Schedule:    Schedule{Kind: rs.Schedule, Warmup: rs.Warmup, Total: rs.Steps},
		AdamW:       AdamW{Beta1: rs.Beta1, Beta2: rs.Beta2, Eps: rs.Eps, WeightDecay: rs.WeightDecay},
		MaxGradNorm: rs.MaxGradNorm, Full: rs.Full}
}

// ReadReferenceLosses reads a fixture run's reference-losses.json: the reference's log row of
// every step.
func ReadReferenceLosses(path string) ([]LogRow, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rows []LogRow
	if err := json.Unmarshal(data, &rows); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rows, nil
}

// ReadTensors reads every tensor of a safetensors file as float32, by name.
func ReadTensors(path string) (map[string][]float32, error) {
	f, err := loader.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]float32{}
	for _, info := range f.Tensors() {
		v := make([]float32, info.NumElements())
		if err := f.ReadFloat32(info, v); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, info.Name, err)
		}
		out[info.Name] = v
	}
	return out, nil
}

// TensorGaps is, per tensor of want, max |got − want| over the tensor's largest |want| (+Inf
// where got holds a NaN, so that it fails any gate). A tensor missing from got or of another
// size, or one got has and want does not, is an error.
func TensorGaps(got, want map[string][]float32) (map[string]float64, error) {
	if len(got) != len(want) {
		return nil, fmt.Errorf("%d tensors, the reference %d", len(got), len(want))
	}
	gaps := map[string]float64{}
	for name, w := range want {
		g, ok := got[name]
		if !ok || len(g) != len(w) {
			return nil, fmt.Errorf("tensor %q missing or of another size", name)
		}
		var diff, scale float64
		for i := range w {
			diff = max(diff, math.Abs(float64(g[i])-float64(w[i])))
			scale = max(scale, math.Abs(float64(w[i])))
		}
		gaps[name] = diff / max(scale, 1e-30)
		if math.IsNaN(diff) {
			gaps[name] = math.Inf(1)
		}
	}
	return gaps, nil
}

// WorstGap is the largest of TensorGaps's gaps and its tensor (the first by name on a tie).
func WorstGap(gaps map[string]float64) (string, float64) {
	names := make([]string, 0, len(gaps))
	for n := range gaps {
		names = append(names, n)
	}
	sort.Strings(names)
	best, w := "", -1.0
	for _, n := range names {
		if gaps[n] > w {
			best, w = n, gaps[n]
		}
	}
	return best, w
}

// ReferenceRun names a parity fixture run: the base checkpoint, the training rows and the run's
// folder (train.json, init-adapter/ for a LoRA run, the reference's gradients, losses and final
// weights).
type ReferenceRun struct {
	Model, Data, Dir string
	LoRA             bool // the run trains the adapter in Dir/init-adapter, not every weight
}

// ReferenceResult is a run of a ReferenceRun in Go: the step-1 gradients (before clipping),
// every step's result, and the trainer after the last step (its Trainable hold the final
// weights; the caller closes it).
type ReferenceResult struct {
	Grads   [][]float32
	Steps   []StepResult
	Trainer *Trainer
}

// RunReference trains r on backend as the reference did (edit, when not nil, changes the
// settings first).
func RunReference(backend compute.Backend, r ReferenceRun, mo ModelOptions, edit func(*Settings)) (ReferenceResult, error) {
	rs, err := ReadReferenceSettings(filepath.Join(r.Dir, "train.json"))
	if err != nil {
		return ReferenceResult{}, err
	}
	model, err := OpenModel(r.Model, mo)
	if err != nil {
		return ReferenceResult{}, err
	}
	rows, err := ReadJSONL(r.Data, DataOptions{Vocab: Vocab(model), EOS: -1})
	if err != nil {
		return ReferenceResult{}, err
	}
	s := rs.Settings()
	if edit != nil {
		edit(&s)
	}
	var init *lora.Adapter
	if r.LoRA {
		if init, err = lora.Read(filepath.Join(r.Dir, "init-adapter")); err != nil {
			return ReferenceResult{}, err
		}
	}
	weights, closeWeights, err := CheckpointWeights(r.Model)
	if err != nil {
		return ReferenceResult{}, err
	}
	tr, err := NewTrainer(model, backend, weights, rows, s, init)
	closeWeights()
	if err != nil {
		return ReferenceResult{}, err
	}
	out := ReferenceResult{Trainer: tr}
	for tr.Step < s.Steps {
		res, err := tr.RunStep(tr.Step == 0)
		if err != nil {
			tr.Close()
			return ReferenceResult{}, fmt.Errorf("%s: step %d: %w", r.Dir, tr.Step+1, err)
		}
		if res.Grads != nil {
			out.Grads = res.Grads
		}
		out.Steps = append(out.Steps, res)
	}
	return out, nil
}
