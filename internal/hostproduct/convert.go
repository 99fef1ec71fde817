package hostproduct

import (
	"fmt"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
)

// ConvertDType implements compute.StandardOps: where no piece is being built and x lives in a
// slot (outsidePiece), a conversion between float32 and bfloat16 or float16 (convertsInGo) runs
// in Go between the pieces;
// else the wrapped backend's operation in the current piece. A bfloat16 model's logits, widened
// after the head's product, were such a piece of one operation: 330–360 µs of a Qwen3-0.6B
// decode step (151,936 values) on a 2-core AMD EPYC guest.
func (f *function) ConvertDType(x compute.Value, dtype dtypes.DType) (compute.Value, error) {
	if c, err := f.hostConvert(x, dtype); err != nil || c != nil {
		if err != nil {
			return nil, err
		}
		return f.record(c, c.shape)[0], nil
	}
	in, err := f.inner()
	if err != nil {
		return nil, err
	}
	xIn, err := f.use(x)
	if err != nil {
		return nil, err
	}
	r, err := in.ConvertDType(xIn, dtype)
	if err != nil {
		return nil, err
	}
	return f.made(r), nil
}

// convert is a ConvertDType run in Go: its operand's slot and its result's, of shape.
type convert struct {
	x, out int
	shape  shapes.Shape // the result's
}

// hostConvert is the conversion of x to dtype, or nil where it does not qualify.
func (f *function) hostConvert(x compute.Value, dtype dtypes.DType) (*convert, error) {
	if f.buildingPiece() {
		return nil, nil // the operation joins the piece
	}
	v, ok := x.(*value)
	if !ok || !f.outsidePiece(v) || !convertsInGo(v.shape.DType, dtype) {
		return nil, nil
	}
	c := &convert{shape: v.shape.Clone()}
	c.shape.DType = dtype
	var err error
	if c.x, err = f.b.slotOf(v); err != nil {
		return nil, err
	}
	c.out = f.b.newSlot()
	return c, nil
}

// convertsInGo says whether a conversion from one dtype to another runs in Go: between float32
// and bfloat16, or float32 and float16 (a float16 KV cache's keys and values, and the chunk's
// read back as the cache holds them).
func convertsInGo(from, to dtypes.DType) bool {
	switch {
	case from == to:
		return false
	case floatDType(from) && floatDType(to):
		return true
	}
	return (from == dtypes.Float32 && to == dtypes.Float16) || (from == dtypes.Float16 && to == dtypes.Float32)
}

func (c *convert) reads() []int  { return []int{c.x} }
func (c *convert) writes() []int { return []int{c.out} }

// run writes x in the other dtype into a new buffer, rounded to bfloat16 or float16 as compute
// rounds it (bfloat16.FromFloat32, float16.FromFloat32) or widened exactly; a long operand shared
// out.
func (c *convert) run(e *executable, s *callState) error {
	x, err := s.read(c.x, "x")
	if err != nil {
		return err
	}
	n := c.shape.Size()
	if x.len() != n || (x.f32 != nil) == (c.shape.DType == dtypes.Float32) {
		return fmt.Errorf("hostproduct: ConvertDType's operand holds %d values of the wrong kind for %s", x.len(), c.shape)
	}
	out, err := e.result(s, c.out, -1, c.shape)
	if err != nil {
		return err
	}
	e.shareRows(n, 1, func(lo, hi int) {
		switch {
		case out.h16 != nil:
			narrowHalf(out.h16[lo:hi], x.f32[lo:hi])
		case x.h16 != nil:
			widenHalfAll(out.f32[lo:hi], x.h16[lo:hi])
		case x.f32 != nil:
			narrowAll(out.b16[lo:hi], x.f32[lo:hi])
		default:
			widenAll(out.f32[lo:hi], x.b16[lo:hi])
		}
	})
	e.backend.convertsRun.Add(1)
	return nil
}
