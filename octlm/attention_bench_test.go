package octlm

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/octlm/octlm/xla"
)

// BenchmarkAttentionAtDepth is the reproduction for decode at depth: one decode row's attention
// over a Qwen3-0.6B layer's cache at 4,096 positions (8 kv heads × 2 query heads each × 128),
// scaled to 28 layers, on ONNX Runtime and the pure-Go backend.
//
// "blocks/…" is what the step graph runs (attention in blocks.go): the cache's blocks (64, 64,
// 128, … 1,024 positions, see nextBlock) read in place, shared with Go, plus the chunk's own key;
// it writes nothing. "stored" multiplies the blocks as the pure-Go backend's layout does (q·Kᵀ
// and p·V, the blocks on the right), "left" as ONNX Runtime's (Layout.CacheLeft: K·qᵀ and Vᵀ·pᵀ,
// the values stored transposed); "-5120" reads the 5,120 slots a decode step after a 32-token
// prompt at depth 4,096 reads, the last block of 1,024 nearly empty. The other variants are the graph before it, whole and in parts: the cache
// written into a new buffer each step (ScatterND, "scatteronly"), the attended slots sliced off
// (a copy each, "sliceonly"), the scores and the weighted values. With glibc's threshold for
// mapping large blocks fixed at 256 KiB, every 17 MB buffer was mapped and zero-filled afresh on
// each call on ONNX Runtime: slicing alone took 325 ms and "full" 588–614 ms against 42 ms for a
// sum over the same cache (Intel Xeon, 2 threads).
func BenchmarkAttentionAtDepth(b *testing.B) {
	const kvH, group, hd, depth, capacity, layers = 8, 2, 128, 4096, 4096 + 64, 28
	engines := []struct {
		name    string
		backend func(testing.TB) compute.Backend
		engine  xla.Engine
	}{{"onnx", onnxBackend, xla.EngineONNX}, {"go", goBackend, xla.EngineGo}}
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			backend := e.backend(b)
			o := ops{layout: LayoutFor(e.engine)}
			kc := tensors.FromShape(shapes.Make(dtypes.Float32, kvH, capacity, hd))
			vc := tensors.FromShape(shapes.Make(dtypes.Float32, kvH, capacity, hd))
			q := randomTensor(b, dtypes.Float32, kvH, group, hd)
			k := randomTensor(b, dtypes.Float32, kvH, 1, hd)
			run := func(b *testing.B, exec *Exec, args []any) {
				callFreed(b, exec, args)
				begin := time.Now()
				for b.Loop() {
					callFreed(b, exec, args)
				}
				b.ReportMetric(float64(time.Since(begin).Microseconds())/float64(b.N)*layers/1000, "ms/28layers")
			}
			// What the step graph runs, in the engine's cache layout and the other one, over the
			// blocks that cover depth (4,096 slots) and over those a decode step after a prompt
			// at that depth reads (5,120: the last block of 1,024 barely begun).
			for _, c := range []struct {
				name  string
				left  bool
				slots int
			}{{"stored", false, depth}, {"left", true, depth}, {"stored-5120", false, depth + 1024}, {"left-5120", true, depth + 1024}} {
				b.Run("blocks/"+c.name, func(b *testing.B) {
					o := o
					o.layout.CacheLeft = c.left
					blocks := blockSizes(c.slots)
					start := min(c.slots, depth+32)
					args := []any{randomTensor(b, dtypes.Float32, 1, 1, kvH*group, hd), randomTensor(b, dtypes.Float32, 1, 1, kvH, hd), int32(start)}
					args = append(args, cacheBlocks(b, backend, blocks, kvH, hd, false)...)
					args = append(args, cacheBlocks(b, backend, blocks, kvH, hd, c.left)...)
					exec, err := NewExec(backend, func(g *Graph, in []*Node) []*Node {
						query, key, start := in[0], in[1], InsertAxes(in[2], 0)
						ids := Zeros(g, shapes.Make(dtypes.Int32, 1, 1))
						s := newStep(o, ids, start, OnesLike(start), c.slots, true)
						s.kvDType = dtypes.Float32
						kb, vb := kvBlocks{in[3 : 3+len(blocks)]}, kvBlocks{in[3+len(blocks):]}
						ctx, _, _ := attention(s, query, key, key, kb, vb)
						return []*Node{ctx}
					})
					if err != nil {
						b.Fatal(err)
					}
					defer exec.Finalize()
					run(b, exec, args)
				})
			}
			variants := map[string]func(q, k, kc, vc, start *Node) []*Node{
				"full": func(q, k, kc, vc, start *Node) []*Node {
					nk := scatterOne(kc, k, start)
					nv := scatterOne(vc, k, start)
					keys := SliceAxis(nk, 1, AxisRange(0, capacity-32))
					vals := SliceAxis(nv, 1, AxisRange(0, capacity-32))
					s := o.dotLastAxes(q, keys, 1)
					p := Softmax(s, -1)
					ctx := DotGeneral(p, []int{2}, []int{0}, vals, []int{1}, []int{0})
					return []*Node{ctx, nk, nv}
				},
				"noscatter": func(q, k, kc, vc, start *Node) []*Node {
					keys := SliceAxis(kc, 1, AxisRange(0, capacity-32))
					vals := SliceAxis(vc, 1, AxisRange(0, capacity-32))
					s := o.dotLastAxes(q, keys, 1)
					p := Softmax(s, -1)
					ctx := DotGeneral(p, []int{2}, []int{0}, vals, []int{1}, []int{0})
					return []*Node{ctx}
				},
				"noslice": func(q, k, kc, vc, start *Node) []*Node {
					s := o.dotLastAxes(q, kc, 1)
					p := Softmax(s, -1)
					ctx := DotGeneral(p, []int{2}, []int{0}, vc, []int{1}, []int{0})
					return []*Node{ctx}
				},
				"sliceonly": func(q, k, kc, vc, start *Node) []*Node {
					return []*Node{ReduceAllSum(SliceAxis(kc, 1, AxisRange(0, capacity-32))), ReduceAllSum(SliceAxis(vc, 1, AxisRange(0, capacity-32)))}
				},
				"sumonly": func(q, k, kc, vc, start *Node) []*Node {
					return []*Node{ReduceAllSum(kc), ReduceAllSum(vc)}
				},
				"scatteronly": func(q, k, kc, vc, start *Node) []*Node {
					return []*Node{scatterOne(kc, k, start), scatterOne(vc, k, start)}
				},
			}
			for name, fn := range variants {
				b.Run(name, func(b *testing.B) {
					exec, err := NewExec(backend, func(q, k, kc, vc, start *Node) []*Node { return fn(q, k, kc, vc, start) })
					if err != nil {
						b.Fatal(err)
					}
					defer exec.Finalize()
					run(b, exec, []any{q, k, kc, vc, int32(depth)})
				})
			}
		})
	}
}

// blockSizes are the sizes of the cache blocks that cover n positions (no context limit).
func blockSizes(n int) []int {
	var sizes []int
	for c := 0; c < n; {
		size := nextBlock(c, 1<<30, maxCacheBlock)
		sizes = append(sizes, size)
		c += size
	}
	return sizes
}

// scatterOne is the cache write the step graph did before the cache was written in place: rows
// [heads, S, width] added into cache [heads, capacity, width] at slots start…start+S−1 by a
// scatter-add (ONNX Runtime: ScatterND into a new buffer), start a scalar.
func scatterOne(cache, rows, start *Node) *Node {
	g := cache.Graph()
	heads, seqLen := rows.Shape().Dimensions[0], rows.Shape().Dimensions[1]
	idx := shapes.Make(dtypes.Int32, heads, seqLen, 1)
	slots := Add(Reshape(ConvertDType(start, dtypes.Int32), 1, 1, 1), Iota(g, idx, 1))
	return ScatterSum(cache, Concatenate([]*Node{Iota(g, idx, 0), slots}, -1), rows, true, true)
}

// BenchmarkCacheProducts is the cache's products alone, as a decode step at
// depth runs them: 28 layers' blocks covering 5,120 slots (1.17 GB of float32 keys and values,
// more than the L3) in one graph, each layer's two query rows per kv head against its own
// blocks. "keys-*" are the scores (ops.cacheScores), "values-*" the context (ops.cacheContext)
// with the blocks multiplied on the right ("stored": q·Kᵀ, p·V) or on the left (Layout.CacheLeft:
// K·qᵀ, Vᵀ·pᵀ on values stored transposed); "sum" reads the same keys and adds them up, the read
// alone. It reports the fastest call, on ONNX Runtime and on the pure-Go backend.
func BenchmarkCacheProducts(b *testing.B) {
	b.Run("onnx", func(b *testing.B) { benchCacheProducts(b, onnxBackend(b)) })
	b.Run("go", func(b *testing.B) { benchCacheProducts(b, goBackend(b)) })
}

func benchCacheProducts(b *testing.B, backend compute.Backend) {
	const kvH, group, hd, layers, slots = 8, 2, 128, 28, 5120
	blocks := blockSizes(slots)
	q := randomTensor(b, dtypes.Float32, kvH, group, hd)
	p := randomTensor(b, dtypes.Float32, kvH, group, slots)
	stored, left := ops{layout: Layout{}}, ops{layout: Layout{CacheLeft: true}}
	variants := []struct {
		name       string
		small      *tensors.Tensor
		transposed bool // blocks [kvH, hd, n]
		fn         func(small *Node, blocks []*Node) *Node
	}{
		{"keys-stored", q, false, stored.cacheScores},
		{"keys-left", q, false, left.cacheScores},
		{"values-stored", p, false, stored.cacheContext},
		{"values-left", p, true, left.cacheContext},
		{"sum", q, false, func(_ *Node, bl []*Node) *Node {
			parts := make([]*Node, len(bl))
			for i, x := range bl {
				parts[i] = ReduceAllSum(x)
			}
			return Stack(parts, 0)
		}},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			args := []any{v.small}
			for range layers {
				args = append(args, cacheBlocks(b, backend, blocks, kvH, hd, v.transposed)...)
			}
			exec, err := NewExec(backend, func(g *Graph, in []*Node) []*Node {
				out := make([]*Node, layers)
				for l := range out {
					out[l] = v.fn(in[0], in[1+l*len(blocks):1+(l+1)*len(blocks)])
				}
				return out
			})
			if err != nil {
				b.Fatal(err)
			}
			defer exec.Finalize()
			callFreed(b, exec, args)
			best := time.Duration(math.MaxInt64)
			for b.Loop() {
				begin := time.Now()
				callFreed(b, exec, args)
				best = min(best, time.Since(begin))
			}
			b.ReportMetric(float64(best.Microseconds())/1000, "best-ms")
		})
	}
}

// cacheBlocks is zero float32 cache blocks of the given sizes on backend, each [kvH, n, hd], or
// [kvH, hd, n] transposed (values under Layout.CacheLeft), freed when the benchmark ends.
func cacheBlocks(b *testing.B, backend compute.Backend, sizes []int, kvH, hd int, transposed bool) []any {
	out := make([]any, len(sizes))
	for i, n := range sizes {
		dims := []int{kvH, n, hd}
		if transposed {
			dims = []int{kvH, hd, n}
		}
		t, err := tensors.FromShapeForBackend(backend, 0, shapes.Make(dtypes.Float32, dims...))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { t.FinalizeAll() })
		out[i] = t
	}
	return out
}

// callFreed runs exec on args and frees its outputs.
func callFreed(b *testing.B, exec *Exec, args []any) {
	out, err := exec.Call(args...)
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range out {
		t.FinalizeAll()
	}
}

// BenchmarkKeyPanels is the measurement behind a tried layout of the KV cache: decode's query rows
// (4 per kv head, Qwen3-0.6B's 8 kv heads of 128) times 64 key blocks of 512 positions, as the go
// layout stores them (KeysTransposed, [kvHeads, hd, n]: the small kernel's 4 × 64 tiles stride
// 2 KB from one row of a block to the next) and as panels of 64 positions ([kvHeads·n/64, hd,
// 64], each read straight through, the rows copied per panel and the output transposed back).
// It reports the keys' GB/s. On a 2-core AMD Zen 5 (compute v0.1.14, 2026-12-05):
// 31.5–35.5 GB/s as stored, 38.0–44.1 as panels (three runs). A cache that stored its keys so
// made a depth-4,096 decode step of Qwen3-0.6B only 1–3% faster and its prompt there slower
// (docs/performance.md), so the cache keeps KeysTransposed's layout.
func BenchmarkKeyPanels(b *testing.B) {
	const heads, hd, n, rows, blocks, width = 8, 128, 512, 4, 64, 64
	backend := goBackend(b)
	for _, panels := range []bool{false, true} {
		args := []any{randomTensor(b, dtypes.Float32, heads, rows, hd)}
		for range blocks {
			if panels {
				args = append(args, randomTensor(b, dtypes.Float32, heads*n/width, hd, width))
			} else {
				args = append(args, randomTensor(b, dtypes.Float32, heads, hd, n))
			}
		}
		b.Run(fmt.Sprintf("panels=%v", panels), func(b *testing.B) {
			loopCores(b, backend, func(args []*Node) *Node {
				q := args[0]
				var qs *Node
				if panels {
					copies := make([]*Node, n/width)
					for i := range copies {
						copies[i] = InsertAxes(q, 1)
					}
					qs = Reshape(Concatenate(copies, 1), heads*n/width, rows, hd) // [kvHeads·n/64, rows, hd]
				}
				parts := make([]*Node, 0, blocks)
				for _, k := range args[1:] {
					if !panels {
						parts = append(parts, DotGeneral(q, []int{2}, []int{0}, k, []int{1}, []int{0})) // [kvHeads, rows, n]
						continue
					}
					y := DotGeneral(qs, []int{2}, []int{0}, k, []int{1}, []int{0}) // [kvHeads·n/64, rows, 64]
					parts = append(parts, Reshape(TransposeAllAxes(Reshape(y, heads, n/width, rows, width), 0, 2, 1, 3), heads, rows, n))
				}
				return Concatenate(parts, 2)
			}, args...)
			b.ReportMetric(float64(heads*hd*n*blocks*4)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

// BenchmarkValueLayouts is the measurement for the value side of a decode step at depth 4,096:
// the probabilities' rows (4 per kv head, padded as CacheLeftPad pads them) times 28 layers × 8
// value blocks of 512 positions of Qwen3-0.6B (8 kv heads of 128), the blocks stored as the go
// layout stores them ("transposed", [kvHeads, hd, n], multiplied on the left with the rows as
// they lie: ContextByRows, the small kernel's transposed 4 × 4 tiles), as rows ([kvHeads, n, hd],
// p·V on the 4 × 64 tiles, two per row of 128) and as panels of 64 of the head dimension
// ([kvHeads, 2, n, 64], the rows copied per panel, each panel read straight through). It
// reports the values' GB/s. On a 2-core AMD Zen 5 (compute v0.1.14, 2026-12-05, three runs):
// 23.1–23.9, 24.2–25.1 and 25.4–29.6 GB/s; at that rate the panels would save 1–4 ms of a
// 100 ms step (not built: see docs/performance.md).
func BenchmarkValueLayouts(b *testing.B) {
	const layers, blocks, kvHeads, hd, n, rows, width = 28, 8, 8, 128, 512, 4, 64
	backend := goBackend(b)
	for _, form := range []string{"transposed", "rows", "panels"} {
		args := []any{randomTensor(b, dtypes.Float32, layers, kvHeads, rows, blocks*n)}
		for range layers * blocks {
			switch form {
			case "transposed":
				args = append(args, randomTensor(b, dtypes.Float32, kvHeads, hd, n))
			case "rows":
				args = append(args, randomTensor(b, dtypes.Float32, kvHeads, n, hd))
			case "panels":
				args = append(args, randomTensor(b, dtypes.Float32, kvHeads, hd/width, n, width))
			}
		}
		b.Run(form, func(b *testing.B) {
			loopCores(b, backend, func(in []*Node) *Node {
				outs := make([]*Node, layers)
				for l := range outs {
					p := Reshape(SliceAxis(in[0], 0, AxisElem(l)), kvHeads, rows, blocks*n)
					for j := range blocks {
						v, pj := in[1+l*blocks+j], SliceAxis(p, 2, AxisRange(j*n, (j+1)*n))
						var y *Node // [kvHeads, rows, hd]
						switch form {
						case "transposed": // Vᵀ·pᵀ, [kvHeads, hd, rows]
							y = Transpose(DotGeneral(v, []int{2}, []int{0}, pj, []int{2}, []int{0}), 1, 2)
						case "rows":
							y = DotGeneral(pj, []int{2}, []int{0}, v, []int{1}, []int{0})
						case "panels":
							copies := make([]*Node, hd/width)
							for i := range copies {
								copies[i] = InsertAxes(pj, 1)
							}
							y = DotGeneral(Concatenate(copies, 1), []int{3}, []int{0, 1}, v, []int{2}, []int{0, 1}) // [kvHeads, 2, rows, 64]
							y = Reshape(TransposeAllAxes(y, 0, 2, 1, 3), kvHeads, rows, hd)
						}
						if outs[l] == nil {
							outs[l] = y
						} else {
							outs[l] = Add(outs[l], y)
						}
					}
				}
				return Concatenate(outs, 0)
			}, args...)
			b.ReportMetric(float64(layers*blocks*kvHeads*hd*n*4)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

// BenchmarkFusedAttentionAtDepth measures compute's fused attention (its AVX-512 kernel for a
// head dimension of 128), the op GoMLX's attention.Core runs, on a decode step's shape at depth:
// 28 layers, one query row for each of 16 heads over 8 kv heads, keys and values [1, 8, depth,
// 128] float32, each contiguous. It reports the keys' and values' GB/s. On a 2-core AMD Zen 5
// (compute v0.1.14, 2026-12-05, five runs): 23.2–29.9 ms at depth 4,096 (31–40 GB/s), where a
// depth-4,096 step of the go layout's blocked cache takes 38–42 ms more than a depth-0 one. It
// is not used: octlm's cache grows in blocks without copying, the op returns no log-sum-exp to
// merge blocks (or the cache and the step's own new rows) with, and writing the new rows into
// the cache inside the graph copies it (BenchmarkScatterDonated); see docs/performance.md. The
// op is called through graph.BackendFusedScaledDotProductAttention, which GoMLX marks as
// internal: its stable wrapper, ml/layers/attention, would pull plotting and training packages
// into go.sum for a benchmark.
func BenchmarkFusedAttentionAtDepth(b *testing.B) {
	const layers, kvHeads, heads, hd = 28, 8, 16, 128
	backend := goBackend(b)
	for _, depth := range []int{1024, 4096} {
		args := []any{randomTensor(b, dtypes.Float32, layers, 1, heads, 1, hd)}
		for range layers {
			args = append(args, randomTensor(b, dtypes.Float32, 1, kvHeads, depth, hd), randomTensor(b, dtypes.Float32, 1, kvHeads, depth, hd))
		}
		b.Run(fmt.Sprint("depth=", depth), func(b *testing.B) {
			loopCores(b, backend, func(in []*Node) *Node {
				outs := make([]*Node, layers)
				for l := range outs {
					q := Reshape(SliceAxis(in[0], 0, AxisElem(l)), 1, heads, 1, hd)
					outs[l], _ = BackendFusedScaledDotProductAttention(q, in[1+2*l], in[2+2*l], compute.AttentionAxesLayoutBHSD, &compute.ScaledDotProductAttentionConfig{})
				}
				return Concatenate(outs, 0)
			}, args...)
			b.ReportMetric(float64(layers*2*kvHeads*depth*hd*4)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

// BenchmarkScatterDonated measures what writing one position's keys into a layer's cache
// inside the graph would cost on the pure-Go backend: ScatterUpdate of [8, 1, 128] rows into
// a [8, 4096, 128] float32 cache (16 MiB), the cache passed as it is or donated to the call. It
// reports milliseconds per call. On a 2-core AMD Zen 5 (compute v0.1.14, 2026-12-05): 6.9–12.8
// ms as it is, 3.1–3.5 ms donated, a copy's time for 16 MiB where writing the 4 KiB of rows in
// place would take microseconds. A fused attention that wanted the new token's keys in the cache
// tensor (BenchmarkFusedAttentionAtDepth) would pay 56 of them a step; octlm's host writes the
// rows in place after the step instead (Cache.writeRows).
func BenchmarkScatterDonated(b *testing.B) {
	const kvHeads, n, hd = 8, 4096, 128
	backend := goBackend(b)
	exec, err := NewExec(backend, func(cache, rows, start *Node) *Node {
		g := cache.Graph()
		idx := shapes.Make(dtypes.Int32, kvHeads, 1, 1)
		slots := Add(Reshape(start, 1, 1, 1), Iota(g, idx, 1))
		return ScatterUpdate(cache, Concatenate([]*Node{Iota(g, idx, 0), slots}, -1), rows, true, true)
	})
	if err != nil {
		b.Fatal(err)
	}
	defer exec.Finalize()
	rows := randomTensor(b, dtypes.Float32, kvHeads, 1, hd)
	for _, donate := range []bool{false, true} {
		b.Run(fmt.Sprint("donated=", donate), func(b *testing.B) {
			cache := randomTensor(b, dtypes.Float32, kvHeads, n, hd)
			i := 0
			for b.Loop() {
				var arg any = cache
				if donate {
					if arg, err = DonateTensorBuffer(cache, backend, 0); err != nil {
						b.Fatal(err)
					}
				}
				out, err := exec.Call(arg, rows, tensors.FromValue(int32(i%n)))
				if err != nil {
					b.Fatal(err)
				}
				if !donate {
					cache.FinalizeAll()
				}
				cache, i = out[0], i+1
			}
			cache.FinalizeAll()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/call")
		})
	}
}
