package octlm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/octlm/octlm/loader"
)

// fixtureWeights reads a fixture's weights in Decoder.Weights order, widened to float64.
func fixtureWeights(t *testing.T, name string, d *Decoder) [][]float64 {
	t.Helper()
	ckpt, err := loader.OpenCheckpoint(fixtureDir(name))
	if err != nil {
		t.Fatal(err)
	}
	defer ckpt.Close()
	var out [][]float64
	for _, info := range d.Weights() {
		e, ok := ckpt.Lookup(info.Name)
		if !ok {
			t.Fatalf("%s: no tensor %s", name, info.Name)
		}
		buf := make([]float32, e.Info.NumElements())
		if err := e.File.ReadFloat32(e.Info, buf); err != nil {
			t.Fatalf("%s: %s: %v", name, info.Name, err)
		}
		w := make([]float64, len(buf))
		for i, v := range buf {
			w[i] = float64(v)
		}
		out = append(out, w)
	}
	return out
}

// asTensor is data with dims as a float32 or float64 tensor.
func asTensor(data []float64, dims []int, f64 bool) *tensors.Tensor {
	if f64 {
		return tensors.FromFlatDataAndDimensions(slices.Clone(data), dims...)
	}
	f := make([]float32, len(data))
	for i, v := range data {
		f[i] = float32(v)
	}
	return tensors.FromFlatDataAndDimensions(f, dims...)
}

// trainingArgs are the arguments of a TrainingLogits graph taking ids, lengths and the weights
// (float32).
func trainingArgs(padded, lengths []int32, batch, seqLen int, weights [][]float64, infos []WeightInfo) []any {
	args := []any{tensors.FromFlatDataAndDimensions(padded, batch, seqLen), lengths}
	for i, w := range weights {
		args = append(args, asTensor(w, infos[i].Shape, false))
	}
	return args
}

// trainingBatch is two right-padded rows of different lengths.
func trainingBatch(vocab int) (ids [][]int, padded []int32, lengths []int32, seqLen int) {
	ids = [][]int{{3, 17, 5, 200 % vocab, 9, 1, 44, 2}, {7, 250 % vocab, 31, 4, 12}}
	seqLen = 8
	for _, row := range ids {
		lengths = append(lengths, int32(len(row)))
		for j := range seqLen {
			id := 0
			if j < len(row) {
				id = row[j]
			}
			padded = append(padded, int32(id))
		}
	}
	return ids, padded, lengths, seqLen
}

// TestTrainingLogitsMatchForward: TrainingLogits on two right-padded rows gives, at each row's
// real positions, the inference Forward's logits of that row alone.
func TestTrainingLogitsMatchForward(t *testing.T) {
	skipNumericsUnderRace(t)
	t.Parallel()
	for _, tt := range []struct {
		fixture string
		tol     float64
	}{{"tiny-qwen3", 1e-5}, {"tiny-qwen3-untied", 1e-5}, {"tiny-qwen35", 1e-5}} {
		t.Run(tt.fixture, func(t *testing.T) {
			d, err := ReadDecoder(fixtureDir(tt.fixture))
			if err != nil {
				t.Fatal(err)
			}
			weights := fixtureWeights(t, tt.fixture, d)
			infos := d.Weights()
			rows, padded, lengths, seqLen := trainingBatch(d.Shape().Vocab)
			exec, err := NewExec(goBackend(t), func(g *Graph, in []*Node) *Node {
				return d.TrainingLogits(in[0], in[1], in[2:], nil)
			})
			if err != nil {
				t.Fatal(err)
			}
			defer exec.Finalize()
			args := trainingArgs(padded, lengths, len(rows), seqLen, weights, infos)
			out, err := exec.Call(args...)
			if err != nil {
				t.Fatal(err)
			}
			got := tensors.MustCopyFlatData[float32](out[0])
			vocab := d.Shape().Vocab
			m := loadFixture(t, tt.fixture, Float32)
			for b, row := range rows {
				want, err := m.Forward(row)
				if err != nil {
					t.Fatal(err)
				}
				worst, scale := 0.0, 0.0
				for p := range row {
					for v := range vocab {
						worst = max(worst, math.Abs(float64(got[(b*seqLen+p)*vocab+v]-want.Row(p)[v])))
						scale = max(scale, math.Abs(float64(want.Row(p)[v])))
					}
				}
				t.Logf("row %d (%d tokens): max abs difference %.2g, max |logit| %.3g", b, len(row), worst, scale)
				if worst > tt.tol*max(1, scale) {
					t.Errorf("row %d: TrainingLogits and Forward differ by %.3g > %g·max(1, %.3g)", b, worst, tt.tol, scale)
				}
			}
		})
	}
}

// TestTrainingGradient checks graph.Gradient of a scalar function of TrainingLogits (a fixed
// random weighting of the real positions' logits) with respect to some weights and to LoRA A and
// B against central finite differences, all in float64, on the pure-Go backend; then ONNX
// Runtime's gradient, in float64 and in float32, against that float64 gradient.
func TestTrainingGradient(t *testing.T) {
	skipNumericsUnderRace(t)
	t.Parallel()
	backend := goBackend(t)
	for _, tt := range []struct {
		fixture string
		wrt     []string // weight names (suffixes) the gradient is checked for
		lora    []string // Linear weights with an adapter (suffixes)
	}{
		{"tiny-qwen3", []string{"model.embed_tokens.weight", "layers.0.input_layernorm.weight", "layers.1.self_attn.q_proj.weight",
			"layers.0.self_attn.k_norm.weight", "layers.1.mlp.down_proj.weight", "model.norm.weight"},
			[]string{"layers.0.self_attn.q_proj.weight", "layers.1.mlp.up_proj.weight"}},
		{"tiny-qwen35", []string{"linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight", "linear_attn.in_proj_b.weight",
			"linear_attn.in_proj_a.weight", "linear_attn.out_proj.weight", "linear_attn.A_log", "linear_attn.dt_bias",
			"linear_attn.conv1d.weight", "linear_attn.norm.weight", "self_attn.q_proj.weight"},
			[]string{"linear_attn.in_proj_qkv.weight", "linear_attn.out_proj.weight", "self_attn.v_proj.weight"}},
	} {
		t.Run(tt.fixture, func(t *testing.T) {
			d, err := ReadDecoder(fixtureDir(tt.fixture))
			if err != nil {
				t.Fatal(err)
			}
			weights := fixtureWeights(t, tt.fixture, d)
			infos := d.Weights()
			first := func(suffix string) int {
				for i, info := range infos {
					if len(info.Name) >= len(suffix) && info.Name[len(info.Name)-len(suffix):] == suffix {
						return i
					}
				}
				t.Fatalf("no weight ending in %s", suffix)
				return -1
			}
			rng := rand.New(rand.NewPCG(1, 2))
			// Adapters: A [r, in], B [out, r] (B nonzero, so that A has a gradient).
			const rank, scale = 2, 0.75
			type pair struct {
				name   string
				a, b   []float64
				aD, bD []int
			}
			var pairs []pair
			for _, suffix := range tt.lora {
				info := infos[first(suffix)]
				p := pair{name: info.Name, aD: []int{rank, info.Shape[1]}, bD: []int{info.Shape[0], rank}}
				for range rank * info.Shape[1] {
					p.a = append(p.a, rng.NormFloat64()*0.1)
				}
				for range rank * info.Shape[0] {
					p.b = append(p.b, rng.NormFloat64()*0.1)
				}
				pairs = append(pairs, p)
			}
			rows, padded, lengths, seqLen := trainingBatch(d.Shape().Vocab)
			vocab := d.Shape().Vocab
			// f = Σ R·logits over real positions.
			r := make([]float64, len(rows)*seqLen*vocab)
			for b, row := range rows {
				for p := range row {
					for v := range vocab {
						r[(b*seqLen+p)*vocab+v] = rng.NormFloat64()
					}
				}
			}
			var wrt []int
			for _, suffix := range tt.wrt {
				wrt = append(wrt, first(suffix))
			}
			nw := len(weights)
			build := func(g *Graph, in []*Node) *Node {
				lora := &LoRANodes{Scale: scale, Modules: map[string]LoRAPair{}}
				for i, p := range pairs {
					lora.Modules[p.name] = LoRAPair{A: in[2+nw+2*i], B: in[3+nw+2*i]}
				}
				logits := d.TrainingLogits(in[0], in[1], in[2:2+nw], lora)
				weighting := Const(g, tensors.FromFlatDataAndDimensions(r, len(rows), seqLen, vocab))
				return ReduceAllSum(Mul(logits, ConvertDType(weighting, logits.DType())))
			}
			fExec, err := NewExec(backend, build)
			if err != nil {
				t.Fatal(err)
			}
			defer fExec.Finalize()
			gradFn := func(g *Graph, in []*Node) []*Node {
				f := build(g, in)
				var nodes []*Node
				for _, i := range wrt {
					nodes = append(nodes, in[2+i])
				}
				nodes = append(nodes, in[2+nw:]...)
				return Gradient(f, nodes...)
			}
			gExec, err := NewExec(backend, gradFn)
			if err != nil {
				t.Fatal(err)
			}
			defer gExec.Finalize()

			// The inputs as flat float64 slices, with their dims; every call rebuilds the tensors.
			type input struct {
				data []float64
				dims []int
			}
			var params []input
			for i, w := range weights {
				params = append(params, input{w, infos[i].Shape})
			}
			for _, p := range pairs {
				params = append(params, input{p.a, p.aD}, input{p.b, p.bD})
			}
			argsIn := func(f64 bool) []any {
				a := []any{tensors.FromFlatDataAndDimensions(padded, len(rows), seqLen), lengths}
				for _, p := range params {
					a = append(a, asTensor(p.data, p.dims, f64))
				}
				return a
			}
			args := func() []any { return argsIn(true) }
			eval := func() float64 {
				out, err := fExec.Call(args()...)
				if err != nil {
					t.Fatal(err)
				}
				return tensors.MustCopyFlatData[float64](out[0])[0]
			}
			grads, err := gExec.Call(args()...)
			if err != nil {
				t.Fatal(err)
			}
			checked := slices.Clone(wrt) // the gradients' parameters, in order
			for i := range len(pairs) * 2 {
				checked = append(checked, nw+i)
			}
			const eps = 1e-5
			for gi, pi := range checked {
				grad := tensors.MustCopyFlatData[float64](grads[gi])
				name := ""
				if pi < nw {
					name = infos[pi].Name
				} else {
					name = fmt.Sprintf("lora %s %s", pairs[(pi-nw)/2].name, []string{"A", "B"}[(pi-nw)%2])
				}
				norm := 0.0
				for _, v := range grad {
					norm = max(norm, math.Abs(v))
				}
				if norm == 0 {
					t.Errorf("%s: zero gradient", name)
					continue
				}
				for range 3 {
					j := rng.IntN(len(grad))
					data := params[pi].data
					orig := data[j]
					data[j] = orig + eps
					plus := eval()
					data[j] = orig - eps
					minus := eval()
					data[j] = orig
					fd := (plus - minus) / (2 * eps)
					if diff := math.Abs(fd - grad[j]); diff > 1e-6*max(1, math.Abs(fd), norm) {
						t.Errorf("%s[%d]: gradient %.9g, finite difference %.9g (max |grad| %.3g)", name, j, grad[j], fd, norm)
					}
				}
			}

			t.Run("onnx", func(t *testing.T) {
				exec, err := NewExec(onnxBackend(t), gradFn)
				if err != nil {
					t.Fatal(err)
				}
				defer exec.Finalize()
				for _, f64 := range []bool{true, false} {
					got, err := exec.Call(argsIn(f64)...)
					if err != nil {
						t.Fatal(err)
					}
					tol := 1e-4 // float32: measured 6.3e-6
					if f64 {
						tol = 1e-6 // measured 5.4e-8
					}
					for gi := range checked {
						want := tensors.MustCopyFlatData[float64](grads[gi])
						var on []float64
						if f64 {
							on = tensors.MustCopyFlatData[float64](got[gi])
						} else {
							for _, v := range tensors.MustCopyFlatData[float32](got[gi]) {
								on = append(on, float64(v))
							}
						}
						worst, norm := 0.0, 0.0
						for i, w := range want {
							worst = max(worst, math.Abs(on[i]-w))
							norm = max(norm, math.Abs(w))
						}
						t.Logf("gradient %d: ONNX Runtime (float64 %v) vs pure Go's float64: %.2g of max |grad| %.3g", gi, f64, worst/norm, norm)
						if worst > tol*norm {
							t.Errorf("gradient %d: ONNX Runtime (float64 %v) and pure Go's float64 gradient differ by %.3g (max |grad| %.3g)", gi, f64, worst, norm)
						}
					}
				}
			})
		})
	}
}

// TestRecomputeLayers: with RecomputeLayers (each layer a gradient checkpoint) the gradients are
// the same as without.
func TestRecomputeLayers(t *testing.T) {
	skipNumericsUnderRace(t)
	t.Parallel()
	for _, fixture := range []string{"tiny-qwen3", "tiny-qwen35"} {
		t.Run(fixture, func(t *testing.T) {
			d, err := ReadDecoder(fixtureDir(fixture))
			if err != nil {
				t.Fatal(err)
			}
			weights := fixtureWeights(t, fixture, d)
			infos := d.Weights()
			rows, padded, lengths, seqLen := trainingBatch(d.Shape().Vocab)
			var grads [2][][]float32
			for i, recompute := range []bool{false, true} {
				d.RecomputeLayers = recompute
				exec, err := NewExec(goBackend(t), func(g *Graph, in []*Node) []*Node {
					logits := d.TrainingLogits(in[0], in[1], in[2:], nil)
					return Gradient(ReduceAllSum(Mul(logits, logits)), in[2:]...)
				})
				if err != nil {
					t.Fatal(err)
				}
				args := trainingArgs(padded, lengths, len(rows), seqLen, weights, infos)
				out, err := exec.Call(args...)
				exec.Finalize()
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range out {
					grads[i] = append(grads[i], tensors.MustCopyFlatData[float32](o))
				}
			}
			for j := range grads[0] {
				diff, scale := maxAbsDiff(grads[1][j], grads[0][j])
				if diff > 1e-5*max(scale, 1e-6) {
					t.Errorf("%s: gradients with and without recomputation differ by %.3g (max %.3g)", infos[j].Name, diff, scale)
				}
			}
		})
	}
}

// TestTrainingBFloat16Base: the frozen base in bfloat16 (every weight but the Float32 ones), the
// LoRA in float32: the logits are the bfloat16 model's Forward logits, and the adapter gets a
// float32 gradient (--base-dtype bf16).
func TestTrainingBFloat16Base(t *testing.T) {
	skipNumericsUnderRace(t)
	t.Parallel()
	for _, fixture := range []string{"tiny-qwen3", "tiny-qwen35"} {
		t.Run(fixture, func(t *testing.T) {
			d, err := ReadDecoder(fixtureDir(fixture))
			if err != nil {
				t.Fatal(err)
			}
			weights := fixtureWeights(t, fixture, d)
			infos := d.Weights()
			target := -1
			for i, info := range infos {
				if info.Linear && target < 0 {
					target = i
				}
			}
			rows, padded, lengths, seqLen := trainingBatch(d.Shape().Vocab)
			const rank = 2
			exec, err := NewExec(goBackend(t), func(g *Graph, in []*Node) []*Node {
				nw := len(infos)
				ws := make([]*Node, nw)
				for i := range ws {
					ws[i] = in[2+i]
					if !infos[i].Float32 {
						ws[i] = ConvertDType(ws[i], dtypes.BFloat16)
					}
				}
				a, b := in[2+nw], in[3+nw]
				lora := &LoRANodes{Scale: 1, Modules: map[string]LoRAPair{infos[target].Name: {A: a, B: b}}}
				logits := d.TrainingLogits(in[0], in[1], ws, lora)
				loss := ReduceAllSum(Mul(logits, logits))
				return append([]*Node{ConvertDType(logits, dtypes.Float32)}, Gradient(loss, a, b)...)
			})
			if err != nil {
				t.Fatal(err)
			}
			defer exec.Finalize()
			args := trainingArgs(padded, lengths, len(rows), seqLen, weights, infos)
			out, in := infos[target].Shape[0], infos[target].Shape[1]
			a := make([]float64, rank*in)
			for i := range a {
				a[i] = 0.01 * float64(i%7-3)
			}
			args = append(args, asTensor(a, []int{rank, in}, false), asTensor(make([]float64, out*rank), []int{out, rank}, false))
			res, err := exec.Call(args...)
			if err != nil {
				t.Fatal(err)
			}
			if res[1].DType() != dtypes.Float32 || res[2].DType() != dtypes.Float32 {
				t.Errorf("LoRA gradients in %s and %s, want float32", res[1].DType(), res[2].DType())
			}
			gradB := tensors.MustCopyFlatData[float32](res[2])
			if _, norm := maxAbsDiff(make([]float32, len(gradB)), gradB); norm == 0 || math.IsNaN(norm) {
				t.Errorf("LoRA B's gradient: max |grad| %v, want finite and nonzero", norm)
			}
			got := tensors.MustCopyFlatData[float32](res[0])
			m := loadFixture(t, fixture, BFloat16)
			vocab := d.Shape().Vocab
			for b, row := range rows {
				want, err := m.Forward(row)
				if err != nil {
					t.Fatal(err)
				}
				diff, scale := maxAbsDiff(got[b*seqLen*vocab:(b*seqLen+len(row))*vocab], want.Data)
				t.Logf("row %d: bfloat16 base vs the bfloat16 model's Forward: %.3g (max |logit| %.3g)", b, diff, scale)
				if diff > 1e-3*max(1, scale) {
					t.Errorf("row %d: differ by %.3g", b, diff)
				}
			}
		})
	}
}
