package octlm

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified

	"github.com/octlm/octlm/xla"
)

// benchBatches is the batch sizes of the batched-decode benchmarks: $OCTLM_BENCH_BATCHES (a
// comma-separated list) or 1 and 8.
func benchBatches(b *testing.B) []int {
	spec := os.Getenv("OCTLM_BENCH_BATCHES")
	if spec == "" {
		return []int{1, 8}
	}
	var sizes []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("OCTLM_BENCH_BATCHES=%q: want batch sizes of 1 or more", spec)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// batchDecoder decodes a batch of sequences greedily, one NextBatch step at a time, each on its
// own cache after the same prompt; a step that would pass the caches' capacity refills them
// first (not timed).
type batchDecoder struct {
	b      *testing.B
	m      *Model
	caches []*Cache
	next   [][]int
}

func newBatchDecoder(b *testing.B, m *Model, batch int) *batchDecoder {
	d := &batchDecoder{b: b, m: m, caches: make([]*Cache, batch), next: make([][]int, batch)}
	b.Cleanup(func() {
		for _, c := range d.caches {
			if c != nil {
				c.Close()
			}
		}
	})
	d.reset()
	d.step() // compile the decode graph at the prompt's end
	d.step() // and one past it (the first step after a 128-token prompt reads one more block)
	return d
}

func (d *batchDecoder) reset() {
	prompt := benchPrompt(benchLen, d.m.Shape().Vocab)
	for i := range d.caches {
		if d.caches[i] != nil {
			d.caches[i].Close()
		}
		c, err := d.m.NewCache(benchLen + 64)
		if err != nil {
			d.b.Fatal(err)
		}
		d.caches[i], d.next[i] = c, prompt
	}
	d.advance()
}

// advance runs one NextBatch step on d.next and takes each sequence's greedy token as its next.
func (d *batchDecoder) advance() {
	logits, err := d.m.NextBatch(d.next, d.caches)
	if err != nil {
		d.b.Fatal(err)
	}
	for i, l := range logits {
		d.next[i] = []int{Argmax(l)}
	}
}

// step decodes one token of every sequence and returns how long it took.
func (d *batchDecoder) step() time.Duration {
	if d.caches[0].Len() == d.caches[0].Capacity() {
		d.reset()
	}
	begin := time.Now()
	d.advance()
	return time.Since(begin)
}

// BenchmarkBatchDecode decodes one token of B sequences at once (NextBatch), a sub-benchmark
// for each batch size of $OCTLM_BENCH_BATCHES (default 1 and 8), on ONNX Runtime with the
// checkpoint $OCTLM_BENCH_CHECKPOINT (full size: Qwen3-0.6B's, from octlm synth --like
// qwen3-0.6b), reporting milliseconds per step. The sizes run one after another, not step by
// step alternated: each step graph is an ONNX Runtime session with a thread pool of its own,
// whose worker spins after a call and took a core from the other (a B = 8 step 2–3× slower,
// docs/performance.md). It fails if a step graph compiles inside the timed loop.
//
//	OCTLM_BENCH_CHECKPOINT=/tmp/q06 GOEXPERIMENT=simd go test ./octlm/ -run '^$' \
//	    -bench BatchDecode -benchtime 16x
func BenchmarkBatchDecode(b *testing.B) {
	m := loadBenchOn(b, onnxBackend(b), benchCheckpointDir(b), LayoutFor(xla.EngineONNX))
	for _, n := range benchBatches(b) {
		b.Run(fmt.Sprintf("B%d", n), func(b *testing.B) {
			d := newBatchDecoder(b, m, n)
			compiled := m.CompileStats().Graphs
			var took time.Duration
			for b.Loop() {
				took += d.step()
			}
			if c := m.CompileStats().Graphs - compiled; c > 0 {
				b.Fatalf("%d step graphs compiled inside the timed loop", c)
			}
			b.ReportMetric(took.Seconds()*1e3/float64(b.N), "ms/step")
		})
	}
}

// BenchmarkBatchProducts times a decode step's products alone: every Linear weight of the
// checkpoint $OCTLM_BENCH_CHECKPOINT (loaded on ONNX Runtime in its layout) and the head,
// multiplied in layer order by B rows (ops.projections, ops.project and ops.head, as the step
// graph calls them; each layer's input RMS-normalised), for each batch size of
// $OCTLM_BENCH_BATCHES, alternated: milliseconds per step's products for each B, to set
// against BenchmarkBatchDecode's whole step.
//
//	OCTLM_BENCH_CHECKPOINT=/tmp/q06 GOEXPERIMENT=simd go test ./octlm/ -run '^$' \
//	    -bench BatchProducts -benchtime 16x
func BenchmarkBatchProducts(b *testing.B) {
	m := loadBenchOn(b, onnxBackend(b), benchCheckpointDir(b), LayoutFor(xla.EngineONNX))
	c, ok := m.Qwen3Config()
	if !ok {
		b.Skip("a Qwen3 checkpoint is needed")
	}
	o := ops{layout: m.layout, vocab: m.shape.Vocab}
	for _, n := range benchBatches(b) {
		b.Run(fmt.Sprintf("B%d", n), func(b *testing.B) {
			exec, err := NewExec(m.Backend, func(g *Graph, inputs []*Node) []*Node {
				w := newWeightSet(m.specs, m.layout, inputs[1:])
				x := inputs[0]
				for l := range c.NLayers {
					lw := w.under(fmt.Sprintf("model.layers.%d.", l))
					qkv := o.projections(x, lw.under("self_attn."), "q_proj.weight", "k_proj.weight", "v_proj.weight")
					x = rmsNormalized(o, o.project(qkv[0], lw.under("self_attn."), "o_proj.weight"), 1e-6)
					gateUp := o.projections(x, lw.under("mlp."), "gate_proj.weight", "up_proj.weight")
					x = rmsNormalized(o, o.project(Mul(gateUp[0], gateUp[1]), lw.under("mlp."), "down_proj.weight"), 1e-6)
				}
				return []*Node{o.head(x, w.table(EmbeddingName))}
			})
			if err != nil {
				b.Fatal(err)
			}
			defer exec.Finalize()
			args := []any{randomTensor(b, dtypes.Float32, n, c.DModel)}
			for _, t := range m.weights {
				args = append(args, t)
			}
			call := func() time.Duration {
				begin := time.Now()
				outs, err := exec.Call(args...)
				if err != nil {
					b.Fatal(err)
				}
				outs[0].FinalizeAll()
				return time.Since(begin)
			}
			call() // compile
			var took time.Duration
			for b.Loop() {
				took += call()
			}
			b.ReportMetric(took.Seconds()*1e3/float64(b.N), "ms/step")
		})
	}
}
