package hostproduct

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/shapeinference"
	"github.com/gomlx/compute/shapes"
)

// Between the pieces a graph's values live in slots, a buffer each. Two operations on them need
// no piece of the wrapped backend: a Reshape is the same buffer read with other dimensions (a
// view), and a Concatenate of values that all live in slots is a copy made in Go (a join). A
// product's outputs reshaped and put side by side, the common form of a weight multiplied in
// pieces, then reach the next piece as one buffer, and attention's output reaches the products
// after it without a piece between: compute v0.1.14 spends 1–2 µs an operation and about 9 µs
// a piece, and a Qwen3-0.6B decode step had 142 pieces, 48 Reshape and 7 Concatenate a layer
// in them (docs/performance.md, "A decode step's pieces on compute, one by one").

// outsidePiece says whether main's value v lives in a slot outside the piece being built, where
// Reshape makes a view of it: a product's or attention's result, a join, a parameter, a view, or
// an earlier piece's result.
func (f *function) outsidePiece(v *value) bool {
	if f.own != nil || f.b.uncut || f.b.done || v.fn != f {
		return false
	}
	if v.piece == nil {
		return v.slot >= 0
	}
	n := len(f.b.steps)
	return n == 0 || f.b.steps[n-1].piece != v.piece
}

// buildingPiece says whether main's last step is a piece, which the next operation joins.
func (f *function) buildingPiece() bool {
	n := len(f.b.steps)
	return n > 0 && f.b.steps[n-1].piece != nil
}

// Reshape implements compute.StandardOps: a view of a value outside the piece being built (the
// piece that reads the view reshapes its parameter; products, attention and joins read the
// buffer as it is), else the wrapped backend's operation in the current piece.
func (f *function) Reshape(x compute.Value, dimensions ...int) (compute.Value, error) {
	if v, ok := x.(*value); ok && f.outsidePiece(v) {
		shape, err := shapeinference.Reshape(v.shape, dimensions)
		if err != nil {
			return nil, err
		}
		base := v
		if v.base != nil {
			base = v.base
		}
		slot, err := f.b.slotOf(base)
		if err != nil {
			return nil, err
		}
		return &value{fn: f, shape: shape, slot: slot, base: base}, nil
	}
	in, err := f.inner()
	if err != nil {
		return nil, err
	}
	xIn, err := f.use(x)
	if err != nil {
		return nil, err
	}
	r, err := in.Reshape(xIn, dimensions...)
	if err != nil {
		return nil, err
	}
	return f.made(r), nil
}

// join is a Concatenate run in Go: its operands' slots, in order, and its result's.
type join struct {
	inputs   []int
	shapes   []shapes.Shape
	axis     int
	out      int
	outShape shapes.Shape
	// direct: every operand is a product's output that nothing else reads, whose rows are
	// the result's blocks (the axes before the join's are one product's rows, or hold one
	// index): the products write into the result (product.into), and the join copies nothing.
	direct bool
}

// joinDirectly makes the joins of e whose operands can be written in place by the products
// that make them (join.direct).
func (e *executable) joinDirectly() {
	producer := map[int]*product{}
	readers := make([]int, e.slots)
	for _, s := range e.steps {
		for _, p := range s.products {
			producer[p.out] = p
			readers[p.x]++
			readers[p.w]++
		}
		for _, slot := range s.inputs {
			readers[slot]++
		}
	}
	for _, slot := range e.outputs {
		readers[slot]++
	}
	for _, s := range e.steps {
		j := s.join
		if j == nil {
			continue
		}
		outer := 1
		for _, d := range j.outShape.Dimensions[:j.axis] {
			outer *= d
		}
		direct := true
		for _, slot := range j.inputs {
			p := producer[slot]
			direct = direct && p != nil && p.into == nil && readers[slot] == 1 && p.outShape.DType == j.outShape.DType &&
				(outer == 1 || outer == p.rows)
		}
		if !direct {
			continue
		}
		j.direct = true
		offset, row := 0, j.outShape.Size() // a row of the result: all of it for one outer index
		if outer > 1 {
			row /= outer
		}
		for _, slot := range j.inputs {
			p := producer[slot]
			p.into, p.offset, p.stride = j, offset, p.count*p.width
			if outer > 1 {
				p.stride = row
				offset += p.count * p.width // its block of each row
			} else {
				offset += p.outShape.Size()
			}
		}
	}
}

// Concatenate implements compute.StandardOps: a join where no piece is being built and every
// operand lives in a slot (outsidePiece), of a dtype of whole bytes; else the wrapped backend's
// operation in the current piece.
func (f *function) Concatenate(axis int, operands ...compute.Value) (compute.Value, error) {
	if j, err := f.hostJoin(axis, operands); err != nil || j != nil {
		if err != nil {
			return nil, err
		}
		f.b.steps = append(f.b.steps, step{join: j})
		return &value{fn: f, shape: j.outShape, slot: j.out}, nil
	}
	in, err := f.inner()
	if err != nil {
		return nil, err
	}
	operandsIn, err := f.useAll(operands)
	if err != nil {
		return nil, err
	}
	r, err := in.Concatenate(axis, operandsIn...)
	if err != nil {
		return nil, err
	}
	return f.made(r), nil
}

// hostJoin is the join for these operands, or nil where they do not qualify.
func (f *function) hostJoin(axis int, operands []compute.Value) (*join, error) {
	if len(operands) < 2 {
		return nil, nil
	}
	if f.buildingPiece() {
		return nil, nil // the operation joins the piece
	}
	vs := make([]*value, len(operands))
	ins := make([]shapes.Shape, len(operands))
	for i, x := range operands {
		v, ok := x.(*value)
		if !ok || !f.outsidePiece(v) {
			return nil, nil
		}
		vs[i], ins[i] = v, v.shape
	}
	dtype := ins[0].DType
	if dtype.IsPacked() || dtype.Size() < 1 {
		return nil, nil
	}
	out, err := shapeinference.Concatenate(ins, axis)
	if err != nil {
		return nil, nil // the wrapped backend's operation says why
	}
	j := &join{shapes: ins, axis: axis, outShape: out}
	for _, v := range vs {
		slot, err := f.b.slotOf(v)
		if err != nil {
			return nil, err
		}
		j.inputs = append(j.inputs, slot)
	}
	j.out = f.b.newSlot()
	return j, nil
}

// runJoin makes j's result buffer, put in its slot: each operand's blocks of its axis and the
// axes after it, operand after operand, for each index of the axes before it.
func (e *executable) runJoin(j *join, slots []compute.Buffer, owned []holding, device compute.DeviceNum) error {
	if j.direct { // written by its products
		e.backend.joinsRun.Add(1)
		e.backend.joinedInPlace.Add(1)
		return nil
	}
	flat, err := e.backend.putResult(slots, owned, j.out, device, j.outShape)
	if err != nil {
		return fmt.Errorf("hostproduct: Concatenate's result: %w", err)
	}
	out, err := bytesOf(flat)
	if err != nil {
		return err
	}
	size := j.outShape.DType.Size()
	outer := 1
	for _, d := range j.outShape.Dimensions[:j.axis] {
		outer *= d
	}
	parts := make([][]byte, len(j.inputs))
	blocks := make([]int, len(j.inputs)) // each operand's bytes for one index of the outer axes
	for i, slot := range j.inputs {
		flat, err := slots[slot].Data()
		if err != nil {
			return fmt.Errorf("hostproduct: Concatenate's operand %d: %w", i, err)
		}
		if parts[i], err = bytesOf(flat); err != nil {
			return err
		}
		if len(parts[i]) != j.shapes[i].Size()*size {
			return fmt.Errorf("hostproduct: Concatenate's operand %d holds %d bytes for %s", i, len(parts[i]), j.shapes[i])
		}
		if outer > 0 {
			blocks[i] = len(parts[i]) / outer
		}
	}
	at := 0
	for o := range outer {
		for i, part := range parts {
			at += copy(out[at:], part[o*blocks[i]:(o+1)*blocks[i]])
		}
	}
	if at != len(out) {
		return fmt.Errorf("hostproduct: Concatenate wrote %d of %d bytes", at, len(out))
	}
	e.backend.joinsRun.Add(1)
	return nil
}

// bytesOf is the memory of flat, a slice of any element type.
func bytesOf(flat any) ([]byte, error) {
	v := reflect.ValueOf(flat)
	if v.Kind() != reflect.Slice {
		return nil, fmt.Errorf("hostproduct: data of %T", flat)
	}
	n := v.Len() * int(v.Type().Elem().Size())
	if n == 0 {
		return nil, nil
	}
	return unsafe.Slice((*byte)(v.UnsafePointer()), n), nil
}
