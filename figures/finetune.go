package figures

import (
	"fmt"
	"math"
	"path/filepath"

	"github.com/gomlx/compute"

	"github.com/octlm/octlm/train"
)

// Fine-tuning parity gates, as train's TestGradientParity sets them for Qwen3's LoRA runs: the
// step-1 gradients and the final adapter as the worst tensor's max |Δ| over its largest entry,
// the losses as |Δ|.
const (
	FinetuneGradGate    = 1e-4
	FinetuneLossGate    = 1e-4
	FinetuneAdapterGate = 1e-5
)

// FinetuneRun is one LoRA run of a fine-tuning parity fixture (testdata/tiny-qwen3-finetune):
// the base checkpoint, the training rows and the run's folder (train.json, init-adapter/, the
// float64 PyTorch reference's gradients, losses and final adapter).
type FinetuneRun struct {
	Name, Model, Data, Dir string
}

// FinetuneParity trains each run on backend from its initial adapter, as the reference did, and
// compares with the reference: one row per run with the step-1 gradients, every step's loss
// and gradient norm, and the final adapter, each against its gate.
func FinetuneParity(backend compute.Backend, runs []FinetuneRun) (Table, error) {
	t := Table{Name: "06-finetune-parity", Caption: "LoRA fine-tuning against the float64 PyTorch reference (PEFT, torch.optim.AdamW)",
		Header: []string{"run", "steps", "step-1 gradients (of max)", "loss |Δ|", "grad norm (rel)", "final adapter (of max)", "verdict"}}
	for _, r := range runs {
		row, err := finetuneParityRow(backend, r)
		if err != nil {
			return Table{}, fmt.Errorf("%s: %w", r.Name, err)
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}

func finetuneParityRow(backend compute.Backend, r FinetuneRun) ([]string, error) {
	run, err := train.RunReference(backend, train.ReferenceRun{Model: r.Model, Data: r.Data, Dir: r.Dir, LoRA: true}, train.ModelOptions{}, nil)
	if err != nil {
		return nil, err
	}
	tr := run.Trainer
	defer tr.Close()
	want, err := train.ReadReferenceLosses(filepath.Join(r.Dir, "reference-losses.json"))
	if err != nil {
		return nil, err
	}
	if len(want) != len(run.Steps) {
		return nil, fmt.Errorf("reference-losses.json has %d steps, the run %d", len(want), len(run.Steps))
	}
	var lossGap, normGap float64
	for i, res := range run.Steps {
		if res.Tokens != want[i].Tokens || res.LR != want[i].LR {
			return nil, fmt.Errorf("step %d: %d tokens at lr %g, the reference %d at %g", i+1, res.Tokens, res.LR, want[i].Tokens, want[i].LR)
		}
		lossGap = max(lossGap, math.Abs(res.Loss-want[i].Loss))
		normGap = max(normGap, math.Abs(res.GradNorm-want[i].GradNorm)/want[i].GradNorm)
		if math.IsNaN(res.Loss) || math.IsNaN(res.GradNorm) {
			lossGap, normGap = math.Inf(1), math.Inf(1)
		}
	}
	gradGap, err := gapTo(tr, run.Grads, filepath.Join(r.Dir, "reference-gradients.safetensors"))
	if err != nil {
		return nil, err
	}
	final := make([][]float32, len(tr.Trainable))
	for i, x := range tr.Trainable {
		final[i] = x.Data
	}
	adapterGap, err := gapTo(tr, final, filepath.Join(r.Dir, "reference-adapter", "adapter_model.safetensors"))
	if err != nil {
		return nil, err
	}
	verdict := "PASS"
	if !(gradGap <= FinetuneGradGate && lossGap <= FinetuneLossGate && normGap <= 1e-4 && adapterGap <= FinetuneAdapterGate) {
		verdict = "FAIL"
	}
	return []string{r.Name, fmt.Sprint(len(run.Steps)), fmt.Sprintf("%.2g", gradGap), fmt.Sprintf("%.2g", lossGap),
		fmt.Sprintf("%.2g", normGap), fmt.Sprintf("%.2g", adapterGap), verdict}, nil
}

// gapTo is the worst tensor gap of values (the trainer's tensors, in order) against a reference
// file holding them under the same names.
func gapTo(tr *train.Trainer, values [][]float32, refPath string) (float64, error) {
	ref, err := train.ReadTensors(refPath)
	if err != nil {
		return 0, err
	}
	got := map[string][]float32{}
	for i, x := range tr.Trainable {
		got[x.Name] = values[i]
	}
	gaps, err := train.TensorGaps(got, ref)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Base(refPath), err)
	}
	_, gap := train.WorstGap(gaps)
	return gap, nil
}
