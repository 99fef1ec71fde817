// Package hostproduct wraps a compute backend whose buffers are host memory (GoMLX's pure-Go
// backend) so that a graph's products of a few rows by a weight held as panels of columns run
// in Go, between compiled pieces of the graph, instead of on the backend's kernels.
//
// compute v0.1.14's small kernel multiplies tiles of four rows: a decode step's one-row product
// is padded to four, and three quarters of its multiply-adds are on zeros. On an Intel Xeon
// (Emerald Rapids) that arithmetic, not memory, limits it (20 GB/s float32, 13 bfloat16), where
// one row in Go reads the same panels at 31–33 and 20 (BenchmarkPanels; octlm's
// BenchmarkMatMulPanels is compute's side). The fix belongs in compute's kernel; this package is
// octlm's workaround through public APIs: a compute.Backend of its own (compute.Backend is an
// interface) that records each graph, cuts it at every such product (Options says which) and
// compiles the pieces between on the wrapped backend. A graph without such a product compiles
// as one piece, as it would unwrapped.
//
// A product is cut when DotGeneral multiplies lhs [rows, in] (rows ≤ Options.MaxRows),
// contracting its last axis, by a parameter of the graph rhs [count, in, width] contracting its
// axis 1, with no batch axes and the default dtypes, float32 or bfloat16 both: the output
// [rows, count, width] is panel q's columns for each row. Anything else is passed to the wrapped
// backend as it is. A run's panels are shared out among the caller and a crew of goroutines
// kept between runs (crew.go).
//
// Between the pieces, a Reshape of a value that lives in a slot is a view of its buffer, and a
// Concatenate of such values runs in Go, written in place by the products that make its
// operands where it can (join.go): a weight multiplied in pieces reaches the next piece as one
// buffer, with no piece for the reshapes and the concatenation.
//
// With Options.Attention, a call of a graph function named for AttentionFunction (attention
// over a KV cache's blocks, in the form its comment gives) also ends the piece and runs in Go,
// its kv heads shared out the same way, reading only the slots any row attends
// (hostattention.go). compute v0.1.14 multiplies a decode step's query rows by a cache block on
// its small kernels with an overhead of their own per product, four or more products a layer,
// and runs the softmax and the sums between them as separate operations: a Qwen3-0.6B step at
// depth 128–192 spent 0.36–0.40 ms a layer there.
//
// So do calls of graph functions named for GatedFunction (an MLP's SiLU · up, gated.go),
// NormFunction and RopeFunction (an RMS norm, with the residual connection before it, and
// rotary position embedding, norm.go), and an Add of two values that live in slots with one shape
// (add.go): compute spends about 10 µs a piece and 1–2 µs an operation (up to 5–9 on a guest
// where its executor's hand-offs between cores are slow), where these take a few in Go. They
// share one form in the executor (call.go).
package hostproduct

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/shapes"
)

// Options says which products run in Go.
type Options struct {
	// MaxRows is the most rows a product run in Go may have; 0 runs none in Go (the graph is
	// compiled whole, as by the wrapped backend).
	MaxRows int
	// Workers is how many goroutines multiply the panels of a piece's products; 0 means
	// runtime.GOMAXPROCS(0).
	Workers int
	// Attention runs the calls of graph functions named for AttentionFunction in Go; without it
	// they run on the wrapped backend like any other function.
	Attention bool
}

// Backend is a compute.Backend that runs a graph's small products by resident panels in Go
// (see the package comment) and everything else on the backend it wraps. Its buffers are the
// wrapped backend's, reporting this Backend as their owner.
type Backend struct {
	compute.Backend
	opts        Options
	productsRun atomic.Int64
	attendedRun atomic.Int64
	// attentionSteps is how many runs of attentions (runAttentions) ran, for the tests.
	attentionSteps atomic.Int64
	joinsRun       atomic.Int64
	gatedRun       atomic.Int64
	normRun        atomic.Int64
	ropeRun        atomic.Int64
	sumsRun        atomic.Int64
	convertsRun    atomic.Int64
	joinedInPlace  atomic.Int64 // joins written by their products, for the tests
	piecesRun      atomic.Int64 // compiled pieces run, for the tests
	spent          spentTimes
	crewOnce       sync.Once
	products       *crew // started by the first product run that shares its work
	scratchMu      sync.Mutex
	scratches      []*scratch   // free, for runProducts
	spares         spares       // the shared buffers of steps' results, for newResult
	resultsMade    atomic.Int64 // buffers newResult made, not spare: for the tests
}

// Wrap returns inner wrapped. inner must share its buffers with Go (HasSharedBuffers): the
// products read the weights where they lie.
func Wrap(inner compute.Backend, opts Options) (*Backend, error) {
	if inner == nil {
		return nil, errors.New("hostproduct: no backend to wrap")
	}
	if !inner.HasSharedBuffers() {
		return nil, fmt.Errorf("hostproduct: backend %q does not share its buffers with Go", inner.Name())
	}
	if opts.MaxRows < 0 || opts.Workers < 0 {
		return nil, fmt.Errorf("hostproduct: options %+v: negative", opts)
	}
	if opts.Workers == 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	return &Backend{Backend: inner, opts: opts}, nil
}

// crew returns b's product crew, started on first use.
func (b *Backend) crew() *crew {
	b.crewOnce.Do(func() { b.products = newCrew(b.opts.Workers - 1) })
	return b.products
}

// Finalize stops the product crew and finalizes the wrapped backend.
func (b *Backend) Finalize() {
	b.crewOnce.Do(func() {}) // no crew after this
	if b.products != nil {
		b.products.stop()
	}
	b.dropSpares()
	b.Backend.Finalize()
}

// Unwrap returns the backend b wraps.
func (b *Backend) Unwrap() compute.Backend { return b.Backend }

// GatedRun is how many calls of GatedFunction's functions have run in Go.
func (b *Backend) GatedRun() int64 { return b.gatedRun.Load() }

// NormsRun is how many calls of NormFunction's functions have run in Go.
func (b *Backend) NormsRun() int64 { return b.normRun.Load() }

// RopesRun is how many calls of RopeFunction's functions have run in Go.
func (b *Backend) RopesRun() int64 { return b.ropeRun.Load() }

// SumsRun is how many Add operations have run in Go (add.go).
func (b *Backend) SumsRun() int64 { return b.sumsRun.Load() }

// ConvertsRun is how many ConvertDType operations have run in Go (convert.go).
func (b *Backend) ConvertsRun() int64 { return b.convertsRun.Load() }

// JoinsRun is how many Concatenate operations have run in Go (join.go).
func (b *Backend) JoinsRun() int64 { return b.joinsRun.Load() }

// AttentionsRun is how many calls of AttentionFunction's functions have run in Go.
func (b *Backend) AttentionsRun() int64 { return b.attendedRun.Load() }

// Times is where b's graphs have spent their time so far, step by step: wall-clock time, each
// step of a graph run after the one before it.
type Times struct {
	// Products is the time in runs of products in Go: preparing their operands, sharing the
	// panels out, multiplying, waiting for the slowest worker.
	Products time.Duration
	// Attention is the time in runs of attention calls in Go.
	Attention time.Duration
	// Pieces is the time in the graphs' other parts: run by the wrapped backend, and the
	// concatenations, gated activations, norms, RoPE and sums between them, run in Go (join.go,
	// gated.go, norm.go, add.go).
	Pieces time.Duration
	// Graphs is the time in the graphs' runs, whole: their steps and what each run does
	// around them (its inputs taken, buffers finalized between steps, outputs handed back).
	Graphs time.Duration
	// ProductWeightBytes is how many bytes of weights the runs of products read (each once a
	// run, however many rows multiply it).
	ProductWeightBytes int64
}

// Sub is t less an earlier snapshot: what was spent between the two.
func (t Times) Sub(before Times) Times {
	return Times{Products: t.Products - before.Products, Attention: t.Attention - before.Attention,
		Pieces: t.Pieces - before.Pieces, Graphs: t.Graphs - before.Graphs, ProductWeightBytes: t.ProductWeightBytes - before.ProductWeightBytes}
}

// Times reports where b's graphs have spent their time so far. Graphs run at once (several
// goroutines calling b's executables) add up their times.
func (b *Backend) Times() Times {
	return Times{Products: time.Duration(b.spent.of[productStep].Load()), Attention: time.Duration(b.spent.of[attentionStep].Load()),
		Pieces: time.Duration(b.spent.of[pieceStep].Load()), Graphs: time.Duration(b.spent.graphs.Load()),
		ProductWeightBytes: b.spent.weightBytes.Load()}
}

// stepKind is what a step of an executable runs.
type stepKind int

const (
	productStep stepKind = iota
	attentionStep
	pieceStep
	stepKinds
)

// spentTimes accumulates Times: nanoseconds by stepKind.
type spentTimes struct {
	of          [stepKinds]atomic.Int64
	graphs      atomic.Int64
	weightBytes atomic.Int64
}

// add adds one execution's times: its steps', and its whole.
func (s *spentTimes) add(spent [stepKinds]time.Duration, whole time.Duration) {
	for k, d := range spent {
		s.of[k].Add(int64(d))
	}
	s.graphs.Add(int64(whole))
}

// ProductsRun is how many products b's graphs have run in Go so far.
func (b *Backend) ProductsRun() int64 { return b.productsRun.Load() }

// Options returns the options b was wrapped with.
func (b *Backend) Options() Options { return b.opts }

// Builder starts a graph.
func (b *Backend) Builder(name string) compute.Builder { return newBuilder(b, name) }

// BufferFromFlatData implements compute.DataInterface.
func (b *Backend) BufferFromFlatData(deviceNum compute.DeviceNum, flat any, shape shapes.Shape) (compute.Buffer, error) {
	buf, err := b.Backend.BufferFromFlatData(deviceNum, flat, shape)
	if err != nil {
		return nil, err
	}
	return b.wrap(buf), nil
}

// NewSharedBuffer implements compute.DataInterface.
func (b *Backend) NewSharedBuffer(deviceNum compute.DeviceNum, shape shapes.Shape) (compute.Buffer, any, error) {
	buf, flat, err := b.Backend.NewSharedBuffer(deviceNum, shape)
	if err != nil {
		return nil, nil, err
	}
	return b.wrap(buf), flat, nil
}

// buffer is a wrapped backend's buffer that names the Backend as its owner: GoMLX's tensors
// refuse a buffer of another backend.
type buffer struct {
	compute.Buffer
	owner *Backend
	hold  holding     // held, or heldSpare where newResult made it: kept spare when finalized
	gone  atomic.Bool // finalized, or donated to a run of an executable
}

func (b *Backend) wrap(buf compute.Buffer) compute.Buffer {
	return &buffer{Buffer: buf, owner: b, hold: held}
}

// wrapResult wraps a run's output, handed to the caller, who holds it from now on: spare where
// the run held it so, else to finalize.
func (b *Backend) wrapResult(buf compute.Buffer, hold holding) compute.Buffer {
	if hold != heldSpare {
		hold = held
	}
	return &buffer{Buffer: buf, owner: b, hold: hold}
}

// Finalize implements compute.Buffer: a buffer newResult made is kept spare (a decode step's
// logits and new keys and values). A second Finalize, or one after the buffer was donated to a
// run, does nothing.
func (x *buffer) Finalize() error {
	if x.gone.Swap(true) {
		return nil
	}
	return x.owner.release(x.Buffer, x.hold)
}

// donate hands x's buffer to a run that holds it from now on as x did.
func (x *buffer) donate() (compute.Buffer, holding, error) {
	if x.gone.Swap(true) {
		return nil, notHeld, errors.New("hostproduct: a buffer donated after it was finalized or donated")
	}
	return x.Buffer, x.hold, nil
}

// Backend returns the Backend that made the buffer.
func (x *buffer) Backend() compute.Backend { return x.owner }

// CopyToDevice implements compute.Buffer.
func (x *buffer) CopyToDevice(deviceNum compute.DeviceNum) (compute.Buffer, error) {
	buf, err := x.Buffer.CopyToDevice(deviceNum)
	if err != nil {
		return nil, err
	}
	return x.owner.wrap(buf), nil
}

// unwrap returns the wrapped backend's buffer of buf.
func unwrap(buf compute.Buffer) (compute.Buffer, error) {
	x, ok := buf.(*buffer)
	if !ok {
		return nil, fmt.Errorf("hostproduct: buffer %T is not this backend's", buf)
	}
	return x.Buffer, nil
}
