package octlm

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/octlm/octlm/xla"
)

// matVecRoute is one way to lay out a Linear weight W (in → out) and multiply one row by it.
type matVecRoute struct {
	name string
	// shape is the resident weight's shape for in → out.
	shape func(in, out int) []int
	// mul is x [1, in] times the weight.
	mul func(x, w *Node) *Node
	// constant puts the weight into the graph as a constant instead of a parameter.
	constant bool
}

func blockedRoutes(blocks int) []matVecRoute {
	return []matVecRoute{
		{name: fmt.Sprintf("blocks%d", blocks), shape: func(in, out int) []int { return []int{blocks, in, out / blocks} },
			mul: func(x, w *Node) *Node {
				per := BroadcastToDims(InsertAxes(x, 0), blocks, 1, x.Shape().Dimensions[1])
				return DotGeneral(per, []int{2}, []int{0}, w, []int{1}, []int{0})
			}},
		{name: fmt.Sprintf("blocks%dT", blocks), shape: func(in, out int) []int { return []int{blocks, out / blocks, in} },
			mul: func(x, w *Node) *Node {
				per := BroadcastToDims(InsertAxes(x, 0), blocks, 1, x.Shape().Dimensions[1])
				return DotGeneral(per, []int{2}, []int{0}, w, []int{2}, []int{0})
			}},
	}
}

var matVecRoutes = append(append([]matVecRoute{
	{name: "plain", shape: func(in, out int) []int { return []int{in, out} },
		mul: func(x, w *Node) *Node { return DotGeneral(x, []int{1}, nil, w, []int{0}, nil) }},
	{name: "transposed", shape: func(in, out int) []int { return []int{out, in} },
		mul: func(x, w *Node) *Node { return DotGeneral(x, []int{1}, nil, w, []int{1}, nil) }},
	{name: "plainConst", constant: true, shape: func(in, out int) []int { return []int{in, out} },
		mul: func(x, w *Node) *Node { return DotGeneral(x, []int{1}, nil, w, []int{0}, nil) }},
	{name: "transposedConst", constant: true, shape: func(in, out int) []int { return []int{out, in} },
		mul: func(x, w *Node) *Node { return DotGeneral(x, []int{1}, nil, w, []int{1}, nil) }},
}, blockedRoutes(2)...), blockedRoutes(4)...)

// paddedRoutes pad the row to rows rows, so that the product crosses the router's threshold.
func paddedRoutes(rows int) []matVecRoute {
	pad := func(x *Node) *Node { return BroadcastToDims(x, rows, x.Shape().Dimensions[1]) }
	return []matVecRoute{
		{name: fmt.Sprintf("plainM%d", rows), shape: func(in, out int) []int { return []int{in, out} },
			mul: func(x, w *Node) *Node {
				return SliceAxis(DotGeneral(pad(x), []int{1}, nil, w, []int{0}, nil), 0, AxisRange(0, 1))
			}},
		{name: fmt.Sprintf("transposedM%d", rows), shape: func(in, out int) []int { return []int{out, in} },
			mul: func(x, w *Node) *Node {
				return SliceAxis(DotGeneral(pad(x), []int{1}, nil, w, []int{1}, nil), 0, AxisRange(0, 1))
			}},
	}
}

// BenchmarkMatVec multiplies one row by a Linear weight at Qwen3-0.6B's decode shapes (q_proj
// 1024→2048, gate_proj 1024→3072, down_proj 3072→1024, the fused q/k/v 1024→4096 and the fused
// gate/up 1024→6144) with the weight laid out in each route, side by side, reporting each
// route's weight bytes read per second (GB/s). The pure-Go backend's router sends products below
// 4M multiply-adds to its "small" kernel and larger ones to the packing "large" kernel.
//
//	GOEXPERIMENT=simd go test ./octlm/ -run '^$' -bench MatVec -benchtime 50x
func BenchmarkMatVec(b *testing.B) {
	for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.BFloat16} {
		for _, sz := range [][2]int{{1024, 2048}, {1024, 3072}, {3072, 1024}, {1024, 4096}, {1024, 6144}} {
			in, out := sz[0], sz[1]
			b.Run(fmt.Sprintf("%s/%dx%d", dt, in, out), func(b *testing.B) {
				routes := matVecRoutes
				if os.Getenv("OCTLM_MATVEC_PADDED") != "" {
					routes = append(append(append(routes[:2:2], paddedRoutes(2)...), paddedRoutes(4)...), paddedRoutes(8)...)
				}
				benchMatVec(b, goBackend(b), dt, in, out, routes)
			})
		}
	}
}

func randomTensor(b testing.TB, dt dtypes.DType, dims ...int) *tensors.Tensor {
	r := rand.New(rand.NewPCG(1, 2))
	n := 1
	for _, d := range dims {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * 0.02)
	}
	t := tensors.FromFlatDataAndDimensions(v, dims...)
	if dt == dtypes.Float32 {
		return t
	}
	exec, err := NewExec(goBackend(b), func(x *Node) *Node { return ConvertDType(x, dt) })
	if err != nil {
		panic(err)
	}
	defer exec.Finalize()
	outs, err := exec.Call(t)
	if err != nil {
		panic(err)
	}
	return outs[0]
}

func benchMatVec(b *testing.B, backend compute.Backend, dt dtypes.DType, in, out int, routes []matVecRoute) {
	x := randomTensor(b, dt, 1, in)
	type prepared struct {
		exec *Exec
		w    *tensors.Tensor
	}
	runs := make([]prepared, len(routes))
	for i, r := range routes {
		w := randomTensor(b, dt, r.shape(in, out)...)
		var err error
		if r.constant {
			runs[i].exec, err = NewExec(backend, func(x *Node) *Node { return r.mul(x, ConstTensor(x.Graph(), w)) })
		} else {
			runs[i].exec, err = NewExec(backend, func(x, w *Node) *Node { return r.mul(x, w) })
			runs[i].w = w
		}
		if err != nil {
			b.Fatal(err)
		}
		defer runs[i].exec.Finalize()
	}
	step := func(p prepared) time.Duration {
		begin := time.Now()
		var outs []*tensors.Tensor
		var err error
		if p.w != nil {
			outs, err = p.exec.Call(x, p.w)
		} else {
			outs, err = p.exec.Call(x)
		}
		if err != nil {
			b.Fatal(err)
		}
		outs[0].FinalizeAll()
		return time.Since(begin)
	}
	for _, p := range runs {
		step(p) // compile
	}
	took := make([]time.Duration, len(routes))
	for b.Loop() {
		for i, p := range runs {
			took[i] += step(p)
		}
	}
	bytes := float64(in*out*dt.Size()) * float64(b.N)
	for i, r := range routes {
		b.ReportMetric(bytes/took[i].Seconds()/1e9, "GB/s/"+r.name)
	}
}

// BenchmarkHeadMatVec is BenchmarkMatVec for the tied output head (1024 → 151936), on the
// pure-Go backend and on ONNX Runtime (where its library is found): the table as rows
// contracted on their last axis (with a batch axis of one, as the rows layout runs it), as one
// [d, vocab] matrix, and as columns in 4 blocks [4, d, vocab/4] (Layout.TableBlocks); on the
// pure-Go backend also row blocks of 2,048 and the row padded to 4, on ONNX Runtime rows in 4
// blocks [4, vocab/4, d] (blocks4T: TableBlocks without TableColumns).
//
// On an Intel Xeon with 2 threads (ONNX Runtime 1.30.0, float32): rows 10.6 GB/s, one block of
// columns 10.1–14.5, 4 blocks 19.0–20.7; in the model that is 2–3% of a decode step, since the
// head is a quarter of the weights.
func BenchmarkHeadMatVec(b *testing.B) {
	const rows = 2048
	blocks := ceilDiv(fullVocab, rows)
	rowsT := matVecRoute{name: "rowsT", shape: func(in, out int) []int { return []int{out, in} },
		mul: func(x, w *Node) *Node {
			out, in := w.Shape().Dimensions[0], w.Shape().Dimensions[1]
			product := DotGeneral(Reshape(x, 1, 1, in), []int{2}, []int{0}, Reshape(w, 1, out, in), []int{2}, []int{0})
			return Reshape(product, 1, out)
		}}
	plain := matVecRoutes[0]
	columns4 := blockedRoutes(4)[0]
	goRoutes := []matVecRoute{rowsT, plain, columns4,
		{name: "rowBlocksT", shape: func(in, out int) []int { return []int{blocks, rows, in} },
			mul: func(x, w *Node) *Node {
				per := BroadcastToDims(InsertAxes(x, 0), blocks, 1, x.Shape().Dimensions[1])
				return DotGeneral(per, []int{2}, []int{0}, w, []int{2}, []int{0})
			}},
	}
	goRoutes = append(goRoutes, paddedRoutes(4)...)
	for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.BFloat16} {
		b.Run("go/"+dt.String(), func(b *testing.B) { benchMatVec(b, goBackend(b), dt, 1024, blocks*rows, goRoutes) })
	}
	b.Run("onnx/float32", func(b *testing.B) {
		benchMatVec(b, onnxBackend(b), dtypes.Float32, 1024, blocks*rows, []matVecRoute{rowsT, plain, columns4, blockedRoutes(4)[1]})
	})
}

// BenchmarkMatMulCores is the reproduction for GoMLX's pure-Go backend keeping a large product
// on one core: [8, 1024] · [1024, 6144] alone in its graph, and the same product between a
// Concatenate that pads its rows and a Slice (as padRows and the model put it), on the backend
// as compute configures it by default and with ops_sequential. It reports milliseconds and the
// cores kept busy: on a 2-core AMD Zen 5 with compute v0.1.14 the default kept 1.0 core busy,
// ops_sequential 1.8–1.9 at twice the speed (2026-12-04): compute's 8 default graph executors
// hold the worker slots a product would fan out over. octlm opens the backend with one executor
// per core (xla/go_executors.go), and pads products to 8 rows (BenchmarkMatMulRows).
func BenchmarkMatMulCores(b *testing.B) {
	x := randomTensor(b, dtypes.Float32, 4, 1024)
	w := randomTensor(b, dtypes.Float32, 1024, 6144)
	graphs := []struct {
		name string
		fn   func(x, w *Node) *Node
	}{
		{"alone", func(x, w *Node) *Node {
			return DotGeneral(Concatenate([]*Node{x, x}, 0), []int{1}, nil, w, []int{0}, nil)
		}},
		{"alone8", nil}, // filled below: the product of an 8-row parameter
		{"padded", func(x, w *Node) *Node {
			x = Concatenate([]*Node{x, Zeros(x.Graph(), x.Shape())}, 0)
			return SliceAxis(DotGeneral(x, []int{1}, nil, w, []int{0}, nil), 0, AxisRange(0, 4))
		}},
	}
	x8 := randomTensor(b, dtypes.Float32, 8, 1024)
	for _, config := range []string{"go", "go:ops_sequential"} {
		backend, err := compute.NewWithConfig(config)
		if err != nil {
			b.Fatal(err)
		}
		for _, g := range graphs {
			b.Run(config+"/"+g.name, func(b *testing.B) {
				// Host tensors of their own: a tensor moved to one backend stays bound to it.
				x, x8, w := hostCopy(x), hostCopy(x8), hostCopy(w)
				fn, in := g.fn, x
				if fn == nil {
					fn, in = func(x, w *Node) *Node { return DotGeneral(x, []int{1}, nil, w, []int{0}, nil) }, x8
				}
				loopCores(b, backend, fn, in, w)
			})
		}
	}
}

// BenchmarkMatMulRows is the measurement behind Layout.PadRows: 1, 2, 4, 8 and 16 rows times a
// Qwen3-0.6B gate/up weight (1024 → 6144), float32 and bfloat16, on the pure-Go backend as
// octlm opens it (xla.Open, one graph executor per core), reporting the weight bytes read per
// second and the cores kept busy. compute v0.1.14's packing kernel splits a product over its
// workers only in whole 8-row micro-kernel panels (AVX-512), so 1–4 rows run on one core and 8
// on all of them: on a 2-core AMD Zen 5, float32 16–17 GB/s on 1.0 core for 1–4 rows against
// 21–31 on 1.3–1.9 for 8, bfloat16 11–12 against 20.
//
//	GOEXPERIMENT=simd go test ./octlm/ -run '^$' -bench MatMulRows -benchtime 40x
func BenchmarkMatMulRows(b *testing.B) {
	const in, out = 1024, 6144
	backend := goBackend(b)
	for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.BFloat16} {
		w := randomTensor(b, dt, in, out)
		for _, rows := range []int{1, 2, 4, 8, 16} {
			x := randomTensor(b, dt, rows, in)
			b.Run(fmt.Sprintf("%s/rows%d", dt, rows), func(b *testing.B) {
				loopCores(b, backend, func(x, w *Node) *Node { return DotGeneral(x, []int{1}, nil, w, []int{0}, nil) }, x, w)
				b.ReportMetric(float64(in*out*dt.Size())*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

// loopCores compiles fn on backend, calls it on args once untimed and then in b's loop, and
// reports the cores kept busy.
func loopCores[F ExecGraphFn](b *testing.B, backend compute.Backend, fn F, args ...any) {
	exec, err := NewExec(backend, fn)
	if err != nil {
		b.Fatal(err)
	}
	defer exec.Finalize()
	callFreed(b, exec, args)
	b.ResetTimer()
	cpu := cpuTime()
	for b.Loop() {
		callFreed(b, exec, args)
	}
	b.ReportMetric((cpuTime()-cpu).Seconds()/b.Elapsed().Seconds(), "cores")
}

// hostCopy is a new host tensor with t's float32 values.
func hostCopy(t *tensors.Tensor) *tensors.Tensor {
	return tensors.FromFlatDataAndDimensions(tensors.MustCopyFlatData[float32](t), t.Shape().Dimensions...)
}

// BenchmarkPrefillProducts is the reproduction for ONNX Runtime's prefill: a 128-row product by
// a Qwen3-0.6B gate/up weight (1024 → 6144, float32), with the weight a graph input (as octlm
// passes every weight, packed by MLAS on every call) and a constant (an initializer, which ONNX
// Runtime packs once when the session is made). It reports each route's GFLOP/s.
//
//	GOEXPERIMENT=simd go test ./octlm/ -run '^$' -bench PrefillProducts -benchtime 50x
func BenchmarkPrefillProducts(b *testing.B) {
	const rows, in, out = 128, 1024, 6144
	x := randomTensor(b, dtypes.Float32, rows, in)
	w := randomTensor(b, dtypes.Float32, in, out)
	backend := onnxBackend(b)
	input, err := NewExec(backend, func(x, w *Node) *Node { return DotGeneral(x, []int{1}, nil, w, []int{0}, nil) })
	if err != nil {
		b.Fatal(err)
	}
	defer input.Finalize()
	constant, err := NewExec(backend, func(x *Node) *Node {
		return DotGeneral(x, []int{1}, nil, ConstTensor(x.Graph(), w), []int{0}, nil)
	})
	if err != nil {
		b.Fatal(err)
	}
	defer constant.Finalize()
	call := func(e *Exec, args ...any) time.Duration {
		begin := time.Now()
		outs, err := e.Call(args...)
		if err != nil {
			b.Fatal(err)
		}
		outs[0].FinalizeAll()
		return time.Since(begin)
	}
	call(input, x, w)
	call(constant, x)
	var tInput, tConstant time.Duration
	for b.Loop() {
		tInput += call(input, x, w)
		tConstant += call(constant, x)
	}
	flops := 2 * float64(rows*in*out) * float64(b.N)
	b.ReportMetric(flops/tInput.Seconds()/1e9, "GFLOP/s/input")
	b.ReportMetric(flops/tConstant.Seconds()/1e9, "GFLOP/s/constant")
}

// BenchmarkLinearRows is the measurement behind Layout.LinearRows: rows × a Qwen3-0.6B gate/up
// weight (1024 → 6144, float32) on ONNX Runtime, the weight a graph input as octlm passes every
// weight, for 1 (a decode step), 2–16 (sequences decoded together) and 128 rows (a prompt
// chunk), in three forms: x·W with W resident [in, out] (the layout before LinearRows), x·Wᵀ
// and (W·xᵀ)ᵀ with W resident as stored, [out, in]. MLAS packs the right-hand operand of a
// product of several rows on every call and reads the left one as it lies, so x·W and x·Wᵀ
// repack the 25 MB weight on every call while (W·xᵀ)ᵀ packs only the rows. It reports each
// form's milliseconds per product.
//
//	GOEXPERIMENT=simd go test ./octlm/ -run '^$' -bench LinearRows -benchtime 20x
func BenchmarkLinearRows(b *testing.B) {
	const in, out = 1024, 6144
	backend := onnxBackend(b)
	wInOut := randomTensor(b, dtypes.Float32, in, out)
	wOutIn := randomTensor(b, dtypes.Float32, out, in)
	forms := []struct {
		name string
		w    *tensors.Tensor
		mul  func(x, w *Node) *Node
	}{
		{"xW", wInOut, func(x, w *Node) *Node { return DotGeneral(x, []int{1}, nil, w, []int{0}, nil) }},
		{"xWt", wOutIn, func(x, w *Node) *Node { return DotGeneral(x, []int{1}, nil, w, []int{1}, nil) }},
		{"Wxt", wOutIn, func(x, w *Node) *Node { return Transpose(DotGeneral(w, []int{1}, nil, x, []int{1}, nil), 0, 1) }},
	}
	for _, rows := range []int{1, 2, 4, 8, 16, 128} {
		b.Run(fmt.Sprintf("rows%d", rows), func(b *testing.B) {
			x := randomTensor(b, dtypes.Float32, rows, in)
			execs := make([]*Exec, len(forms))
			for i, f := range forms {
				e, err := NewExec(backend, f.mul)
				if err != nil {
					b.Fatal(err)
				}
				defer e.Finalize()
				execs[i] = e
			}
			call := func(i int) time.Duration {
				begin := time.Now()
				outs, err := execs[i].Call(x, forms[i].w)
				if err != nil {
					b.Fatal(err)
				}
				outs[0].FinalizeAll()
				return time.Since(begin)
			}
			for i := range forms {
				call(i) // compile
			}
			took := make([]time.Duration, len(forms))
			for b.Loop() {
				for i := range forms { // alternated
					took[i] += call(i)
				}
			}
			for i, f := range forms {
				b.ReportMetric(took[i].Seconds()/float64(b.N)*1e3, "ms/"+f.name)
			}
		})
	}
}

// BenchmarkMatMulPieces is the measurement behind Layout.PieceMACs: rows (1, 4 or 8) times a
// weight of Qwen3-0.6B's head size (1024 → 151,936, read from memory, not the cache) on the
// pure-Go backend, whole (the 8-row padded product of the packing kernel) and in pieces each
// under compute's small-kernel threshold, as rows [n, in] and as columns [in, n], padded to a
// multiple of 4 rows (ops.linearPieces). It reports the weight's GB/s and the cores kept busy.
//
// On a 2-core AMD Zen 5 (compute v0.1.14, 2026-12-05, 20 calls each), one row: float32 whole
// 25.6 GB/s, pieces of rows 40.7, of columns 37.2; bfloat16 whole 17.5, rows 28.9, columns 18.2.
// Eight rows: float32 26.9, 29.0, 28.2; bfloat16 7.9 (spread around the large kernel's bug),
// 19.9, 14.7.
func BenchmarkMatMulPieces(b *testing.B) {
	const in, out = 1024, fullVocab
	backend := goBackend(b)
	for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.BFloat16} {
		whole := randomTensor(b, dt, in, out)
		for _, rows := range []int{1, 4, 8} {
			x := randomTensor(b, dt, rows, in)
			layout := LayoutFor(xla.EngineGo)
			b.Run(fmt.Sprintf("%s/rows%d/whole", dt, rows), func(b *testing.B) {
				loopCores(b, backend, func(x, w *Node) *Node {
					return ops{layout: layout}.linear(x, w)
				}, x, whole)
				b.ReportMetric(float64(in*out*dt.Size())*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
			for _, columns := range []bool{false, true} {
				model := Float32
				if dt == dtypes.BFloat16 {
					model = BFloat16
				}
				specs := layout.pieceSpecs([]weightSpec{{Name: "w", Shape: []int{out, in}, Kind: linearWeight}}, model)
				args := []any{x}
				for _, s := range specs {
					shape := s.Shape
					if columns {
						shape = []int{in, s.Shape[0]}
					}
					args = append(args, randomTensor(b, dt, shape...))
				}
				b.Run(fmt.Sprintf("%s/rows%d/pieces/columns=%v", dt, rows, columns), func(b *testing.B) {
					loopCores(b, backend, func(args []*Node) *Node {
						return ops{layout: layout}.linearPieces(args[0], args[1:], columns)
					}, args...)
					b.ReportMetric(float64(in*out*dt.Size())*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
				})
			}
		}
	}
}

// BenchmarkMatMulPanels is the measurement behind Layout.PiecePanels: rows (1 or 8) times a
// weight of Qwen3-0.6B's head size (1024 → 151,936) on the pure-Go backend, in the pieces the
// go layout cuts it into, held as rows [n, in], as columns [in, n] and as panels of 64 columns
// [n/64, in, 64] (ops.linearPieces). It reports the weight's GB/s and the cores kept busy. For
// huge pages under the weights (as the loader asks), run it with
// /sys/kernel/mm/transparent_hugepage/enabled at always.
//
// On a 2-core AMD Zen 5 (compute v0.1.14, 2026-12-05, huge pages, 30 calls each, two runs),
// one row: float32 rows 36.6–46.5 GB/s, columns 37.0–47.3, panels 40.3–52.2; bfloat16
// 28.1–28.8, 21.9–22.5, 31.6–36.8. Eight rows: float32 30.7–36.0, 31.5–36.6, 36.8–42.5;
// bfloat16 22.0–23.2, 17.8–18.4, 26.9–28.3.
func BenchmarkMatMulPanels(b *testing.B) {
	const in, out, width = 1024, fullVocab, 64
	backend := goBackend(b)
	for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.BFloat16} {
		layout := LayoutFor(xla.EngineGo)
		layout.PiecePanels = 0
		model := Float32
		if dt == dtypes.BFloat16 {
			model = BFloat16
		}
		specs := layout.pieceSpecs([]weightSpec{{Name: "w", Shape: []int{out, in}, Kind: linearWeight}}, model)
		for _, rows := range []int{1, 8} {
			x := randomTensor(b, dt, rows, in)
			for _, form := range []string{"rows", "columns", "panels"} {
				args := []any{x}
				for _, s := range specs {
					n := s.Shape[0]
					switch {
					case form == "rows":
						args = append(args, randomTensor(b, dt, n, in))
					case form == "panels" && n%width == 0:
						args = append(args, randomTensor(b, dt, n/width, in, width))
					default:
						args = append(args, randomTensor(b, dt, in, n))
					}
				}
				b.Run(fmt.Sprintf("%s/rows%d/%s", dt, rows, form), func(b *testing.B) {
					loopCores(b, backend, func(args []*Node) *Node {
						return ops{layout: layout}.linearPieces(args[0], args[1:], form != "rows")
					}, args...)
					b.ReportMetric(float64(in*out*dt.Size())*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
				})
			}
		}
	}
}

// BenchmarkHalfPromptProducts is the reproduction for bfloat16 prefill on the pure-Go engine: a
// 128-row product by a gate/up weight of Qwen3-0.6B (1024 → 6144) in the go layout's pieces of
// 64-column panels, through
//   - "float32": float32 rows and panels, the large kernel (a float32 prompt's route);
//   - "widened": bfloat16 panels widened to float32 on every call, then the large kernel (a
//     bfloat16 prompt's route, ops.rowProduct: the large kernel's half-precision products are
//     wrong in rows ≡ 3 mod 4);
//   - "small": bfloat16 panels on the small kernel, 8 rows at a time (ops.smallPieces, as decode
//     multiplies up to 16 rows): right, and as fast as float32, but a graph node per 8-row chunk
//     and piece, so that a 128-row prompt graph of Qwen3-0.6B holds 40–50 MB of nodes that the
//     collector marks on every cycle (tried as the default, not kept: docs/performance.md);
//   - "spread": bfloat16 pieces of columns with the rows spread (spreadRows), the large kernel's
//     own half-precision route.
//
// It reports each route's GFLOP/s.
//
//	GOEXPERIMENT=simd go test ./octlm/ -run '^$' -bench HalfPromptProducts -benchtime 30x
func BenchmarkHalfPromptProducts(b *testing.B) {
	const rows, in, out = 128, 1024, 6144
	backend := goBackend(b)
	layout := LayoutFor(xla.EngineGo)
	specs := layout.pieceSpecs([]weightSpec{{Name: "w", Shape: []int{out, in}, Kind: linearWeight}}, BFloat16)
	for _, route := range []string{"float32", "widened", "small", "spread"} {
		dt := dtypes.BFloat16
		if route == "float32" {
			dt = dtypes.Float32
		}
		args := []any{randomTensor(b, dt, rows, in)}
		for _, s := range specs {
			n := s.Shape[0]
			if route == "spread" || n%layout.PiecePanels != 0 {
				args = append(args, randomTensor(b, dt, in, n))
			} else {
				args = append(args, randomTensor(b, dt, n/layout.PiecePanels, in, layout.PiecePanels))
			}
		}
		b.Run(route, func(b *testing.B) {
			loopCores(b, backend, func(args []*Node) *Node {
				o := ops{layout: layout}
				x, pieces := args[0], args[1:]
				switch route {
				case "small":
					return cutTo(o.smallPieces(padToMultiple(x, 0, pieceKernelRows), pieces, 0), 0, rows)
				case "spread":
					spread := spreadRows(x, 0)
					ys := make([]*Node, len(pieces))
					for i, p := range pieces {
						ys[i] = DotGeneral(spread, []int{1}, nil, p, []int{0}, nil)
					}
					return gatherSpreadRows(Concatenate(ys, 1), 0, rows)
				}
				return o.linearPieces(x, pieces, true)
			}, args...)
			b.ReportMetric(2*float64(rows*in*out)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkKernelAllocs is the reproduction for the garbage a prompt's products leave on the
// pure-Go backend (compute v0.1.14): one product of rows × 1024 by a 1024 × 384 float32 weight
// (the size of a go layout piece of Qwen3-0.6B's gate/up weight), on the large kernel (128
// rows, a prompt's) and the small one (4 rows, decode's), reporting the bytes the process
// allocates per call. On AMD Zen 5, 2026-12-05, three runs: 298–368 KB in 78 allocations on
// the large kernel (its 196 KB output, when the pool has none to reuse, and a channel of 2,000
// work items, 96 KB, made on every call: avx512LargeFloat32's workChan in
// internal/gobackend/dot/matmul/avx512/large.go), 7.6 KB in 28 on the small one. A 128-token
// prompt of Qwen3-0.6B makes about 1,350 large-kernel calls and allocates 224–255 MB: with the
// octlm command's GOGC of 2 the collector runs 6–7 times during a float32 prompt and 12–13
// times during a bfloat16 one, and the prompt runs 5–23% faster with it off
// (docs/performance.md).
//
//	GOEXPERIMENT=simd go test ./octlm/ -run '^$' -bench KernelAllocs -benchmem
func BenchmarkKernelAllocs(b *testing.B) {
	const in, n = 1024, 384
	backend := goBackend(b)
	w := randomTensor(b, dtypes.Float32, in, n)
	for _, tt := range []struct {
		name string
		rows int
	}{{"large", 128}, {"small", 4}} {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			loopCores(b, backend, func(x, w *Node) *Node {
				return DotGeneral(x, []int{1}, nil, w, []int{0}, nil)
			}, randomTensor(b, dtypes.Float32, tt.rows, in), w)
		})
	}
}
