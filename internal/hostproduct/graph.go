package hostproduct

import (
	"errors"
	"fmt"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapeinference"
	"github.com/gomlx/compute/shapes"
)

// A graph is recorded as it is built: its operations go to the current piece (a builder of
// the wrapped backend) until a product to run in Go (see the package comment) ends the piece;
// the next operation starts another. A value used in a later piece than its own becomes an
// output of its piece and a parameter of the later one; every value that crosses pieces, every
// parameter of the graph and every product's result has a slot, where Execute keeps its buffer.

// builder records one graph.
type builder struct {
	backend *Backend
	name    string
	main    *function
	params  []*value // the graph's parameters, in order; value.slot is their index
	pieces  []*piece // in order
	steps   []step   // pieces and products, in the order they run
	slots   int      // how many slots the graph has
	outputs []*value // the graph's outputs (main's Return)
	// uncut: closures or named functions were made, which belong to the current piece's
	// builder: no product is cut after that.
	uncut bool
	done  bool
}

// piece is a part of the graph between products: a builder of the wrapped backend.
type piece struct {
	index   int
	inner   compute.Builder
	fn      compute.Function
	inputs  []int                    // the slot of each of fn's parameters, in order
	inputOf map[int]compute.Value    // slot → fn's parameter
	outputs []compute.Value          // fn's outputs …
	outSlot []int                    // … and the slot of each
	viewOf  map[*value]compute.Value // the views it reads, reshaped from their parameters
}

// step is one piece, one product, one attention, one join or one other host function's call, in the order Execute runs them.
type step struct {
	piece     *piece
	product   *product
	attention *attention
	join      *join
	call      call // a gated activation, a norm, a rope or a sum
}

// value is this backend's compute.Value.
type value struct {
	fn    *function     // the function it belongs to
	piece *piece        // for an operation's result in the main function: its piece
	inner compute.Value // the wrapped backend's value, in piece (or in fn for a closure)
	shape shapes.Shape
	name  string // a parameter's
	slot  int    // −1 until the value is needed outside its piece
	// base, for a view (Reshape of a value outside the piece being built), is the value whose
	// buffer it reads, in the same slot, with base's shape.
	base *value
}

func newBuilder(b *Backend, name string) *builder {
	bl := &builder{backend: b, name: name}
	bl.main = &function{b: bl, name: compute.MainName}
	return bl
}

// Name implements compute.Builder.
func (b *builder) Name() string { return b.name }

// Main implements compute.Builder.
func (b *builder) Main() compute.Function { return b.main }

// NewFunction implements compute.Builder: a function of the current piece's builder, after
// which no product is cut; or, named for AttentionFunction, one whose calls run in Go.
func (b *builder) NewFunction(name string) (compute.Function, error) {
	if b.isHostFunction(name) {
		return b.newHostFunction(name)
	}
	p, err := b.current()
	if err != nil {
		return nil, err
	}
	fn, err := p.inner.NewFunction(name)
	if err != nil {
		return nil, err
	}
	b.uncut = true
	return &function{b: b, name: name, own: fn}, nil
}

// OpShape implements compute.Builder.
func (b *builder) OpShape(op compute.Value) (shapes.Shape, error) {
	v, ok := op.(*value)
	if !ok {
		return shapes.Shape{}, fmt.Errorf("hostproduct: value %T is not this builder's", op)
	}
	return v.shape, nil
}

// DistributedSPMD implements compute.Builder: not supported.
func (b *builder) DistributedSPMD(int) error {
	return fmt.Errorf("hostproduct: DistributedSPMD: %w", compute.ErrNotImplemented)
}

// DistributedAutoSharding implements compute.Builder: not supported.
func (b *builder) DistributedAutoSharding(...compute.Mesh) error {
	return fmt.Errorf("hostproduct: DistributedAutoSharding: %w", compute.ErrNotImplemented)
}

// DeviceAssignment implements compute.Builder: device 0 only.
func (b *builder) DeviceAssignment(devices ...compute.DeviceNum) error {
	if len(devices) == 1 && devices[0] == 0 {
		return nil
	}
	return fmt.Errorf("hostproduct: DeviceAssignment%v: %w", devices, compute.ErrNotImplemented)
}

// current is the piece the main function's next operation goes to, started if the last one
// was ended by a product.
func (b *builder) current() (*piece, error) {
	if b.done {
		return nil, errors.New("hostproduct: graph already returned")
	}
	if n := len(b.steps); n > 0 && b.steps[n-1].piece != nil {
		return b.steps[n-1].piece, nil
	}
	inner := b.backend.Backend.Builder(fmt.Sprintf("%s#%d", b.name, len(b.pieces)))
	p := &piece{index: len(b.pieces), inner: inner, fn: inner.Main(), inputOf: map[int]compute.Value{}, viewOf: map[*value]compute.Value{}}
	b.pieces = append(b.pieces, p)
	b.steps = append(b.steps, step{piece: p})
	return p, nil
}

// newSlot adds a slot.
func (b *builder) newSlot() int {
	b.slots++
	return b.slots - 1
}

// slotOf is v's slot, made an output of v's piece if it had none.
func (b *builder) slotOf(v *value) (int, error) {
	if v.slot >= 0 {
		return v.slot, nil
	}
	if v.piece == nil {
		return 0, errors.New("hostproduct: a closure's value used outside it")
	}
	v.slot = b.newSlot()
	v.piece.outputs = append(v.piece.outputs, v.inner)
	v.piece.outSlot = append(v.piece.outSlot, v.slot)
	return v.slot, nil
}

// in is v as a value of piece p: its own, or p's parameter for v's slot (reshaped, for a view).
func (b *builder) in(p *piece, v *value) (compute.Value, error) {
	if v.piece == p {
		return v.inner, nil
	}
	if v.base != nil {
		if x, ok := p.viewOf[v]; ok {
			return x, nil
		}
		src, err := b.in(p, v.base)
		if err != nil {
			return nil, err
		}
		x, err := p.fn.Reshape(src, v.shape.Dimensions...)
		if err != nil {
			return nil, err
		}
		p.viewOf[v] = x
		return x, nil
	}
	slot, err := b.slotOf(v)
	if err != nil {
		return nil, err
	}
	if x, ok := p.inputOf[slot]; ok {
		return x, nil
	}
	x, err := p.fn.Parameter(fmt.Sprintf("slot%d", slot), v.shape, nil)
	if err != nil {
		return nil, err
	}
	p.inputOf[slot] = x
	p.inputs = append(p.inputs, slot)
	return x, nil
}

// function is a compute.Function of the graph: main, a closure or a named function (the last
// two live in one piece's builder).
type function struct {
	b      *builder
	name   string
	parent *function
	own    compute.Function // a closure's or named function's own; nil for main
	host   *hostFunction    // a function run in Go (AttentionFunction)
}

// inner is the wrapped backend's function an operation of f goes to.
func (f *function) inner() (compute.Function, error) {
	if f.own != nil {
		return f.own, nil
	}
	p, err := f.b.current()
	if err != nil {
		return nil, err
	}
	return p.fn, nil
}

// use maps an argument of f's operation to the wrapped backend's value.
func (f *function) use(x compute.Value) (compute.Value, error) {
	v, ok := x.(*value)
	if !ok {
		return nil, fmt.Errorf("hostproduct: value %T is not this builder's", x)
	}
	if v.fn.b != f.b {
		return nil, errors.New("hostproduct: value of another builder")
	}
	if f.own != nil { // a closure or named function
		if v.fn == f {
			return v.inner, nil
		}
		if f.parent == nil {
			return nil, errors.New("hostproduct: a named function uses a value of another function")
		}
		return f.parent.use(x) // captured from the parent
	}
	if v.fn != f {
		return nil, errors.New("hostproduct: main uses a value of a closure")
	}
	p, err := f.b.current()
	if err != nil {
		return nil, err
	}
	return f.b.in(p, v)
}

// useAll maps a list of arguments.
func (f *function) useAll(xs []compute.Value) ([]compute.Value, error) {
	out := make([]compute.Value, len(xs))
	for i, x := range xs {
		var err error
		if out[i], err = f.use(x); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// made wraps the wrapped backend's result r of one of f's operations.
func (f *function) made(r compute.Value) compute.Value {
	v := &value{fn: f, inner: r, slot: -1}
	in, err := f.inner()
	if err == nil {
		v.shape, err = in.Shape(r)
	}
	if f.own == nil && err == nil {
		v.piece, _ = f.b.current()
	}
	if err != nil {
		v.shape = shapes.Invalid()
	}
	return v
}

// madeAll wraps a list of results.
func (f *function) madeAll(rs []compute.Value) []compute.Value {
	out := make([]compute.Value, len(rs))
	for i, r := range rs {
		out[i] = f.made(r)
	}
	return out
}

// notImplemented is the error of an operation this backend does not pass on.
func (f *function) notImplemented(op string) error {
	return fmt.Errorf("hostproduct: %s: %w", op, compute.ErrNotImplemented)
}

// Name implements compute.Function.
func (f *function) Name() string { return f.name }

// Builder implements compute.Function.
func (f *function) Builder() compute.Builder { return f.b }

// Parent implements compute.Function.
func (f *function) Parent() compute.Function {
	if f.parent == nil {
		return nil
	}
	return f.parent
}

// Closure implements compute.Function: a closure of the current piece; no product is cut
// after it.
func (f *function) Closure() (compute.Function, error) {
	in, err := f.inner()
	if err != nil {
		return nil, err
	}
	c, err := in.Closure()
	if err != nil {
		return nil, err
	}
	f.b.uncut = true
	return &function{b: f.b, parent: f, own: c}, nil
}

// Parameter implements compute.Function: main's parameters get the first slots.
func (f *function) Parameter(name string, shape shapes.Shape, sharding *compute.ShardingSpec) (compute.Value, error) {
	if f.own != nil {
		r, err := f.own.Parameter(name, shape, sharding)
		if err != nil {
			return nil, err
		}
		if f.host != nil {
			f.host.params = append(f.host.params, shape)
		}
		return f.made(r), nil
	}
	if sharding != nil {
		return nil, f.notImplemented("Parameter with sharding")
	}
	if len(f.b.pieces) > 0 {
		return nil, fmt.Errorf("hostproduct: parameter %q after the graph's first operation", name)
	}
	v := &value{fn: f, shape: shape, name: name, slot: f.b.newSlot()}
	f.b.params = append(f.b.params, v)
	return v, nil
}

// Constant implements compute.Function.
func (f *function) Constant(flat any, dims ...int) (compute.Value, error) {
	in, err := f.inner()
	if err != nil {
		return nil, err
	}
	r, err := in.Constant(flat, dims...)
	if err != nil {
		return nil, err
	}
	return f.made(r), nil
}

// Shape implements compute.Function.
func (f *function) Shape(x compute.Value) (shapes.Shape, error) { return f.b.OpShape(x) }

// Return implements compute.Function. main's outputs are kept for Compile; a parameter
// returned as it is goes through an Identity, so that the output is a buffer of its own.
func (f *function) Return(outputs []compute.Value, shardings []*compute.ShardingSpec) error {
	if f.own != nil {
		in, err := f.useAll(outputs)
		if err != nil {
			return err
		}
		if f.host != nil {
			for _, x := range outputs {
				f.host.result = append(f.host.result, x.(*value).shape)
			}
		}
		return f.own.Return(in, shardings)
	}
	for _, s := range shardings {
		if s != nil {
			return f.notImplemented("Return with shardings")
		}
	}
	for _, x := range outputs {
		v, ok := x.(*value)
		if !ok {
			return fmt.Errorf("hostproduct: value %T is not this builder's", x)
		}
		if v.base != nil { // a view: reshaped in a piece, its result a buffer of its shape
			p, err := f.b.current()
			if err != nil {
				return err
			}
			x, err := f.b.in(p, v)
			if err != nil {
				return err
			}
			v = &value{fn: f, piece: p, inner: x, shape: v.shape, slot: -1}
		}
		if isParam(f.b, v) {
			id, err := f.Identity(v)
			if err != nil {
				return err
			}
			v = id.(*value)
		}
		f.b.outputs = append(f.b.outputs, v)
	}
	f.b.done = true
	return nil
}

// isParam says whether v is one of main's parameters.
func isParam(b *builder, v *value) bool {
	return v.slot >= 0 && v.slot < len(b.params) && b.params[v.slot] == v
}

// Call implements compute.Function: a function named for AttentionFunction runs in Go.
func (f *function) Call(g compute.Function, inputs ...compute.Value) ([]compute.Value, error) {
	if h, ok := g.(*function); ok && h.b == f.b && h.host != nil {
		return f.callHost(h, inputs)
	}
	return f.control([]compute.Function{g}, inputs, func(in compute.Function, fns []compute.Function, args []compute.Value) ([]compute.Value, error) {
		return in.Call(fns[0], args...)
	})
}

// Sort implements compute.Function.
func (f *function) Sort(comparator compute.Function, axis int, isStable bool, inputs ...compute.Value) ([]compute.Value, error) {
	return f.control([]compute.Function{comparator}, inputs, func(in compute.Function, fns []compute.Function, args []compute.Value) ([]compute.Value, error) {
		return in.Sort(fns[0], axis, isStable, args...)
	})
}

// While implements compute.Function.
func (f *function) While(cond, body compute.Function, initialState ...compute.Value) ([]compute.Value, error) {
	return f.control([]compute.Function{cond, body}, initialState, func(in compute.Function, fns []compute.Function, args []compute.Value) ([]compute.Value, error) {
		return in.While(fns[0], fns[1], args...)
	})
}

// If implements compute.Function.
func (f *function) If(pred compute.Value, trueBranch, falseBranch compute.Function) ([]compute.Value, error) {
	return f.control([]compute.Function{trueBranch, falseBranch}, []compute.Value{pred}, func(in compute.Function, fns []compute.Function, args []compute.Value) ([]compute.Value, error) {
		return in.If(args[0], fns[0], fns[1])
	})
}

// control runs an operation that takes functions (closures or named functions) on the wrapped
// backend: fns unwrapped, args mapped, the results wrapped.
func (f *function) control(fns []compute.Function, args []compute.Value, op func(in compute.Function, fns []compute.Function, args []compute.Value) ([]compute.Value, error)) ([]compute.Value, error) {
	inner := make([]compute.Function, len(fns))
	for i, g := range fns {
		var err error
		if inner[i], err = f.unwrapFunction(g); err != nil {
			return nil, err
		}
	}
	in, err := f.inner()
	if err != nil {
		return nil, err
	}
	mapped, err := f.useAll(args)
	if err != nil {
		return nil, err
	}
	rs, err := op(in, inner, mapped)
	if err != nil {
		return nil, err
	}
	return f.madeAll(rs), nil
}

// unwrapFunction is the wrapped backend's function of a closure or named function.
func (f *function) unwrapFunction(g compute.Function) (compute.Function, error) {
	fn, ok := g.(*function)
	if !ok || fn.b != f.b || fn.own == nil {
		return nil, errors.New("hostproduct: function is not a closure or named function of this builder")
	}
	return fn.own, nil
}

// DotGeneral implements compute.StandardOps: a product that qualifies (see the package
// comment) ends the current piece and runs in Go; any other goes to the wrapped backend.
func (f *function) DotGeneral(lhs compute.Value, lhsContractingAxes, lhsBatchAxes []int, rhs compute.Value, rhsContractingAxes, rhsBatchAxes []int, config compute.DotGeneralConfig) (compute.Value, error) {
	if p := f.hostProduct(lhs, lhsContractingAxes, lhsBatchAxes, rhs, rhsContractingAxes, rhsBatchAxes, config); p != nil {
		x, err := f.b.slotOf(lhs.(*value))
		if err != nil {
			return nil, err
		}
		p.x = x
		p.out = f.b.newSlot()
		f.b.steps = append(f.b.steps, step{product: p})
		return &value{fn: f, shape: p.outShape, slot: p.out}, nil
	}
	in, err := f.inner()
	if err != nil {
		return nil, err
	}
	l, err := f.use(lhs)
	if err != nil {
		return nil, err
	}
	r, err := f.use(rhs)
	if err != nil {
		return nil, err
	}
	y, err := in.DotGeneral(l, lhsContractingAxes, lhsBatchAxes, r, rhsContractingAxes, rhsBatchAxes, config)
	if err != nil {
		return nil, err
	}
	return f.made(y), nil
}

// hostProduct is the product to run in Go for these arguments, or nil if they do not qualify.
func (f *function) hostProduct(lhs compute.Value, lhsContracting, lhsBatch []int, rhs compute.Value, rhsContracting, rhsBatch []int, config compute.DotGeneralConfig) *product {
	if f.own != nil || f.b.uncut || f.b.done {
		return nil
	}
	l, ok := lhs.(*value)
	r, ok2 := rhs.(*value)
	if !ok || !ok2 || l.fn != f || r.fn != f || !isParam(f.b, r) {
		return nil
	}
	ls, rs := l.shape, r.shape
	if ls.Rank() != 2 || rs.Rank() != 3 || len(lhsBatch) != 0 || len(rhsBatch) != 0 ||
		len(lhsContracting) != 1 || lhsContracting[0] != 1 || len(rhsContracting) != 1 || rhsContracting[0] != 1 {
		return nil
	}
	rows, in := ls.Dimensions[0], ls.Dimensions[1]
	count, width := rs.Dimensions[0], rs.Dimensions[2]
	if rows < 1 || rows > f.b.backend.opts.MaxRows || rs.Dimensions[1] != in || ls.DType != rs.DType ||
		!floatDType(ls.DType) {
		return nil
	}
	if acc := config.AccumulatorDType; acc != dtypes.InvalidDType && acc != dtypes.Float32 && acc != ls.DType {
		return nil
	}
	out, err := shapeinference.DotGeneral(ls, lhsContracting, lhsBatch, rs, rhsContracting, rhsBatch, config)
	if err != nil || !floatDType(out.DType) {
		return nil
	}
	return &product{w: r.slot, rows: rows, in: in, count: count, width: width, outShape: out}
}
