package train

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/lora"
)

// LoRASettings shape a new adapter (an --init-adapter brings its own).
type LoRASettings struct {
	R       int
	Alpha   float64
	Dropout float64
	RSLoRA  bool
	Targets []string // module names (q_proj, …) or lora.AllLinear
}

// Settings are a run's hyperparameters, named as Hugging Face's TrainingArguments names them.
type Settings struct {
	Steps       int // optimizer steps (max_steps)
	Batch       int // rows per micro-batch (per_device_train_batch_size)
	GradAccum   int // micro-batches per step (gradient_accumulation_steps)
	LR          float64
	Schedule    Schedule
	AdamW       AdamW
	MaxGradNorm float64 // 0: no clipping
	Full        bool    // every weight trained, not an adapter
	// Base is how a LoRA run holds and computes with the frozen weights (BaseF32 by default).
	Base        BaseDType
	LoRA        LoRASettings
	Seed        uint64
	Shuffle     bool
	PadMultiple int // batch lengths rounded up to PadLength's buckets of this unit (fewer graphs)
	MaxLength   int
}

// BaseDType is how a LoRA run holds and computes with its frozen weights. Weights the decoder
// keeps in float32 (norms, Qwen3.5's recurrent parameters) and the adapters are float32 always.
type BaseDType string

const (
	// BaseF32 holds and computes in float32.
	BaseF32 BaseDType = "f32"
	// BaseBF16 holds the frozen weights in bfloat16 and runs the base model in bfloat16, the
	// adapters in float32: what transformers computes for a model loaded with
	// torch_dtype=bfloat16 with PEFT's float32 adapters (the decoder's bfloat16 base).
	BaseBF16 BaseDType = "bf16"
	// BaseBF16Stored holds the frozen weights in bfloat16 and widens them to float32 in the
	// graph: half the resident memory, and for a bfloat16 checkpoint the numbers of BaseF32
	// exactly (its values are exact in both).
	BaseBF16Stored BaseDType = "bf16-stored"
)

// BaseDTypes are the accepted values, for flags and errors.
var BaseDTypes = []BaseDType{BaseF32, BaseBF16, BaseBF16Stored}

// Check refuses settings the loop cannot run.
func (s Settings) Check() error {
	for name, v := range map[string]float64{"learning rate": s.LR, "weight decay": s.AdamW.WeightDecay, "AdamW beta1": s.AdamW.Beta1,
		"AdamW beta2": s.AdamW.Beta2, "AdamW eps": s.AdamW.Eps, "max grad norm": s.MaxGradNorm, "LoRA alpha": s.LoRA.Alpha, "LoRA dropout": s.LoRA.Dropout} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("train: %s %v is not a finite number", name, v)
		}
	}
	switch {
	case s.Steps < 1:
		return fmt.Errorf("train: %d steps", s.Steps)
	case s.Batch < 1 || s.GradAccum < 1:
		return fmt.Errorf("train: batch %d, gradient accumulation %d", s.Batch, s.GradAccum)
	case s.LR < 0 || math.IsNaN(s.LR) || math.IsInf(s.LR, 0):
		return fmt.Errorf("train: learning rate %v", s.LR)
	case s.MaxGradNorm < 0:
		return fmt.Errorf("train: max grad norm %v", s.MaxGradNorm)
	case s.AdamW.Beta1 < 0 || s.AdamW.Beta1 >= 1 || s.AdamW.Beta2 < 0 || s.AdamW.Beta2 >= 1 || s.AdamW.Eps <= 0:
		return fmt.Errorf("train: AdamW betas %v, %v and eps %v", s.AdamW.Beta1, s.AdamW.Beta2, s.AdamW.Eps)
	}
	if !slices.Contains(BaseDTypes, s.Base) && s.Base != "" {
		return fmt.Errorf("train: base dtype %q (want f32, bf16 or bf16-stored)", s.Base)
	}
	if s.Full && s.Base != "" && s.Base != BaseF32 {
		return errors.New("train: bfloat16 base weights are for LoRA; a full fine-tune trains every weight in float32")
	}
	if !s.Full && (s.LoRA.Dropout < 0 || s.LoRA.Dropout >= 1) {
		return fmt.Errorf("train: LoRA dropout %v", s.LoRA.Dropout)
	}
	return s.Schedule.Check()
}

// baseDType is s.Base, BaseF32 when unset.
func (s Settings) baseDType() BaseDType {
	if s.Base == "" {
		return BaseF32
	}
	return s.Base
}

// Tensor is a named float32 tensor held on the host.
type Tensor struct {
	Name  string
	Shape []int
	Data  []float32
}

// loraModule is one adapted Linear: its Param index and its A and B among the trainables.
type loraModule struct {
	param  int
	module string
	a, b   int
}

// Trainer runs optimizer steps over rows. Its state (Trainable, Moments, Step) is what a
// checkpoint saves.
type Trainer struct {
	Settings  Settings
	Trainable []Tensor // full: every Param; LoRA: each module's A then B
	Moments   []Moments
	Step      int // optimizer steps done
	// LoRAConfig is the adapter's configuration (LoRA runs).
	LoRAConfig lora.Config

	model   Model
	backend compute.Backend
	params  []Param
	base    []*tensors.Tensor // the frozen weights (LoRA runs)
	modules []loraModule
	rows    []Example
	order   *Order
	exec    *Exec
	// inputs hold the trainable tensors' values as the graph reads them, refreshed from
	// Trainable before each call (on the pure-Go backend, shared with it: no copy per step);
	// grads receive each call's gradients. Both are made once, so that a step allocates none
	// of the trainables' size (a full fine-tune of Qwen3-0.6B made 4.8 GB of garbage a step).
	inputs []*tensors.Tensor
	grads  [][]float32
}

// WeightSource reads a weight's float32 values.
type WeightSource func(p Param) ([]float32, error)

// CheckpointWeights reads weights from the checkpoint folder dir (any float dtype) and the
// function that closes it.
func CheckpointWeights(dir string) (WeightSource, func() error, error) {
	ck, err := loader.OpenCheckpoint(dir)
	if err != nil {
		return nil, nil, err
	}
	return func(p Param) ([]float32, error) {
		e, ok := ck.Lookup(p.Name)
		if !ok {
			return nil, fmt.Errorf("train: %s has no tensor %q", dir, p.Name)
		}
		if !slices.Equal(e.Info.Shape, p.Shape) {
			return nil, fmt.Errorf("train: %s: tensor %q is %v, the model wants %v", dir, p.Name, e.Info.Shape, p.Shape)
		}
		out := make([]float32, size(p))
		if err := e.File.ReadFloat32(e.Info, out); err != nil {
			return nil, err
		}
		return out, nil
	}, ck.Close, nil
}

// NewTrainer prepares a run: the base weights from weights, the trainable tensors (every
// weight for a full fine-tune; else init's matrices, or new ones as PEFT initialises them:
// A kaiming-uniform with a = √5, B zero, drawn from the seed), zero moments.
func NewTrainer(model Model, backend compute.Backend, weights WeightSource, rows []Example, s Settings, init *lora.Adapter) (*Trainer, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, errors.New("train: no rows")
	}
	t := &Trainer{Settings: s, model: model, backend: backend, params: model.Params(), rows: rows,
		order: NewOrder(len(rows), s.Shuffle, s.Seed)}
	if s.Full {
		if init != nil {
			return nil, errors.New("train: an initial adapter is for LoRA, not a full fine-tune")
		}
		for _, p := range t.params {
			v, err := weights(p)
			if err != nil {
				return nil, err
			}
			t.Trainable = append(t.Trainable, Tensor{Name: p.Name, Shape: p.Shape, Data: v})
		}
	} else {
		// The frozen weights go to the backend one at a time, no host copy kept.
		t.base = make([]*tensors.Tensor, len(t.params))
		for i, p := range t.params {
			v, err := weights(p)
			if err != nil {
				t.Close()
				return nil, err
			}
			if t.base[i], err = resident(backend, v, p.Shape, (s.Base == BaseBF16 || s.Base == BaseBF16Stored) && !p.Float32); err != nil {
				t.Close()
				return nil, fmt.Errorf("train: %s: %w", p.Name, err)
			}
		}
		if err := t.initLoRA(init); err != nil {
			t.Close()
			return nil, err
		}
	}
	for _, tr := range t.Trainable {
		t.Moments = append(t.Moments, NewMoments(len(tr.Data)))
	}
	return t, nil
}

// resident is v [shape] as a tensor held by the backend, in bfloat16 (rounded to nearest even)
// when half.
func resident(backend compute.Backend, v []float32, shape []int, half bool) (*tensors.Tensor, error) {
	var flat any = v
	dtype := dtypes.Float32
	if half {
		flat, dtype = bfloat16.FromFloat32s(v...), dtypes.BFloat16
	}
	buf, err := backend.BufferFromFlatData(0, flat, shapes.Make(dtype, shape...))
	if err != nil {
		return nil, err
	}
	t, err := tensors.FromBuffer(buf)
	if err != nil {
		_ = buf.Finalize()
		return nil, err
	}
	return t, nil
}

// Linears are the model's Linear weights as package lora describes them.
func Linears(params []Param) []lora.Linear { return lora.Linears(params) }

// initLoRA sets up the adapter's trainable matrices from init or fresh.
func (t *Trainer) initLoRA(init *lora.Adapter) error {
	s := t.Settings.LoRA
	linears := Linears(t.params)
	if init != nil {
		if err := init.Validate(linears); err != nil {
			return err
		}
		t.LoRAConfig = init.Config
	} else {
		if s.R < 1 {
			return fmt.Errorf("train: LoRA rank %d", s.R)
		}
		t.LoRAConfig = lora.Config{PeftType: "LORA", TaskType: "CAUSAL_LM", R: s.R, LoraAlpha: s.Alpha,
			LoraDropout: s.Dropout, Bias: "none", UseRSLoRA: s.RSLoRA, InitLoraWeights: true, InferenceMode: true}
	}
	targets := t.LoRAConfig.TargetModules
	if init == nil {
		targets = s.Targets
	}
	targeted, err := lora.Targeted(linears, targets)
	if err != nil {
		return err
	}
	if init == nil {
		t.LoRAConfig.TargetModules = lora.ModuleNames(targeted)
	}
	if t.LoRAConfig.LoraDropout < 0 || t.LoRAConfig.LoraDropout >= 1 {
		return fmt.Errorf("train: LoRA dropout %v", t.LoRAConfig.LoraDropout)
	}
	index := map[string]int{}
	for i, p := range t.params {
		index[p.Name] = i
	}
	r := t.LoRAConfig.R
	for _, l := range targeted {
		an, bn := lora.TensorNames(l.Module)
		a := Tensor{Name: an, Shape: []int{r, l.In}, Data: make([]float32, r*l.In)}
		b := Tensor{Name: bn, Shape: []int{l.Out, r}, Data: make([]float32, l.Out*r)}
		if init != nil {
			m := init.Modules[l.Module]
			copy(a.Data, m.A)
			copy(b.Data, m.B)
		} else {
			kaimingUniform(a.Data, l.In, t.Settings.Seed, l.Module)
		}
		t.modules = append(t.modules, loraModule{param: index[l.Name], module: l.Module, a: len(t.Trainable), b: len(t.Trainable) + 1})
		t.Trainable = append(t.Trainable, a, b)
	}
	return nil
}

// kaimingUniform fills a [r, in] as nn.init.kaiming_uniform_(a=√5) does: uniform in ±1/√in
// (gain √(2/(1+5)) times √(3/in)), from a stream seeded by seed and the module's path.
func kaimingUniform(a []float32, in int, seed uint64, module string) {
	h := fnv.New64a()
	h.Write([]byte(module))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	bound := 1 / math.Sqrt(float64(in))
	for i := range a {
		a[i] = float32((2*rng.Float64() - 1) * bound)
	}
}

// Adapter is the LoRA adapter being trained, for writing (nil for a full fine-tune).
func (t *Trainer) Adapter() *lora.Adapter {
	if t.Settings.Full {
		return nil
	}
	a := &lora.Adapter{Config: t.LoRAConfig, Modules: map[string]lora.Matrices{}}
	for _, m := range t.modules {
		ta, tb := t.Trainable[m.a], t.Trainable[m.b]
		a.Modules[m.module] = lora.Matrices{A: ta.Data, B: tb.Data, Rank: ta.Shape[0], In: ta.Shape[1], Out: tb.Shape[0]}
	}
	return a
}

// Params are the model's weights.
func (t *Trainer) Params() []Param { return t.params }

// StepResult is what one optimizer step measured.
type StepResult struct {
	Step     int
	Loss     float64 // mean over the step's counted tokens, before the update
	GradNorm float64 // global L2 norm before clipping
	LR       float64
	Tokens   int
	// Grads are the gradients before clipping, by Trainable index (only when asked for).
	Grads [][]float32
}

// graphFn builds the training graph: inputs ids, lengths, targets, [rng state], the weights,
// [the adapters' A and B]; outputs the summed loss, the counted tokens and the gradient of the
// summed loss for each trainable tensor.
func (t *Trainer) graphFn(g *Graph, in []*Node) []*Node {
	ids, lengths, targets := in[0], in[1], in[2]
	k := 3
	var rng *Node
	dropout := !t.Settings.Full && t.LoRAConfig.LoraDropout > 0
	if dropout {
		rng = in[k]
		k++
	}
	weights := slices.Clone(in[k : k+len(t.params)])
	if t.Settings.Base == BaseBF16Stored {
		for i, w := range weights {
			if w.DType() != dtypes.Float32 {
				weights[i] = ConvertDType(w, dtypes.Float32)
			}
		}
	}
	k += len(t.params)
	var adapters *Adapters
	wrt := weights
	if !t.Settings.Full {
		ab := in[k:]
		adapters = &Adapters{Scale: t.LoRAConfig.Scale(), Modules: map[string]octlm.LoRAPair{}}
		for _, m := range t.modules {
			adapters.Modules[t.params[m.param].Name] = octlm.LoRAPair{A: ab[m.a], B: ab[m.b]}
		}
		if dropout {
			p := t.LoRAConfig.LoraDropout
			adapters.Dropout = func(x *Node) *Node {
				var u *Node
				rng, u = RandomUniform(rng, x.Shape())
				keep := GreaterOrEqual(u, Scalar(g, x.DType(), p))
				return Where(keep, MulScalar(x, 1/(1-p)), ZerosLike(x))
			}
		}
		wrt = ab
	}
	logits := t.model.Logits(ids, lengths, weights, adapters)
	sum, count := LossSum(logits, targets)
	return append([]*Node{sum, count}, Gradient(sum, wrt...)...)
}

// microBatches are the batches of step (1-based): rows ((step−1)·A + a)·B … in stream order.
func (t *Trainer) microBatches(step int) []Batch {
	s := t.Settings
	out := make([]Batch, s.GradAccum)
	for a := range s.GradAccum {
		rows := make([]Example, s.Batch)
		for j := range s.Batch {
			p := (int64(step-1)*int64(s.GradAccum)+int64(a))*int64(s.Batch) + int64(j)
			rows[j] = t.rows[t.order.Row(p)]
		}
		out[a] = MakeBatch(rows, s.PadMultiple, s.MaxLength)
	}
	return out
}

// RunStep runs the next optimizer step; keepGrads keeps a copy of its gradients before clipping.
func (t *Trainer) RunStep(keepGrads bool) (res StepResult, err error) {
	step := t.Step + 1
	batches := t.microBatches(step)
	for _, b := range batches {
		res.Tokens += b.Tokens
	}
	if res.Tokens == 0 {
		return res, fmt.Errorf("train: step %d counts no token", step)
	}
	if t.grads == nil {
		t.grads = make([][]float32, len(t.Trainable))
		for i, tr := range t.Trainable {
			t.grads[i] = make([]float32, len(tr.Data))
		}
	}
	grads := t.grads
	var lossSum float64
	for a, b := range batches {
		sum, err := t.forwardBackward(b, step, grads, a > 0)
		if err != nil {
			return res, err
		}
		lossSum += sum
	}
	n := float64(res.Tokens)
	Scale(grads, 1/n)
	res.Step, res.Loss = step, lossSum/n
	res.GradNorm = GlobalNorm(grads)
	if keepGrads {
		res.Grads = make([][]float32, len(grads))
		for i, g := range grads {
			res.Grads[i] = slices.Clone(g)
		}
	}
	Scale(grads, ClipCoefficient(res.GradNorm, t.Settings.MaxGradNorm))
	res.LR = t.Settings.LR * t.Settings.Schedule.Factor(step)
	params := make([][]float32, len(t.Trainable))
	for i, tr := range t.Trainable {
		params[i] = tr.Data
	}
	t.Settings.AdamW.UpdateAll(params, grads, t.Moments, res.LR, step)
	t.Step = step
	return res, nil
}

// forwardBackward runs the graph on one batch: the summed loss, with the summed loss's
// gradients written into grads (added to them when accumulate).
func (t *Trainer) forwardBackward(b Batch, step int, grads [][]float32, accumulate bool) (float64, error) {
	if t.exec == nil {
		exec, err := NewExec(t.backend, t.graphFn)
		if err != nil {
			return 0, fmt.Errorf("train: building the training graph: %w", err)
		}
		// One graph per batch length: PadLength's buckets keep them under 64 for any context.
		t.exec = exec.WithName("octlm_train").SetMaxCache(64)
	}
	args := []any{
		tensors.FromFlatDataAndDimensions(b.IDs, b.B, b.S),
		tensors.FromFlatDataAndDimensions(b.Lengths, b.B),
		tensors.FromFlatDataAndDimensions(b.Targets, b.B, b.S),
	}
	var owned []*tensors.Tensor
	if !t.Settings.Full && t.LoRAConfig.LoraDropout > 0 {
		state, err := RNGStateFromSeed(int64(t.Settings.Seed ^ uint64(step)*0x9e3779b97f4a7c15))
		if err != nil {
			return 0, err
		}
		args = append(args, state)
		owned = append(owned, state)
	}
	if !t.Settings.Full {
		for _, w := range t.base {
			args = append(args, w)
		}
	}
	if err := t.refreshInputs(); err != nil {
		return 0, err
	}
	for _, x := range t.inputs {
		args = append(args, x)
	}
	for _, a := range args[:3] {
		owned = append(owned, a.(*tensors.Tensor))
	}
	defer func() {
		for _, x := range owned {
			_ = x.FinalizeAll()
		}
	}()
	outs, err := t.exec.Call(args...)
	if err != nil {
		return 0, fmt.Errorf("train: step %d: %w", step, err)
	}
	defer func() {
		for _, o := range outs {
			if o != nil {
				_ = o.FinalizeAll()
			}
		}
	}()
	sum, err := tensors.CopyFlatData[float32](outs[0])
	if err != nil {
		return 0, err
	}
	for i := range grads {
		err := tensors.ConstFlatData(outs[2+i], func(g []float32) {
			if !accumulate {
				copy(grads[i], g)
				return
			}
			for j, v := range g {
				grads[i][j] += v
			}
		})
		if err != nil {
			return 0, err
		}
		_ = outs[2+i].FinalizeAll() // freed as soon as read: all of them together are the trainables' size
		outs[2+i] = nil
	}
	if math.IsNaN(float64(sum[0])) || math.IsInf(float64(sum[0]), 0) {
		return 0, fmt.Errorf("train: step %d: the loss is %v", step, sum[0])
	}
	return float64(sum[0]), nil
}

// refreshInputs writes Trainable's values into the graph's input tensors, made on the first call.
func (t *Trainer) refreshInputs() error {
	if t.inputs == nil {
		for _, tr := range t.Trainable {
			x, err := tensors.FromShapeForBackend(t.backend, 0, shapes.Make(dtypes.Float32, tr.Shape...))
			if err != nil {
				return fmt.Errorf("train: %s: %w", tr.Name, err)
			}
			t.inputs = append(t.inputs, x)
		}
	}
	for i, tr := range t.Trainable {
		if err := tensors.MutableFlatData(t.inputs[i], func(flat []float32) { copy(flat, tr.Data) }); err != nil {
			return fmt.Errorf("train: %s: %w", tr.Name, err)
		}
	}
	return nil
}

// Close frees the compiled graph, the base weights and the graph's copies of the trainables.
func (t *Trainer) Close() {
	if t.exec != nil {
		t.exec.Finalize()
		t.exec = nil
	}
	for _, b := range append(t.base, t.inputs...) {
		if b != nil {
			_ = b.FinalizeAll()
		}
	}
	t.base, t.inputs = nil, nil
}
