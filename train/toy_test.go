package train

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/compute"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/octlm/octlm/xla"
)

// toyModel is a stand-in for the decoder in the loop's tests: an embedding, one Linear
// (up_proj) through tanh and a Linear head. Its host twin (hostLoss) computes the same loss in
// float64.
type toyModel struct{ vocab, d, h int }

func (m toyModel) Params() []Param {
	return []Param{
		{Name: "model.embed_tokens.weight", Shape: []int{m.vocab, m.d}},
		{Name: "model.layers.0.mlp.up_proj.weight", Shape: []int{m.h, m.d}, Linear: true, Module: "model.layers.0.mlp.up_proj"},
		{Name: "lm_head.weight", Shape: []int{m.vocab, m.h}, Linear: true, Module: "lm_head"},
	}
}

func (m toyModel) Logits(ids, lengths *Node, w []*Node, ad *Adapters) *Node {
	linear := func(x, weight *Node, name string) *Node {
		y := Einsum("bsi,oi->bso", x, weight)
		if ad == nil {
			return y
		}
		ab, ok := ad.Modules[name]
		if !ok {
			return y
		}
		xa := x
		if ad.Dropout != nil {
			xa = ad.Dropout(x)
		}
		low := Einsum("bsi,ri->bsr", xa, ab.A)
		return Add(y, MulScalar(Einsum("bsr,or->bso", low, ab.B), ad.Scale))
	}
	x := Gather(w[0], InsertAxes(ids, -1))
	hid := Tanh(linear(x, w[1], "model.layers.0.mlp.up_proj.weight"))
	return linear(hid, w[2], "lm_head.weight")
}

// hostLoss is the toy model's summed loss in float64, for weights values (LoRA: adapters of
// up_proj A, B with scale).
func (m toyModel) hostLoss(b Batch, values [][]float64, a, bm []float64, r int, scale float64) float64 {
	emb, up, head := values[0], values[1], values[2]
	var sum float64
	for i := range b.B {
		for s := range b.S {
			tgt := b.Targets[i*b.S+s]
			if tgt == IgnoreIndex {
				continue
			}
			x := emb[int(b.IDs[i*b.S+s])*m.d:][:m.d]
			hid := make([]float64, m.h)
			low := make([]float64, r)
			for k := range r {
				for j := range m.d {
					low[k] += x[j] * a[k*m.d+j]
				}
			}
			for o := range m.h {
				v := 0.0
				for j := range m.d {
					v += x[j] * up[o*m.d+j]
				}
				for k := range r {
					v += scale * low[k] * bm[o*r+k]
				}
				hid[o] = math.Tanh(v)
			}
			logits := make([]float64, m.vocab)
			mx := math.Inf(-1)
			for v := range m.vocab {
				for o := range m.h {
					logits[v] += hid[o] * head[v*m.h+o]
				}
				mx = max(mx, logits[v])
			}
			z := 0.0
			for _, l := range logits {
				z += math.Exp(l - mx)
			}
			sum += math.Log(z) + mx - logits[tgt]
		}
	}
	return sum
}

// goBackend is the backend the loop's tests run on: the pure-Go one, or $OCTLM_TRAIN_BACKEND
// (e.g. onnx) to check another.
var goBackend = sync.OnceValues(func() (compute.Backend, error) {
	name := os.Getenv("OCTLM_TRAIN_BACKEND")
	if name == "" {
		name = "go"
	}
	b, _, err := xla.Open(name)
	return b, err
})

func backendForTest(t *testing.T) compute.Backend {
	t.Helper()
	b, err := goBackend()
	if err != nil {
		t.Skipf("no pure-Go backend: %v", err)
	}
	return b
}

// toyRun is a toy model with random weights and rows.
func toyRun(t *testing.T, s Settings) (toyModel, *Trainer) {
	t.Helper()
	m := toyModel{vocab: 11, d: 6, h: 5}
	rng := rand.New(rand.NewPCG(1, 2))
	weights := func(p Param) ([]float32, error) {
		v := make([]float32, size(p))
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 0.5)
		}
		return v, nil
	}
	var rows []Example
	for n := range 5 {
		ex := Example{}
		for range 3 + n {
			id := int32(rng.IntN(m.vocab))
			ex.IDs = append(ex.IDs, id)
			ex.Labels = append(ex.Labels, id)
		}
		ex.Labels[0] = IgnoreIndex
		rows = append(rows, ex)
	}
	tr, err := NewTrainer(m, backendForTest(t), weights, rows, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return m, tr
}

func toySettings(full bool) Settings {
	return Settings{Steps: 10, Batch: 2, GradAccum: 1, LR: 1e-2, Schedule: Schedule{Kind: "constant", Total: 10},
		AdamW: AdamW{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, Full: full,
		LoRA: LoRASettings{R: 2, Alpha: 4, Targets: []string{"up_proj"}}, Seed: 3, PadMultiple: 4}
}

func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// TestGradientsAgainstFiniteDifferences checks the graph's loss and LoRA gradients against the
// host's float64 loss and its central differences.
func TestGradientsAgainstFiniteDifferences(t *testing.T) {
	m, tr := toyRun(t, toySettings(false))
	// B must not be zero for A's gradient to be: give it values.
	for i := range tr.Trainable[1].Data {
		tr.Trainable[1].Data[i] = float32(math.Sin(float64(i)))
	}
	batch := tr.microBatches(1)[0]
	grads := make([][]float32, len(tr.Trainable))
	for i, x := range tr.Trainable {
		grads[i] = make([]float32, len(x.Data))
	}
	sum, err := tr.forwardBackward(batch, 1, grads, false)
	if err != nil {
		t.Fatal(err)
	}
	base := make([][]float64, 3)
	for i := range tr.params {
		v, err := tensors.CopyFlatData[float32](tr.base[i])
		if err != nil {
			t.Fatal(err)
		}
		base[i] = widen(v)
	}
	a, b := widen(tr.Trainable[0].Data), widen(tr.Trainable[1].Data)
	scale := tr.LoRAConfig.Scale()
	want := m.hostLoss(batch, base, a, b, 2, scale)
	if math.Abs(sum-want) > 1e-5*math.Abs(want) {
		t.Errorf("summed loss %v, host %v", sum, want)
	}
	const h = 1e-5
	for ti, x := range [][]float64{a, b} {
		for j := range x {
			orig := x[j]
			x[j] = orig + h
			up := m.hostLoss(batch, base, a, b, 2, scale)
			x[j] = orig - h
			down := m.hostLoss(batch, base, a, b, 2, scale)
			x[j] = orig
			fd := (up - down) / (2 * h)
			if got := float64(grads[ti][j]); math.Abs(got-fd) > 1e-4*max(1, math.Abs(fd)) {
				t.Errorf("%s[%d]: gradient %v, finite differences %v", tr.Trainable[ti].Name, j, got, fd)
			}
		}
	}
}

func TestTrainingLowersTheLoss(t *testing.T) {
	for _, full := range []bool{false, true} {
		_, tr := toyRun(t, toySettings(full))
		var first, last float64
		for k := range 10 {
			res, err := tr.RunStep(false)
			if err != nil {
				t.Fatal(err)
			}
			// Steps 1 and 6 read the same rows (5 rows, batch 2, wrapping after 2.5 steps).
			switch k {
			case 0:
				first = res.Loss
			case 5:
				last = res.Loss
			}
		}
		if !(last < first) {
			t.Errorf("full %v: the loss on the same rows went from %v to %v", full, first, last)
		}
	}
}

func TestResumeGivesTheSameWeights(t *testing.T) {
	for _, full := range []bool{false, true} {
		s := toySettings(full)
		s.Shuffle = true
		s.LoRA.Dropout = 0.1
		_, straight := toyRun(t, s)
		for range 6 {
			if _, err := straight.RunStep(false); err != nil {
				t.Fatal(err)
			}
		}
		out := t.TempDir()
		_, first := toyRun(t, s)
		var log []LogRow
		for range 3 {
			res, err := first.RunStep(false)
			if err != nil {
				t.Fatal(err)
			}
			log = append(log, RowOf(res, 0))
			if _, err := first.SaveCheckpoint(out, t.TempDir(), log, 2); err != nil {
				t.Fatal(err)
			}
		}
		steps, err := Checkpoints(out)
		if err != nil || len(steps) != 2 || steps[1] != 3 {
			t.Fatalf("checkpoints %v (%v), want the newest two, 2 and 3", steps, err)
		}
		_, second := toyRun(t, s)
		rows, err := second.Resume(filepath.Join(out, CheckpointName(3)))
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 3 || second.Step != 3 {
			t.Fatalf("resumed at step %d with %d log rows, want 3 and 3", second.Step, len(rows))
		}
		for range 3 {
			if _, err := second.RunStep(false); err != nil {
				t.Fatal(err)
			}
		}
		for i, tr := range straight.Trainable {
			if !slices.Equal(tr.Data, second.Trainable[i].Data) {
				t.Errorf("full %v: %s differs between the straight and the resumed run", full, tr.Name)
			}
		}
		other := s
		other.Seed++
		_, third := toyRun(t, other)
		if _, err := third.Resume(filepath.Join(out, CheckpointName(3))); err == nil || !strings.Contains(err.Error(), "another run") {
			t.Errorf("a checkpoint of another seed: %v", err)
		}
	}
}

// TestGradientAccumulation: two micro-batches of one row give the step of one batch of two (the
// loss divided by the tokens counted over both).
func TestGradientAccumulation(t *testing.T) {
	one := toySettings(false)
	two := one
	two.Batch, two.GradAccum = 1, 2
	_, a := toyRun(t, one)
	_, b := toyRun(t, two)
	for range 3 {
		ra, err := a.RunStep(false)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := b.RunStep(false)
		if err != nil {
			t.Fatal(err)
		}
		if ra.Tokens != rb.Tokens || math.Abs(ra.Loss-rb.Loss) > 1e-5 || math.Abs(ra.GradNorm-rb.GradNorm) > 1e-5*ra.GradNorm {
			t.Errorf("step %d: batch 2 %+v, 2 micro-batches of 1 %+v", ra.Step, ra, rb)
		}
	}
	for i, x := range a.Trainable {
		for j, v := range x.Data {
			if math.Abs(float64(v-b.Trainable[i].Data[j])) > 1e-6 {
				t.Fatalf("%s[%d]: %v with accumulation, %v without", x.Name, j, b.Trainable[i].Data[j], v)
			}
		}
	}
}

// TestCheckpointsSkipsTemporaries: only complete checkpoint-K folders count; a killed writer's
// temporary, a file and other names do not, and a checkpoint missing a file is refused by name.
func TestCheckpointsSkipsTemporaries(t *testing.T) {
	out := t.TempDir()
	_, tr := toyRun(t, toySettings(false))
	if _, err := tr.RunStep(false); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.SaveCheckpoint(out, t.TempDir(), nil, 0); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{".checkpoint-7.tmp-99999-1", "checkpoint-x", "checkpoint-07"} {
		if err := os.Mkdir(filepath.Join(out, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(out, "checkpoint-9"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	steps, err := Checkpoints(out)
	if err != nil || !slices.Equal(steps, []int{1}) {
		t.Fatalf("checkpoints %v (%v), want [1]", steps, err)
	}
	if err := os.Remove(filepath.Join(out, CheckpointName(1), OptimizerFile)); err != nil {
		t.Fatal(err)
	}
	_, again := toyRun(t, toySettings(false))
	if _, err := again.Resume(filepath.Join(out, CheckpointName(1))); err == nil || !strings.Contains(err.Error(), OptimizerFile) {
		t.Errorf("a checkpoint without its moments: %v", err)
	}
}

// TestNewAdapterInit: a new adapter starts as PEFT's does: B zero (the model unchanged), A
// uniform within ±1/√in (kaiming_uniform_ with a = √5), drawn from the seed.
func TestNewAdapterInit(t *testing.T) {
	_, a := toyRun(t, toySettings(false))
	_, b := toyRun(t, toySettings(false))
	other := toySettings(false)
	other.Seed++
	_, c := toyRun(t, other)
	A, B := a.Trainable[0], a.Trainable[1]
	bound := 1 / math.Sqrt(float64(A.Shape[1]))
	var largest float64
	for _, v := range A.Data {
		largest = max(largest, math.Abs(float64(v)))
	}
	if largest > bound || largest < 0.5*bound {
		t.Errorf("A's largest |entry| %v for the bound %v", largest, bound)
	}
	for _, v := range B.Data {
		if v != 0 {
			t.Fatal("B is not zero")
		}
	}
	if !slices.Equal(A.Data, b.Trainable[0].Data) || slices.Equal(A.Data, c.Trainable[0].Data) {
		t.Error("A is not a function of the seed")
	}
	if got := a.Adapter().Config; got.R != 2 || got.LoraAlpha != 4 || !slices.Equal(got.TargetModules, []string{"up_proj"}) || got.PeftType != "LORA" || got.Bias != "none" {
		t.Errorf("adapter config %+v", got)
	}
}
