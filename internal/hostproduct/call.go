package hostproduct

import (
	"fmt"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
)

// call is one call of a host function that runs in Go between the pieces on the executing
// goroutine, or shared out over the crew: a gated activation, a norm, a rope or a sum (attention's
// calls run in runs of their own, a batch's sequences at once).
type call interface {
	reads() []int  // the slots of its arguments
	writes() []int // the slots of its results
	run(e *executable, c *callState) error
}

// record makes c main's next step and returns its results, values of shape in the slots c
// writes.
func (f *function) record(c call, shape shapes.Shape) []compute.Value {
	f.b.steps = append(f.b.steps, step{call: c})
	var out []compute.Value
	for _, slot := range c.writes() {
		out = append(out, &value{fn: f, shape: shape, slot: slot})
	}
	return out
}

// floatDType says whether dtype is one the calls, products and attention run in Go take.
func floatDType(dtype dtypes.DType) bool { return dtype == dtypes.Float32 || dtype == dtypes.BFloat16 }

// callState is what a call's run reads and writes: the executing graph's slots, which of them it
// owns, and the step the call is.
type callState struct {
	slots  []compute.Buffer
	owned  []holding
	device compute.DeviceNum
	step   int
}

// read is the data of slot's buffer, an argument of the call (named what in errors).
func (c *callState) read(slot int, what string) (floats, error) {
	x, err := readFloats(c.slots[slot])
	if err != nil {
		return floats{}, fmt.Errorf("hostproduct: a host function's %s: %w", what, err)
	}
	return x, nil
}

// reusable says whether the call may write its result into slot's buffer: the call owns it,
// nothing reads it after, and it is no output of the graph.
func (e *executable) reusable(c *callState, slot int) bool {
	return c.owned[slot] != notHeld && e.lastUse[slot] == c.step && !e.isOutput[slot]
}

// result is the buffer of the call's result of shape, put in slot out with its data: the buffer
// of the argument in slot from where the call may reuse it and it has that shape (a view's buffer
// has its base's), else a new one.
func (e *executable) result(c *callState, out, from int, shape shapes.Shape) (floats, error) {
	var buf compute.Buffer
	var flat any
	var err error
	hold := heldSpare
	if from >= 0 && c.slots[from] != nil && e.reusable(c, from) {
		if s, err := c.slots[from].Shape(); err == nil && s.Equal(shape) {
			buf, hold = c.slots[from], c.owned[from]
			c.slots[from], c.owned[from] = nil, notHeld
		}
	}
	if buf == nil {
		if buf, flat, err = e.backend.newResult(c.device, shape); err != nil {
			return floats{}, fmt.Errorf("hostproduct: a host function's result: %w", err)
		}
	} else if flat, err = buf.Data(); err != nil {
		return floats{}, fmt.Errorf("hostproduct: a host function's result: %w", err)
	}
	c.slots[out], c.owned[out] = buf, hold
	x, err := floatsOf(flat)
	if err != nil {
		return floats{}, fmt.Errorf("hostproduct: a host function's result: %w", err)
	}
	if x.len() != shape.Size() {
		return floats{}, fmt.Errorf("hostproduct: a host function's result holds %d values for %s", x.len(), shape)
	}
	return x, nil
}
