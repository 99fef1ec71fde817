package hostproduct

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/gobackend"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"
)

// attentionBody is AttentionFunction's definition written plainly: the key blocks transposed
// back and put before the chunk's keys, the value blocks before its values, the scores and the
// context in float32, the probabilities rounded to q's dtype.
func attentionBody(q, k, v, bias *Node, keyBlocks, valueBlocks []*Node) *Node {
	dtype := q.DType()
	f32 := func(x *Node) *Node { return ConvertDType(x, dtypes.Float32) }
	var keys, values []*Node
	for i := range keyBlocks {
		keys = append(keys, Transpose(f32(keyBlocks[i]), 1, 2))
		values = append(values, f32(valueBlocks[i]))
	}
	keys = append(keys, f32(k))
	values = append(values, f32(v))
	all, vals := Concatenate(keys, 1), Concatenate(values, 1) // [H, T+S, hd]
	hd := q.Shape().Dimensions[2]
	scores := DotGeneral(f32(q), []int{2}, []int{0}, all, []int{2}, []int{0}) // [H, R, T+S]
	scores = MulScalar(scores, 1/math.Sqrt(float64(hd)))
	dims := scores.Shape().Dimensions
	seq := bias.Shape().Dimensions[0]
	scores = Add(Reshape(scores, dims[0], dims[1]/seq, seq, dims[2]), Reshape(bias, 1, 1, seq, dims[2]))
	probs := f32(ConvertDType(Softmax(Reshape(scores, dims...), -1), dtype))
	ctx := DotGeneral(probs, []int{2}, []int{0}, vals, []int{1}, []int{0}) // [H, R, hd]
	return ConvertDType(ctx, dtype)
}

// attentionBackends are the backend the definition runs on, of its own and sequential (compute
// v0.1.14's parallel executor hangs in a call of a function: TestComputeCallHangs), and one
// wrapped to run attention in Go, finalized after tb.
func attentionBackends(tb testing.TB) (ref compute.Backend, wrapped *Backend) {
	tb.Helper()
	ref, err := gobackend.New("ops_sequential")
	if err != nil {
		tb.Fatal(err)
	}
	inner, err := gobackend.New("")
	if err != nil {
		tb.Fatal(err)
	}
	if wrapped, err = Wrap(inner, Options{Attention: true}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(wrapped.Finalize)
	return ref, wrapped
}

// attentionCase is one shape of attention over blocks.
type attentionCase struct {
	name           string
	dtype, blockDT dtypes.DType
	kvHeads, group int
	seq, hd        int
	blocks         []int
	start          int // the cache's slots attended: [0, start)
	tol            float64
}

// kvDType is the dtype of a case's chunk keys and values: the blocks' where its name ends in
// "kv-as-cache" (as octlm passes them), else q's.
func (c attentionCase) kvDType() dtypes.DType {
	if strings.HasSuffix(c.name, "kv-as-cache") {
		return c.blockDT
	}
	return c.dtype
}

// attentionGraph calls one host attention function three times (three sequences of one shape,
// the second's operands computed in the graph before the first call, so that the first two calls
// follow one another and run as one step; the third's query is the first's result, so it runs
// after them), and returns the results as float32.
func attentionGraph(c attentionCase) func(g *Graph, ins []*Node) []*Node {
	return func(g *Graph, ins []*Node) []*Node {
		fn := NewFunction(g, AttentionFunction+"#0", func(g *Graph) []*Node {
			ps := make([]*Node, len(ins))
			for i, x := range ins {
				ps[i] = Parameter(g, fmt.Sprintf("p%d", i), x.Shape())
			}
			n := len(c.blocks)
			return []*Node{attentionBody(ps[0], ps[1], ps[2], ps[3], ps[4:4+n], ps[4+n:])}
		})
		second := append([]*Node(nil), ins...)
		second[0] = Neg(ins[0])
		second[2] = ConvertDType(MulScalar(ConvertDType(ins[2], dtypes.Float32), 0.5), c.kvDType())
		first := fn.Call(ins...)[0]
		out := fn.Call(second...)[0]
		third := append([]*Node(nil), ins...)
		third[0] = first
		last := fn.Call(third...)[0]
		return []*Node{ConvertDType(first, dtypes.Float32), ConvertDType(Tanh(ConvertDType(out, dtypes.Float32)), dtypes.Float32),
			ConvertDType(last, dtypes.Float32)}
	}
}

// attentionArgs are a case's operands: q, k, v, the bias (slots from start on masked, the
// chunk causal, and slot 3 masked for position 0 of the chunk), the key and value blocks.
func attentionArgs(c attentionCase) []*tensors.Tensor {
	rows, slots := c.group*c.seq, 0
	for _, n := range c.blocks {
		slots += n
	}
	args := []*tensors.Tensor{
		asDType(pattern(c.kvHeads*rows*c.hd, 1), c.dtype, c.kvHeads, rows, c.hd),
		asDType(pattern(c.kvHeads*c.seq*c.hd, 2), c.kvDType(), c.kvHeads, c.seq, c.hd),
		asDType(pattern(c.kvHeads*c.seq*c.hd, 3), c.kvDType(), c.kvHeads, c.seq, c.hd),
	}
	bias := make([]float32, c.seq*(slots+c.seq))
	for s := range c.seq {
		for t := range slots + c.seq {
			if (t < slots && t >= c.start) || (t >= slots && t-slots > s) || (s == 0 && t == 3) {
				bias[s*(slots+c.seq)+t] = float32(math.Inf(-1))
			}
		}
	}
	args = append(args, tensors.FromFlatDataAndDimensions(bias, c.seq, slots+c.seq))
	for i, n := range c.blocks {
		args = append(args, asDType(pattern(c.kvHeads*c.hd*n, 10+i), c.blockDT, c.kvHeads, c.hd, n))
	}
	for i, n := range c.blocks {
		args = append(args, asDType(pattern(c.kvHeads*n*c.hd, 20+i), c.blockDT, c.kvHeads, n, c.hd))
	}
	return args
}

// TestAttentionMatchesTheBackend runs attention over cache blocks in Go (Options.Attention) and
// its definition on the backend itself: one and several chunk positions, query groups (an odd
// number of rows too), float32 and bfloat16 activations and blocks, float16 blocks under float32
// activations, head dimensions on and off the kernels' width (64, and float16's 128 and 16), a block of slots off the vector width (16), slots past the last
// attended left unread, and a block wholly past it.
func TestAttentionMatchesTheBackend(t *testing.T) {
	f32, bf16, f16 := dtypes.Float32, dtypes.BFloat16, dtypes.Float16
	for _, c := range []attentionCase{
		{"f32/decode", f32, f32, 4, 2, 1, 32, []int{64, 64, 128}, 150, 1e-5},
		{"f32/chunk", f32, f32, 2, 2, 3, 32, []int{64, 64}, 100, 1e-5},
		{"f32/odd-hd", f32, f32, 2, 3, 2, 24, []int{16, 40}, 41, 1e-5},
		{"f32/block-past-start", f32, f32, 2, 1, 1, 16, []int{64, 64, 128}, 20, 1e-5},
		{"f32/bf16-cache", f32, bf16, 3, 2, 1, 32, []int{64, 64}, 77, 1e-5},
		{"f32/hd128-odd-rows", f32, f32, 2, 3, 1, 128, []int{64, 64, 128}, 200, 1e-5},
		{"f32/bf16-cache-hd128", f32, bf16, 2, 2, 2, 128, []int{64, 128}, 170, 1e-5},
		{"f32/hd64-tail-block", f32, f32, 2, 2, 1, 64, []int{16, 40}, 54, 1e-5},
		{"f32/hd192", f32, f32, 2, 2, 1, 192, []int{64, 128}, 101, 1e-5}, // 128 columns in one pass, then 64
		{"f32/f16-cache", f32, f16, 3, 2, 1, 32, []int{64, 64, 128}, 150, 1e-5},
		{"f32/f16-cache-hd128-chunk", f32, f16, 2, 3, 2, 128, []int{64, 128}, 170, 1e-5},
		{"f32/f16-cache-hd144", f32, f16, 2, 2, 1, 144, []int{64, 40}, 101, 1e-5}, // 128 columns, then 16
		{"f32/f16-cache-odd-hd", f32, f16, 2, 2, 1, 24, []int{16, 40}, 41, 1e-5},
		{"f32/f16-cache-hd128-kv-as-cache", f32, f16, 2, 2, 3, 128, []int{64, 128}, 170, 1e-5},
		{"f32/f16-cache-hd32-kv-as-cache", f32, f16, 3, 2, 1, 32, []int{64, 64}, 100, 1e-5},
		{"f32/bf16-cache-kv-as-cache", f32, bf16, 2, 2, 2, 128, []int{64, 128}, 170, 1e-5},
		{"f32/bf16-cache-hd144", f32, bf16, 2, 2, 1, 144, []int{64, 40}, 101, 1e-5}, // 128 columns, then 16
		{"f32/bf16-cache-odd-hd", f32, bf16, 2, 2, 1, 24, []int{16, 40}, 41, 1e-5},
		{"bf16/decode", bf16, bf16, 4, 2, 1, 32, []int{64, 64, 128}, 150, 1e-2},
		{"bf16/hd64", bf16, bf16, 2, 2, 1, 64, []int{64, 64}, 100, 1e-2},
		{"bf16/chunk", bf16, bf16, 2, 2, 2, 48, []int{64}, 60, 1e-2},
	} {
		t.Run(c.name, func(t *testing.T) {
			ref, wrapped := attentionBackends(t)
			run := func(b compute.Backend) []*tensors.Tensor {
				exec, err := NewExec(b, attentionGraph(c))
				if err != nil {
					t.Fatal(err)
				}
				defer exec.Finalize()
				var ins []any
				for _, a := range attentionArgs(c) {
					ins = append(ins, a)
				}
				out, err := exec.Call(ins...)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			want := run(ref)
			got := run(wrapped)
			if n := wrapped.AttentionsRun(); n != 3 {
				t.Errorf("%d attentions ran in Go, want 3", n)
			}
			if n := wrapped.attentionSteps.Load(); n != 2 {
				t.Errorf("the attentions ran in %d steps, want 2 (the first two at once)", n)
			}
			if spent := wrapped.Times(); spent.Attention <= 0 || spent.Products != 0 || spent.ProductWeightBytes != 0 {
				t.Errorf("times %+v: want attention timed, no products", spent)
			}
			for i := range want {
				w, g := flat32(t, want[i]), flat32(t, got[i])
				for j := range w {
					if d := math.Abs(float64(w[j] - g[j])); !(d <= c.tol*(1+math.Abs(float64(w[j])))) {
						t.Fatalf("output %d[%d] = %v, the backend's %v", i, j, g[j], w[j])
					}
				}
			}
		})
	}
}

// batchedAttentionArgs are a batch of sequences' operands in the form with a batch axis: q, k,
// v and bias [B, …] (sequence b attends the cache's slots up to its own start, c.start − 13·b,
// at least 1), then every sequence's key blocks, then every sequence's value blocks, each
// sequence's values its own.
func batchedAttentionArgs(c attentionCase, batch int) []*tensors.Tensor {
	rows, slots := c.group*c.seq, 0
	for _, n := range c.blocks {
		slots += n
	}
	args := []*tensors.Tensor{
		asDType(pattern(batch*c.kvHeads*rows*c.hd, 1), c.dtype, batch, c.kvHeads, rows, c.hd),
		asDType(pattern(batch*c.kvHeads*c.seq*c.hd, 2), c.kvDType(), batch, c.kvHeads, c.seq, c.hd),
		asDType(pattern(batch*c.kvHeads*c.seq*c.hd, 3), c.kvDType(), batch, c.kvHeads, c.seq, c.hd),
	}
	stride := slots + c.seq
	bias := make([]float32, batch*c.seq*stride)
	for b := range batch {
		start := max(1, c.start-13*b)
		for s := range c.seq {
			for t := range stride {
				if (t < slots && t >= start) || (t >= slots && t-slots > s) {
					bias[(b*c.seq+s)*stride+t] = float32(math.Inf(-1))
				}
			}
		}
	}
	args = append(args, tensors.FromFlatDataAndDimensions(bias, batch, c.seq, stride))
	for b := range batch {
		for i, n := range c.blocks {
			args = append(args, asDType(pattern(c.kvHeads*c.hd*n, 10+i+100*b), c.blockDT, c.kvHeads, c.hd, n))
		}
	}
	for b := range batch {
		for i, n := range c.blocks {
			args = append(args, asDType(pattern(c.kvHeads*n*c.hd, 20+i+100*b), c.blockDT, c.kvHeads, n, c.hd))
		}
	}
	return args
}

// TestBatchedAttentionMatchesTheBackend runs one call of the form with a batch axis (three
// sequences, each with its own operands, cache blocks and attended slots) in Go and its
// definition, each sequence's attention apart, on the backend itself: one run of attention, one
// step, whose sequences match the definition's.
func TestBatchedAttentionMatchesTheBackend(t *testing.T) {
	f32, bf16 := dtypes.Float32, dtypes.BFloat16
	const batch = 3
	for _, c := range []attentionCase{
		{"f32/decode", f32, f32, 4, 2, 1, 32, []int{64, 64, 128}, 150, 1e-5},
		{"f32/f16-cache-hd128", f32, dtypes.Float16, 2, 2, 1, 128, []int{64, 128}, 170, 1e-5},
		{"f32/f16-cache-hd128-kv-as-cache", f32, dtypes.Float16, 2, 2, 2, 128, []int{64, 128}, 170, 1e-5},
		{"f32/bf16-cache-hd128", f32, bf16, 2, 2, 2, 128, []int{64, 128}, 170, 1e-5},
		{"bf16/chunk", bf16, bf16, 2, 2, 2, 48, []int{64}, 60, 1e-2},
	} {
		t.Run(c.name, func(t *testing.T) {
			ref, wrapped := attentionBackends(t)
			blocks := len(c.blocks)
			graph := func(g *Graph, ins []*Node) []*Node {
				fn := NewFunction(g, AttentionFunction+"#0", func(g *Graph) []*Node {
					ps := make([]*Node, len(ins))
					for i, x := range ins {
						ps[i] = Parameter(g, fmt.Sprintf("p%d", i), x.Shape())
					}
					seqs := make([]*Node, batch)
					for b := range batch {
						one := func(x *Node) *Node { return Squeeze(SliceAxis(x, 0, AxisElem(b)), 0) }
						keys := ps[4+b*blocks : 4+(b+1)*blocks]
						values := ps[4+(batch+b)*blocks : 4+(batch+b+1)*blocks]
						seqs[b] = InsertAxes(attentionBody(one(ps[0]), one(ps[1]), one(ps[2]), one(ps[3]), keys, values), 0)
					}
					return []*Node{Concatenate(seqs, 0)}
				})
				return []*Node{ConvertDType(fn.Call(ins...)[0], dtypes.Float32)}
			}
			run := func(b compute.Backend) []float32 {
				exec, err := NewExec(b, graph)
				if err != nil {
					t.Fatal(err)
				}
				defer exec.Finalize()
				var ins []any
				for _, a := range batchedAttentionArgs(c, batch) {
					ins = append(ins, a)
				}
				out, err := exec.Call(ins...)
				if err != nil {
					t.Fatal(err)
				}
				return flat32(t, out[0])
			}
			want, got := run(ref), run(wrapped)
			if n, steps := wrapped.AttentionsRun(), wrapped.attentionSteps.Load(); n != 1 || steps != 1 {
				t.Errorf("%d attentions ran in Go in %d steps, want 1 in 1", n, steps)
			}
			for j := range want {
				if d := math.Abs(float64(want[j] - got[j])); !(d <= c.tol*(1+math.Abs(float64(want[j])))) {
					t.Fatalf("output[%d] (sequence %d) = %v, the backend's %v", j, j/(len(want)/batch), got[j], want[j])
				}
			}
		})
	}
}

// TestAttentionRefusesOtherShapes checks that a call whose operands are not of
// AttentionFunction's form fails to build, naming what is wrong, rather than running anything.
func TestAttentionRefusesOtherShapes(t *testing.T) {
	f32 := dtypes.Float32
	good := attentionCase{"", f32, f32, 2, 2, 1, 16, []int{16}, 10, 0}
	for _, tc := range []struct {
		name  string
		batch int // 0: the form without a batch axis; else two sequences, a block each
		bend  func(s []shapes.Shape) []shapes.Shape
		want  string
	}{
		{"keys not transposed", 0, func(s []shapes.Shape) []shapes.Shape { s[4] = shapes.Make(f32, 2, 16, 8); return s }, "block 0"},
		{"bias of bfloat16", 0, func(s []shapes.Shape) []shapes.Shape { s[3] = shapes.Make(dtypes.BFloat16, 1, 17); return s }, "bias"},
		{"rows not a multiple of the chunk", 0, func(s []shapes.Shape) []shapes.Shape {
			s[1], s[2] = shapes.Make(f32, 2, 3, 16), shapes.Make(f32, 2, 3, 16)
			s[3] = shapes.Make(f32, 3, 19)
			return s
		}, "query rows"},
		{"no blocks", 0, func(s []shapes.Shape) []shapes.Shape { return s[:4] }, "parameters"},
		{"batch: one sequence's blocks missing", 2, func(s []shapes.Shape) []shapes.Shape {
			return append(s[:5:5], s[6])
		}, "blocks for 2 sequences"},
		{"batch: a sequence's block of another size", 2, func(s []shapes.Shape) []shapes.Shape {
			s[5], s[7] = shapes.Make(f32, 2, 16, 32), shapes.Make(f32, 2, 32, 16)
			return s
		}, "sequence 1"},
		{"batch: bias of another batch", 2, func(s []shapes.Shape) []shapes.Shape { s[3] = shapes.Make(f32, 3, 1, 17); return s }, "bias"},
		{"keys of neither q's dtype nor the blocks'", 0, func(s []shapes.Shape) []shapes.Shape {
			s[1], s[2] = shapes.Make(dtypes.BFloat16, 2, 1, 16), shapes.Make(dtypes.BFloat16, 2, 1, 16)
			return s
		}, "k and v are"},
		{"batch: keys of another batch", 2, func(s []shapes.Shape) []shapes.Shape {
			s[1], s[2] = shapes.Make(f32, 3, 2, 1, 16), shapes.Make(f32, 3, 2, 1, 16)
			return s
		}, "k "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, wrapped := attentionBackends(t)
			args := attentionArgs(good)
			if tc.batch > 0 {
				args = batchedAttentionArgs(good, tc.batch)
			}
			var ss []shapes.Shape
			for _, a := range args {
				ss = append(ss, a.Shape())
			}
			ss = tc.bend(ss)
			exec, err := NewExec(wrapped, func(g *Graph, ins []*Node) []*Node {
				fn := NewFunction(g, AttentionFunction+"#0", func(g *Graph) []*Node {
					ps := make([]*Node, len(ss))
					for i, s := range ss {
						ps[i] = Parameter(g, fmt.Sprintf("p%d", i), s)
					}
					return []*Node{ps[0]}
				})
				return fn.Call(ins...)
			})
			if err != nil {
				t.Fatal(err)
			}
			defer exec.Finalize()
			_, err = exec.Compile(ss...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// TestComputeCallHangs is the reproduction of a hang in compute v0.1.14's pure-Go backend: a
// graph that calls a named function whose body multiplies 256 × 256 matrices never returns from
// its parallel executor (it waits on a channel; the same graph with ops_sequential, or with
// 64 × 64 matrices, runs). octlm's graphs call a function only where this package runs it in
// Go (AttentionFunction). The hanging case runs only with OCTLM_REPRO_HANG=1 (under a short
// -timeout); the sequential one always.
func TestComputeCallHangs(t *testing.T) {
	configs := []string{"ops_sequential"}
	if os.Getenv("OCTLM_REPRO_HANG") == "1" {
		configs = append(configs, "")
	}
	for _, config := range configs {
		b, err := gobackend.New(config)
		if err != nil {
			t.Fatal(err)
		}
		const n = 256
		exec, err := NewExec(b, func(x *Node) *Node {
			fn := NewFunction(x.Graph(), "f", func(g *Graph) []*Node {
				p := Parameter(g, "p", shapes.Make(dtypes.Float32, n, n))
				return []*Node{MatMul(Tanh(p), Exp(p))}
			})
			return fn.Call(x)[0]
		})
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Call1(asDType(pattern(n*n, 1), dtypes.Float32, n, n))
		exec.Finalize()
		if err != nil || !out.Shape().Equal(shapes.Make(dtypes.Float32, n, n)) {
			t.Fatalf("config %q: %v, %v", config, out, err)
		}
	}
}

// BenchmarkAttention times two calls of a decode step's attention over a cache on Qwen3-0.6B's
// shape (8 kv heads of 128, 2 query rows each; blocks of 64, 64 and 128 slots, 150 attended, or
// 4,096 slots in blocks up to 512 of float32 or float16) in Go (Options.Attention) and its definition on compute's
// sequential executor.
func BenchmarkAttention(b *testing.B) {
	deep := []int{64, 64, 128, 256}
	for range 7 {
		deep = append(deep, 512)
	}
	for _, bc := range []struct {
		dt, blockDT dtypes.DType
		blocks      []int
		start       int
	}{
		{dtypes.Float32, dtypes.Float32, []int{64, 64, 128}, 150}, {dtypes.BFloat16, dtypes.BFloat16, []int{64, 64, 128}, 150},
		{dtypes.Float32, dtypes.Float32, deep, 4096}, {dtypes.Float32, dtypes.Float16, deep, 4096},
	} {
		dt := bc.dt
		c := attentionCase{fmt.Sprintf("%s-%s-cache/depth%d", dt, bc.blockDT, bc.start), dt, bc.blockDT, 8, 2, 1, 128, bc.blocks, bc.start, 0}
		ref, wrapped := attentionBackends(b)
		for _, bc := range []struct {
			name    string
			backend compute.Backend
		}{{"go", wrapped}, {"compute", ref}} {
			b.Run(c.name+"/"+bc.name, func(b *testing.B) {
				exec, err := NewExec(bc.backend, attentionGraph(c))
				if err != nil {
					b.Fatal(err)
				}
				defer exec.Finalize()
				var args []any // a tensor lives on one backend
				for _, a := range attentionArgs(c) {
					args = append(args, a)
				}
				for b.Loop() {
					if _, err := exec.Call(args...); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestSoftmaxPasses checks softmax's four passes (vector kernels where this CPU has them)
// against the plain loops on lengths around the vectors' 16: the bias sums and their largest
// exactly, exp within 3 ulp of math.Exp's (and exactly 0 for a slot masked with −∞, within
// 1e−38 of it where the true value is that small), the scaling exactly, and the rounding to
// bfloat16 as bfloat16.FromFloat32 rounds.
func TestSoftmaxPasses(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 15, 16, 17, 47, 64, 4099} {
		sc, bias := make([]float32, n), make([]float32, n)
		for i := range sc {
			sc[i] = float32(r.NormFloat64() * 20)
			bias[i] = float32(r.NormFloat64())
			if i%7 == 3 {
				bias[i] = float32(math.Inf(-1))
			}
		}
		if n > 20 {
			sc[20] = -150 // exp underflows
		}
		got, want := slices.Clone(sc), slices.Clone(sc)
		if g, w := biasMax(got, bias), biasMaxPlain(want, bias); g != w || !slices.Equal(got, want) {
			t.Fatalf("n %d: biasMax %v, want %v (or the sums differ)", n, g, w)
		}
		highest := biasMaxPlain(slices.Clone(sc), bias)
		gotSum, wantSum := expSum(got, highest), expSumPlain(want, highest)
		for i := range got {
			g, w := float64(got[i]), float64(want[i])
			if math.IsInf(float64(bias[i]), -1) && g != 0 {
				t.Fatalf("n %d slot %d: exp of a masked slot %v, want 0", n, i, g)
			}
			if d := math.Abs(g - w); d > 3*math.Abs(w)*0x1p-23 && d > 1e-38 {
				t.Fatalf("n %d slot %d: exp %v, want %v", n, i, g, w)
			}
		}
		if d := math.Abs(float64(gotSum - wantSum)); d > 1e-5*float64(wantSum) {
			t.Fatalf("n %d: sum %v, want %v", n, gotSum, wantSum)
		}
		scaleAll(got, 0.37)
		scalePlain(want, 0.37)
		for i := range got {
			if g, w := got[i], want[i]; math.Abs(float64(g-w)) > 3*math.Abs(float64(w))*0x1p-23+1e-38 {
				t.Fatalf("n %d slot %d: scaled %v, want %v", n, i, g, w)
			}
		}
		scaled := slices.Clone(got)
		roundAll(got)
		for i := range got {
			if g, w := got[i], bfloat16.FromFloat32(scaled[i]).Float32(); g != w {
				t.Fatalf("n %d slot %d: rounded to bfloat16 %v, want %v", n, i, g, w)
			}
		}
	}
}
