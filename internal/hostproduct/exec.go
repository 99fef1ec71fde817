package hostproduct

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/shapes"
)

// executable runs a recorded graph: its pieces, compiled on the wrapped backend, and its
// products, in Go, in order, each buffer in its slot until its last use.
type executable struct {
	backend  *Backend
	names    []string
	inShapes []shapes.Shape
	steps    []compiledStep
	slots    int
	outputs  []int // the slot of each output
	outShape []shapes.Shape
	lastUse  []int   // the step that last reads each slot; −1 for none
	isOutput []bool  // slot is one of the graph's outputs
	free     [][]int // the slots whose buffers are finalized after each step
	// gaps is, for each step that runs on the crew (a run of products or of attentions), how
	// long the parts after it took until the next such step in the last call (nanoseconds; 0
	// unknown): the crew waits awake after the step only where that was at most crewSpin.
	gaps []atomic.Int64
}

// compiledStep is a compiled piece, a run of products that do not read each other, a run of
// attentions that do not (a batch's sequences, one call each), or a join.
type compiledStep struct {
	exe        compute.Executable
	inputs     []int
	outputs    []int
	products   []*product
	attentions []*attention
	join       *join
	call       call
}

// Compile implements compute.Builder: each piece is compiled on the wrapped backend.
func (b *builder) Compile() (compute.Executable, error) {
	if !b.done {
		return nil, errors.New("hostproduct: Compile before main's Return")
	}
	e := &executable{backend: b.backend}
	for _, p := range b.params {
		e.names = append(e.names, p.name)
		e.inShapes = append(e.inShapes, p.shape)
	}
	for _, v := range b.outputs {
		slot, err := b.slotOf(v)
		if err != nil {
			return nil, err
		}
		e.outputs = append(e.outputs, slot)
		e.outShape = append(e.outShape, v.shape)
	}
	fail := func(err error) (compute.Executable, error) {
		e.Finalize()
		return nil, err
	}
	for _, s := range b.steps {
		if s.product != nil {
			n := len(e.steps)
			if n > 0 && e.steps[n-1].products != nil && !readsAny(s.product, e.steps[n-1].products) {
				e.steps[n-1].products = append(e.steps[n-1].products, s.product)
				continue
			}
			e.steps = append(e.steps, compiledStep{products: []*product{s.product}})
			continue
		}
		if a := s.attention; a != nil {
			n := len(e.steps)
			if n > 0 && e.steps[n-1].attentions != nil && !slices.ContainsFunc(a.reads(), func(slot int) bool {
				return slices.Contains(e.steps[n-1].outputs, slot)
			}) {
				last := &e.steps[n-1]
				last.attentions = append(last.attentions, a)
				last.inputs = append(last.inputs, a.reads()...)
				last.outputs = append(last.outputs, a.out)
				continue
			}
			e.steps = append(e.steps, compiledStep{attentions: []*attention{a}, inputs: a.reads(), outputs: []int{a.out}})
			continue
		}
		if c := s.call; c != nil {
			e.steps = append(e.steps, compiledStep{call: c, inputs: c.reads(), outputs: c.writes()})
			continue
		}
		if j := s.join; j != nil {
			e.steps = append(e.steps, compiledStep{join: j, inputs: j.inputs, outputs: []int{j.out}})
			continue
		}
		p := s.piece
		if len(p.outputs) == 0 {
			continue // nothing of it is used
		}
		if err := p.fn.Return(p.outputs, nil); err != nil {
			return fail(fmt.Errorf("hostproduct: piece %d of %q: %w", p.index, b.name, err))
		}
		exe, err := p.inner.Compile()
		if err != nil {
			return fail(fmt.Errorf("hostproduct: piece %d of %q: %w", p.index, b.name, err))
		}
		e.steps = append(e.steps, compiledStep{exe: exe, inputs: p.inputs, outputs: p.outSlot})
	}
	e.slots = b.slots
	e.lastUse = make([]int, e.slots)
	e.isOutput = make([]bool, e.slots)
	for i := range e.lastUse {
		e.lastUse[i] = -1
	}
	for _, s := range e.outputs {
		e.isOutput[s] = true
	}
	e.joinDirectly()
	e.free = make([][]int, len(e.steps))
	e.gaps = make([]atomic.Int64, len(e.steps))
	made := make([]int, e.slots) // the step that makes each slot (0 for the parameters)
	for i, s := range e.steps {
		for _, slot := range s.inputs {
			e.lastUse[slot] = i
		}
		for _, slot := range s.outputs {
			made[slot] = i
		}
		for _, p := range s.products {
			e.lastUse[p.x], e.lastUse[p.w] = i, i
			made[p.out] = i
		}
	}
	for slot, last := range e.lastUse {
		if e.isOutput[slot] {
			continue
		}
		if last < 0 {
			last = made[slot] // made and never read
		}
		if last >= 0 && last < len(e.steps) {
			e.free[last] = append(e.free[last], slot)
		}
	}
	return e, nil
}

// readsAny says whether p reads the result of any of ps.
func readsAny(p *product, ps []*product) bool {
	for _, q := range ps {
		if p.x == q.out {
			return true
		}
	}
	return false
}

// Finalize implements compute.Executable.
func (e *executable) Finalize() {
	for _, s := range e.steps {
		if s.exe != nil {
			s.exe.Finalize()
		}
	}
}

// Inputs implements compute.Executable.
func (e *executable) Inputs() ([]string, []shapes.Shape) { return e.names, e.inShapes }

// Outputs implements compute.Executable.
func (e *executable) Outputs() []shapes.Shape { return e.outShape }

// Execute implements compute.Executable. A donated input is handed to the last piece that
// reads it, or finalized after its last use.
func (e *executable) Execute(inputs []compute.Buffer, donate []bool, device compute.DeviceNum) (outputs []compute.Buffer, err error) {
	if len(inputs) != len(e.names) {
		return nil, fmt.Errorf("hostproduct: %d inputs for %d parameters", len(inputs), len(e.names))
	}
	var spent [stepKinds]time.Duration // by the kind of step
	defer func(begin time.Time) { e.backend.spent.add(spent, time.Since(begin)) }(time.Now())
	slots := make([]compute.Buffer, e.slots)
	owned := make([]holding, e.slots) // this call must finalize the buffer (or hand it on)
	defer func() {
		if err != nil {
			for i, buf := range slots {
				_ = e.backend.release(buf, owned[i])
			}
		}
	}()
	for i, in := range inputs {
		if i < len(donate) && donate[i] {
			x, ok := in.(*buffer)
			if !ok {
				err = fmt.Errorf("hostproduct: buffer %T is not this backend's", in)
			} else {
				slots[i], owned[i], err = x.donate()
			}
		} else {
			slots[i], err = unwrap(in)
		}
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
	}
	lastRun, lastEnd := -1, time.Time{} // the last step that ran on the crew and when it ended
	calls := callState{slots: slots, owned: owned, device: device}
	for i, s := range e.steps {
		begin := time.Now()
		kind := pieceStep
		if s.attentions != nil {
			kind = attentionStep
			if err := e.runAttentions(s.attentions, slots, owned, device, e.spinAfter(i, lastRun, lastEnd)); err != nil {
				return nil, err
			}
			lastRun, lastEnd = i, time.Now()
		} else if s.call != nil {
			calls.step = i
			if err := s.call.run(e, &calls); err != nil {
				return nil, err
			}
		} else if s.join != nil {
			if err := e.runJoin(s.join, slots, owned, device); err != nil {
				return nil, err
			}
		} else if s.exe != nil {
			ins := make([]compute.Buffer, len(s.inputs))
			give := make([]bool, len(s.inputs))
			for j, slot := range s.inputs {
				ins[j] = slots[slot]
				// A buffer made for a step's result is given too, though the wrapped backend
				// drops it when done (compute pools only the buffers it makes): a piece that
				// writes its output over its input ran a decode step 1.00–1.01× as fast as one
				// that takes a buffer from compute's pool and leaves ours spare (alternated).
				give[j] = owned[slot] != notHeld && e.lastUse[slot] == i && !e.isOutput[slot]
			}
			outs, err := s.exe.Execute(ins, give, device)
			if err != nil {
				return nil, err
			}
			e.backend.piecesRun.Add(1)
			for j, slot := range s.inputs {
				if give[j] {
					slots[slot], owned[slot] = nil, notHeld
				}
			}
			for j, slot := range s.outputs {
				slots[slot], owned[slot] = outs[j], held
			}
		} else {
			kind = productStep
			if err := e.runProducts(s.products, slots, owned, device, e.spinAfter(i, lastRun, lastEnd)); err != nil {
				return nil, err
			}
			lastRun, lastEnd = i, time.Now()
		}
		spent[kind] += time.Since(begin)
		for _, slot := range e.free[i] {
			_ = e.backend.release(slots[slot], owned[slot])
			slots[slot], owned[slot] = nil, notHeld
		}
	}
	outputs = make([]compute.Buffer, len(e.outputs))
	for i, slot := range e.outputs {
		buf := slots[slot]
		if buf == nil {
			return nil, fmt.Errorf("hostproduct: output %d has no buffer", i)
		}
		hold := owned[slot]
		if hold != notHeld {
			owned[slot] = notHeld // handed to the caller
		} else if buf, err = e.copyBuffer(buf, device); err != nil { // given already, or the caller's
			for _, given := range outputs[:i] {
				_ = given.Finalize()
			}
			return nil, err
		}
		outputs[i] = e.backend.wrapResult(buf, hold)
	}
	for i, buf := range slots { // anything left that this call owns
		_ = e.backend.release(buf, owned[i])
	}
	return outputs, nil
}

// spinAfter records how long the parts since the last step on the crew (lastRun, ended at
// lastEnd) took, and says how long the crew should wait awake after step i: crewSpin where the
// parts after it took at most that the last time, else 0. Attention steps count as well as
// products: at depth an attention step takes milliseconds, and a crew that slept through the
// parts before it woke 110–130 µs into each of its 28 calls a step, while the caller worked on
// alone (docs/performance.md, "The crew awake for attention").
func (e *executable) spinAfter(i, lastRun int, lastEnd time.Time) time.Duration {
	if lastRun >= 0 {
		e.gaps[lastRun].Store(int64(time.Since(lastEnd)))
	}
	if time.Duration(e.gaps[i].Load()) > crewSpin {
		return 0
	}
	return crewSpin
}

// copyBuffer is a new buffer with buf's contents.
func (e *executable) copyBuffer(buf compute.Buffer, device compute.DeviceNum) (compute.Buffer, error) {
	shape, err := buf.Shape()
	if err != nil {
		return nil, err
	}
	flat, err := buf.Data()
	if err != nil {
		return nil, err
	}
	return e.backend.Backend.BufferFromFlatData(device, flat, shape)
}
