package octlm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/gomlx/core/tensors"
)

// Cache is a model's cache on its backend: per layer what the architecture keeps (see
// stateSpec), for Qwen3 keys and values [kvHeads, positions, headDim] (values [kvHeads, headDim,
// positions] where the layout has CacheLeft: see Layout.stateSpecs; writeRows then writes each
// position's values as a column).
//
// Position-indexed state lives in blocks (see nextBlock: 64 positions, 64, 128, … doubling to
// maxCacheBlock, or less on the pure-Go engine, then that many each), allocated as the cache grows and never moved: growing
// appends blocks, it copies nothing. Where the backend shares its buffers with Go (the pure-Go
// backend, ONNX Runtime on CPU) the host writes each chunk's new keys and values into the
// blocks in place (writeRows) and the step graph only reads them, the blocks that cover the
// positions already held and no more; on another backend a written block is uploaded again.
// Slots past Len are zero. Fixed-size state (a recurrent state) is one tensor per spec, given
// to the step graph and replaced by its output; it never grows and cannot be truncated (see
// CanTruncate).
type Cache struct {
	model  *Model
	dtype  dtypes.DType        // of position-indexed state
	specs  []stateSpec         // the architecture's, in order
	state  [][]*tensors.Tensor // per spec: a position-indexed state's blocks, or a fixed-size state alone
	blocks []int               // the blocks' sizes in positions; they add up to capacity
	// capacity is the positions the blocks hold.
	capacity int
	length   int
	ids      []int // the token IDs at positions [0, length)
	broken   bool
}

// ErrCannotTruncate is returned by Truncate on a cache holding a recurrent state, which cannot
// go back to an earlier position: run the prompt again on a fresh (or Reset) cache instead.
var ErrCannotTruncate = errors.New("octlm: the cache holds a recurrent state, which cannot be truncated")

// minCacheCapacity is the first block's size: tiny prompts do not grow the cache at every step.
const minCacheCapacity = 64

// maxCacheBlock is the largest block: past it the cache grows maxCacheBlock positions at a time,
// and a step reads at most maxCacheBlock − 1 slots it does not need (a new step graph is compiled
// each time the blocks a step reads change, as often as before blocks).
const maxCacheBlock = 1024

// nextBlock is the size of the block that follows blocks holding capacity positions, in a
// model of context positions: minCacheCapacity, then as many as the blocks hold (the capacity
// doubles) up to largest (maxCacheBlock, or less: Layout.cacheBlock), never past the context.
func nextBlock(capacity, context, largest int) int {
	size := minCacheCapacity
	if capacity > 0 {
		size = min(capacity, largest)
	}
	return min(size, context-capacity)
}

// blocksCapacity is the capacity of the blocks that hold n positions (n ≥ 1) in a model of
// context positions, blocks of at most largest.
func blocksCapacity(n, context, largest int) int {
	c := 0
	for c < min(n, context) {
		c += nextBlock(c, context, largest)
	}
	return c
}

// NewCache returns an empty cache with room for capacity positions (at least
// minCacheCapacity, rounded up to whole blocks); it grows when a run needs more. It takes
// BytesPerPosition per position of capacity. A capacity past the context length is a
// *ContextError.
func (m *Model) NewCache(capacity int) (*Cache, error) {
	return m.newCache(capacity, m.cacheDType())
}

// NewCacheDType is NewCache with keys and values stored in dtype, Float32, BFloat16 or Float16,
// whatever the model's dtype: a half-precision cache takes half the memory of a float32 one, and
// rounds every key and value to its dtype (the attention itself runs in the model's dtype;
// float16 keeps three more bits than bfloat16, and overflows past ±65504).
func (m *Model) NewCacheDType(capacity int, dtype DType) (*Cache, error) {
	if dtype != Float32 && dtype != BFloat16 && dtype != Float16 {
		return nil, fmt.Errorf("octlm: a KV cache of %s (want f32, bf16 or f16): %w", dtype, ErrBadInput)
	}
	return m.newCache(capacity, dtype.gomlx())
}

// stateSpecs are the model's cache state specs as its layout stores them (Layout.stateSpecs).
func (m *Model) stateSpecs() []stateSpec { return m.layout.stateSpecs(m.arch.state()) }

func (m *Model) newCache(capacity int, dtype dtypes.DType) (*Cache, error) {
	c := &Cache{model: m, dtype: dtype, specs: m.stateSpecs()}
	if err := c.reserve(max(capacity, 1)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Len is the number of positions the cache holds.
func (c *Cache) Len() int { return c.length }

// IDs are the token IDs the cache holds keys and values for, in position order (-1 for
// positions added by Pad). The slice belongs to the cache: copy it to keep it.
func (c *Cache) IDs() []int { return c.ids[:c.length:c.length] }

// CanTruncate reports whether Truncate can go back to any earlier position: true unless the
// architecture keeps a fixed-size (recurrent) state, which only Truncate(0) can reset.
func (c *Cache) CanTruncate() bool {
	for _, s := range c.specs {
		if s.PosAxis < 0 {
			return false
		}
	}
	return true
}

// Truncate drops every position from n on, so that the cache holds the first n positions it
// held. The dropped slots are zeroed, as the step graph requires of slots past Len. A cache that
// cannot truncate (CanTruncate false) accepts only n == Len and n == 0 (which zeroes all of it)
// and otherwise returns an error matching ErrCannotTruncate, leaving the cache as it was.
func (c *Cache) Truncate(n int) error {
	if c.broken {
		return errors.New("octlm: the cache was closed or lost in a failed step")
	}
	if n < 0 || n > c.length {
		return fmt.Errorf("octlm: cannot truncate a cache of %d positions to %d: %w", c.length, n, ErrBadInput)
	}
	if n == c.length {
		return nil
	}
	if n != 0 && !c.CanTruncate() {
		return fmt.Errorf("octlm: truncating a cache of %d positions to %d: %w", c.length, n, ErrCannotTruncate)
	}
	for i, ts := range c.state {
		spec := c.specs[i]
		if spec.PosAxis < 0 {
			if err := ts[0].MutableBytes(func(b []byte) { clear(b) }); err != nil {
				c.broken = true
				return fmt.Errorf("octlm: truncating the cache (%s): %w", spec.Name, err)
			}
			continue
		}
		outer, rowBytes := c.geometry(spec)
		offset := 0
		for j, t := range ts {
			size := c.blocks[j]
			from, to := max(n, offset)-offset, min(c.length, offset+size)-offset
			offset += size
			if from >= to {
				continue
			}
			err := t.MutableBytes(func(b []byte) {
				for h := range outer {
					clear(b[(h*size+from)*rowBytes : (h*size+to)*rowBytes])
				}
			})
			if err != nil {
				c.broken = true
				return fmt.Errorf("octlm: truncating the cache (%s): %w", spec.Name, err)
			}
		}
	}
	c.length = n
	c.ids = c.ids[:n]
	return nil
}

// geometry views a position-indexed state as outer × positions rows of rowBytes bytes: outer
// is the product of its dimensions before the position axis, a row its dimensions after it.
func (c *Cache) geometry(spec stateSpec) (outer, rowBytes int) {
	outer, rowBytes = 1, c.specDType(spec).Size()
	for i, d := range spec.Dims {
		switch {
		case i < spec.PosAxis:
			outer *= d
		case i > spec.PosAxis:
			rowBytes *= d
		}
	}
	return outer, rowBytes
}

// specDType is the dtype spec's state is stored in.
func (c *Cache) specDType(spec stateSpec) dtypes.DType {
	if spec.Float32 {
		return dtypes.Float32
	}
	return c.dtype
}

// Capacity is the number of positions the cache has room for before it grows.
func (c *Cache) Capacity() int { return c.capacity }

// BytesPerPosition is the size of one position of the cache's position-indexed state (Qwen3:
// keys and values) over all layers.
func (c *Cache) BytesPerPosition() int64 { return stateBytes(c.specs, c.dtype).perPosition }

// FixedBytes is the size of the cache's fixed-size state (recurrent states), which does not grow
// with positions; 0 for Qwen3.
func (c *Cache) FixedBytes() int64 { return stateBytes(c.specs, c.dtype).fixed }

// stateSizes are a cache's bytes per position and fixed bytes.
type stateSizes struct{ perPosition, fixed int64 }

// stateBytes adds up the state specs for a cache whose position-indexed state is dtype.
func stateBytes(specs []stateSpec, dtype dtypes.DType) stateSizes {
	var s stateSizes
	for _, spec := range specs {
		dt := dtype
		if spec.Float32 {
			dt = dtypes.Float32
		}
		n := int64(dt.Size())
		for i, d := range spec.Dims {
			if i != spec.PosAxis {
				n *= int64(d)
			}
		}
		if spec.PosAxis < 0 {
			s.fixed += n
		} else {
			s.perPosition += n
		}
	}
	return s
}

// cacheDType is the dtype of the cache's position-indexed state: the model's.
func (m *Model) cacheDType() dtypes.DType { return m.DType.gomlx() }

// Pad appends n positions whose keys and values are zero (a recurrent state is left as it is),
// without running the model. A decode step's work depends on how many positions the cache holds,
// not on their values, so a padded cache times decoding at a depth without the prefill that
// would fill it (llama-bench's -d); what the model computes on top of it means nothing.
func (c *Cache) Pad(n int) error {
	if n < 0 {
		return fmt.Errorf("octlm: padding the KV cache by %d positions: %w", n, ErrBadInput)
	}
	if n > c.model.shape.Context-c.length {
		return &ContextError{Positions: c.length + min(n, math.MaxInt-c.length), ContextLength: c.model.shape.Context}
	}
	if err := c.reserve(c.length + n); err != nil {
		return err
	}
	for range n {
		c.ids = append(c.ids, -1) // no token
	}
	c.length += n // slots past the length are zero
	return nil
}

// Close frees the cache's buffers.
func (c *Cache) Close() {
	for _, ts := range c.state {
		for _, t := range ts {
			if t != nil {
				_ = t.FinalizeAll()
			}
		}
	}
	c.state = nil
	c.broken = true
}

// reserve makes room for n positions, appending blocks (zeroed) until their capacity reaches
// n; what the cache holds stays where it is. The fixed-size states are allocated with the first
// block and kept.
func (c *Cache) reserve(n int) error {
	if c.broken {
		return errors.New("octlm: the cache was closed or lost in a failed step")
	}
	if n <= c.capacity {
		return nil
	}
	context := c.model.shape.Context
	if n > context {
		return &ContextError{Positions: n, ContextLength: context}
	}
	if c.state == nil {
		c.state = make([][]*tensors.Tensor, len(c.specs))
		for i, spec := range c.specs {
			if spec.PosAxis >= 0 {
				continue
			}
			t, err := c.zeroed(spec, 0)
			if err != nil {
				c.broken = true
				return err
			}
			c.state[i] = []*tensors.Tensor{t}
		}
	}
	for c.capacity < n {
		size := nextBlock(c.capacity, context, c.model.layout.cacheBlock(c.specs))
		block := make([]*tensors.Tensor, len(c.specs))
		for i, spec := range c.specs {
			if spec.PosAxis < 0 {
				continue
			}
			t, err := c.zeroed(spec, size)
			if err != nil {
				for _, b := range block {
					if b != nil {
						_ = b.FinalizeAll()
					}
				}
				return err // the cache holds what it held, in the blocks it had
			}
			block[i] = t
		}
		for i, t := range block {
			if t != nil {
				c.state[i] = append(c.state[i], t)
			}
		}
		c.blocks = append(c.blocks, size)
		c.capacity += size
	}
	return nil
}

// zeroed allocates spec's state for size positions (a fixed-size state: size ignored), zeroed,
// shared with the backend where it shares buffers.
func (c *Cache) zeroed(spec stateSpec, size int) (*tensors.Tensor, error) {
	t, err := tensors.FromShapeForBackend(c.model.Backend, 0, shapes.Make(c.specDType(spec), spec.shape(size)...))
	if err != nil {
		return nil, fmt.Errorf("octlm: allocating a cache block of %d positions (%s): %w", size, spec.Name, err)
	}
	return t, nil
}

// covering is how many blocks cover the slots [0, n): the blocks a step starting at position n
// reads. n must not exceed the capacity.
func (c *Cache) covering(n int) int {
	k, offset := 0, 0
	for offset < n {
		offset += c.blocks[k]
		k++
	}
	return k
}

// touched keeps touchRows' loads from being left out.
var touched atomic.Uint32

// touchRows loads the byte at of each of rows rows stride bytes apart, so that their lines are
// in the cache before they are written.
func touchRows(buf []byte, at, stride, rows int) {
	var x byte
	for h := range rows {
		x ^= buf[at+h*stride]
	}
	touched.Add(uint32(x))
}

// writeRows copies the new state rows of one sequence into its blocks in place: rows holds a
// chunk of a batch of sequences, [B, outer…, S, row…] for spec (the position axis after the
// batch axis at spec.PosAxis+1), and the first valid rows of sequence b go to slots start…
// start+valid−1. The blocks must cover them (reserve).
func (c *Cache) writeRows(specIndex int, rows []byte, b, seqLen, start, valid int) error {
	s := c.specs[specIndex]
	outer, rowBytes := c.geometry(s)
	offset := 0
	for j, t := range c.state[specIndex] {
		size, first := c.blocks[j], offset
		from, to := max(start, first), min(start+valid, first+size) // the slots of this block written
		offset += size
		if from >= to {
			continue
		}
		err := t.MutableBytes(func(dst []byte) {
			n, stride := (to-from)*rowBytes, size*rowBytes // bytes written a row, and between rows
			at, src := (from-first)*rowBytes, (b*outer*seqLen+from-start)*rowBytes
			// A slot or two of a transposed key block ([kvHeads, hd, n]: a row is one value) per
			// h, each in a line of its own: every line loaded first, the loads all under way at
			// once, then the values stored as words, not by copy's calls. An 8-sequence decode
			// step spent 5.7–5.8 ms writing its keys and values one store at a time on one core,
			// 3.1–3.2 ms so and with the sequences shared over two (keepState).
			if n == 2 || n == 4 {
				touchRows(dst, at, stride, outer)
			}
			for h := range outer {
				d, r := at+h*stride, src+h*seqLen*rowBytes
				switch n {
				case 4:
					binary.LittleEndian.PutUint32(dst[d:d+4], binary.LittleEndian.Uint32(rows[r:r+4]))
				case 2:
					binary.LittleEndian.PutUint16(dst[d:d+2], binary.LittleEndian.Uint16(rows[r:r+2]))
				default:
					copy(dst[d:d+n], rows[r:r+n])
				}
			}
		})
		if err != nil {
			return fmt.Errorf("octlm: writing the cache (%s): %w", s.Name, err)
		}
	}
	return nil
}
