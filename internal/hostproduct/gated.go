package hostproduct

import (
	"fmt"
	"math"
	"strings"
	"sync/atomic"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/shapes"
)

// GatedFunction begins the name of every graph function (compute.Builder.NewFunction) that this
// backend runs in Go as a gated MLP's activation: its body, the definition, is never compiled,
// and each call of it ends the current piece like a product. Its parameters are gate and up, of
// one shape and dtype (float32 or bfloat16); its one result, of that shape and dtype, is
// SiLU(gate) · up = (gate · σ(gate)) · up, each of σ and the two products rounded to the dtype
// as the definition's operations on compute round them (σ within a few float32 ulps of it). Where the gate and up
// projections' outputs are joins (join.go), the call and the down projection's products after
// it leave no piece between the two runs of products: compute spent 20–27 µs a layer there in a
// Qwen3-0.6B decode step, a piece of its own.
const GatedFunction = "hostproduct.gated"

// gated is one call of a gated function, run in Go.
type gated struct {
	gate, up, out int // slots
	shape         shapes.Shape
}

// gatedChunk is how many values one worker takes at a time.
const gatedChunk = 16 << 10

// isGated says whether the host function named name is a gated one (else attention).
func isGated(name string) bool { return strings.HasPrefix(name, GatedFunction) }

// newGated checks a call's arguments against GatedFunction's form and h's parameters.
func newGated(name string, h *hostFunction, inputs []compute.Value) (*gated, error) {
	bad := badCall(name)
	shape, err := h.argShapes(name, inputs, 1)
	if err != nil {
		return nil, err
	}
	if len(shape) != 2 {
		return nil, bad("%d parameters, want gate and up", len(shape))
	}
	if !shape[0].Equal(shape[1]) || !floatDType(shape[0].DType) {
		return nil, bad("gate %s and up %s, want one shape of float32 or bfloat16", shape[0], shape[1])
	}
	if !h.result[0].Equal(shape[0]) {
		return nil, bad("result %s, want %s", h.result[0], shape[0])
	}
	return &gated{shape: shape[0]}, nil
}

// callGated records a call of gated function h in main: it ends the current piece.
func (f *function) callGated(h *function, inputs []compute.Value) ([]compute.Value, error) {
	g, err := newGated(h.name, h.host, inputs)
	if err != nil {
		return nil, err
	}
	slots, err := f.argSlots(h, inputs)
	if err != nil {
		return nil, err
	}
	g.gate, g.up, g.out = slots[0], slots[1], f.b.newSlot()
	return f.record(g, g.shape), nil
}

func (g *gated) reads() []int  { return []int{g.gate, g.up} }
func (g *gated) writes() []int { return []int{g.out} }

// run writes g's result, its values shared out in chunks, into the gate's buffer where the call
// may reuse it and it has the result's shape (a view's buffer has its base's), else a new one.
func (g *gated) run(e *executable, c *callState) error {
	gate, err := c.read(g.gate, "gate")
	if err != nil {
		return err
	}
	up, err := c.read(g.up, "up")
	if err != nil {
		return err
	}
	n := g.shape.Size()
	if gate.len() != n || up.len() != n {
		return fmt.Errorf("hostproduct: gated function's operands hold %d and %d values for %s", gate.len(), up.len(), g.shape)
	}
	out, err := e.result(c, g.out, g.gate, g.shape)
	if err != nil {
		return err
	}
	chunks := (n + gatedChunk - 1) / gatedChunk
	work := func(lo, hi int) {
		if out.f32 != nil {
			siluMul(gate.f32[lo:hi], up.f32[lo:hi], out.f32[lo:hi])
			return
		}
		siluMul16(gate.b16[lo:hi], up.b16[lo:hi], out.b16[lo:hi])
	}
	if chunks == 1 {
		work(0, n)
	} else {
		var next atomic.Int64
		e.backend.shareOut(min(e.backend.opts.Workers, chunks), func(int) {
			for c := int(next.Add(1)) - 1; c < chunks; c = int(next.Add(1)) - 1 {
				work(c*gatedChunk, min((c+1)*gatedChunk, n))
			}
		}, 0)
	}
	e.backend.gatedRun.Add(1)
	return nil
}

// round16 is v rounded to bfloat16.
func round16(v float32) float32 { return bfloat16.FromFloat32(v).Float32() }

// logistic is σ(x) in float64, rounded to float32, as compute's plain Logistic computes it.
func logistic(x float32) float32 {
	if x >= 0 {
		return float32(1 / (1 + math.Exp(-float64(x))))
	}
	e := math.Exp(float64(x))
	return float32(e / (1 + e))
}

// siluMulPlain writes (gate·σ(gate))·up into y.
func siluMulPlain(gate, up, y []float32) {
	for i, g := range gate {
		y[i] = g * logistic(g) * up[i]
	}
}

// siluMul16Plain writes round16(gate · round16(σ(gate))) · up, rounded to bfloat16, into y (y
// may be gate).
func siluMul16Plain(gate, up, y []uint16) {
	up, y = up[:len(gate)], y[:len(gate)]
	for i, g := range gate {
		x := widen16(g)
		y[i] = bits16(round16(x*round16(logistic(x))) * widen16(up[i]))
	}
}
