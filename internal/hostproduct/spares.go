package hostproduct

import (
	"math"
	"sync"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
)

// The results of the steps run in Go (products, attention, joins, the host functions) live in
// shared buffers (compute.Backend.NewSharedBuffer), which compute v0.1.14's pure-Go backend never
// takes back into its pool of buffers: a finalized one is left to the garbage collector. With
// the weights live, the collector runs seldom, and the heap grows towards its goal: a
// Qwen3-0.6B decode step's 3.6–4.1 MB of garbage came from fresh pages, about 1,000 page faults
// a step on the AMD EPYC guest (Zen 4) until the first collection. So the backend keeps the
// shared buffers its steps are done with, by shape, and hands them out again; with the logits
// written into the last step's (Model.NextInto) a step leaves 0.5 MB (bfloat16) to 1.3 MB
// (float32) and takes 150–310 faults, and decodes 1.03× (bfloat16) and 1.02× (float32) as fast,
// alternated in one process (TestSparesAreReused, TestSparesKeep; the reproduction:
// TestComputeDropsSharedBuffers).

// maxSpareBytes bounds the bytes of buffers kept spare, and maxSpareBuffer one buffer's: a
// decode step's results are kilobytes, a long prompt's megabytes. Where a buffer would take the
// spares past the bound, the spares of other shapes go first: a prompt's are not kept through
// the decoding after it, which a float32 decode step's buffers found full (0.8 MB of its 1.3 MB
// of garbage).
const (
	maxSpareBytes  = 64 << 20
	maxSpareBuffer = 4 << 20
)

// maxSpareRank is the largest rank of a shape whose buffers are kept.
const maxSpareRank = 6

// spareKey is a shape, comparable.
type spareKey struct {
	dtype dtypes.DType
	rank  int
	dims  [maxSpareRank]int
}

// byteSize is the bytes of a buffer of k's shape.
func (k spareKey) byteSize() int64 {
	return shapes.Make(k.dtype, k.dims[:k.rank]...).ByteSize()
}

// spare is a kept buffer and its data.
type spare struct {
	buf  compute.Buffer
	flat any
}

// spares is the shared buffers a backend's steps are done with, by shape.
type spares struct {
	mu    sync.Mutex
	free  map[spareKey][]spare
	bytes int64
	// poison fills each buffer kept with NaNs (or all ones), for the tests: a step that reads
	// its result before writing all of it then fails.
	poison bool
}

// keyOf is shape's key, false for a shape whose buffers are not kept.
func keyOf(shape shapes.Shape) (spareKey, bool) {
	k := spareKey{dtype: shape.DType, rank: shape.Rank()}
	if k.rank > maxSpareRank || shape.ByteSize() > maxSpareBuffer {
		return k, false
	}
	copy(k.dims[:], shape.Dimensions)
	return k, true
}

// newResult is a buffer of shape for a step's result and its data: a spare one, its values
// whatever they were, or a new one (zeros).
func (b *Backend) newResult(device compute.DeviceNum, shape shapes.Shape) (compute.Buffer, any, error) {
	if k, ok := keyOf(shape); ok && device == 0 {
		s := &b.spares
		s.mu.Lock()
		if list := s.free[k]; len(list) > 0 {
			got := list[len(list)-1]
			list[len(list)-1] = spare{}
			s.free[k] = list[:len(list)-1]
			s.bytes -= shape.ByteSize()
			s.mu.Unlock()
			return got.buf, got.flat, nil
		}
		s.mu.Unlock()
	}
	b.resultsMade.Add(1)
	return b.Backend.NewSharedBuffer(device, shape)
}

// release is done with buf, held as hold (by a run, or by the caller it was handed to): it
// finalizes a buffer held, or keeps it spare where newResult made it (heldSpare) and there is
// room. A buffer not held is let be.
func (b *Backend) release(buf compute.Buffer, hold holding) error {
	if buf == nil || hold == notHeld {
		return nil
	}
	if hold == heldSpare && b.keep(buf) {
		return nil
	}
	return buf.Finalize()
}

// putResult is newResult's buffer put in slot out, held spare by the run, and its data.
func (b *Backend) putResult(slots []compute.Buffer, owned []holding, out int, device compute.DeviceNum, shape shapes.Shape) (any, error) {
	buf, flat, err := b.newResult(device, shape)
	if err != nil {
		return nil, err
	}
	slots[out], owned[out] = buf, heldSpare
	return flat, nil
}

// keep puts buf among the spares: false where its shape's buffers are not kept or the spares
// are full.
func (b *Backend) keep(buf compute.Buffer) bool {
	shape, err := buf.Shape()
	if err != nil {
		return false
	}
	k, ok := keyOf(shape)
	if !ok {
		return false
	}
	flat, err := buf.Data()
	if err != nil {
		return false
	}
	s := &b.spares
	s.mu.Lock()
	defer s.mu.Unlock()
	size := shape.ByteSize()
	for other, list := range s.free { // full: the other shapes' spares go (a prompt's, for a decode)
		if s.bytes+size <= maxSpareBytes {
			break
		}
		if other == k {
			continue
		}
		finalizeSpares(list)
		s.bytes -= int64(len(list)) * other.byteSize()
		delete(s.free, other)
	}
	if s.bytes+size > maxSpareBytes {
		return false
	}
	if s.free == nil {
		s.free = make(map[spareKey][]spare)
	}
	if s.poison {
		poison(flat)
	}
	s.free[k] = append(s.free[k], spare{buf, flat})
	s.bytes += size
	return true
}

// poison fills flat with NaNs, or all ones for integers.
func poison(flat any) {
	if x, err := floatsOf(flat); err == nil {
		for i := range x.f32 {
			x.f32[i] = float32(math.NaN())
		}
		for i := range x.b16 {
			x.b16[i] = 0x7fc1
		}
		for i := range x.h16 {
			x.h16[i] = 0x7e01
		}
		return
	}
	if raw, err := bytesOf(flat); err == nil {
		for i := range raw {
			raw[i] = 0xff
		}
	}
}

// dropSpares finalizes every spare buffer.
func (b *Backend) dropSpares() {
	s := &b.spares
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, list := range s.free {
		finalizeSpares(list)
	}
	s.free, s.bytes = nil, 0
}

// finalizeSpares finalizes the buffers of list.
func finalizeSpares(list []spare) {
	for _, sp := range list {
		_ = sp.buf.Finalize()
	}
}

// holding is how a run of an executable holds the buffer in a slot.
type holding uint8

const (
	notHeld   holding = iota // not this run's to finalize: the caller's, or handed on
	held                     // this run's: finalized when done
	heldSpare                // this run's, made by newResult: kept spare when done
)
