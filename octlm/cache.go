package octlm

import (
	"errors"
	"fmt"
	"math"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/gomlx/core/tensors"
)

// Cache is a model's cache on its backend: per layer what the architecture keeps (see
// stateSpec), for Qwen3 keys and values [kvHeads, capacity, headDim]. Position-indexed state has
// a fixed capacity between growths, so one compiled graph serves every decoding step; it grows by
// length bucket when a chunk would not fit, never per token, and its slots beyond Len are zero
// (the graph writes keys by adding into zeroed slots). Fixed-size state (a recurrent state) never
// grows, and cannot be truncated (see CanTruncate).
type Cache struct {
	model    *Model
	dtype    dtypes.DType      // of position-indexed state
	specs    []stateSpec       // the architecture's, in order
	state    []*tensors.Tensor // one per spec
	capacity int
	length   int
	ids      []int // the token IDs at positions [0, length)
	broken   bool
}

// ErrCannotTruncate is returned by Truncate on a cache holding a recurrent state, which cannot
// go back to an earlier position: run the prompt again on a fresh (or Reset) cache instead.
var ErrCannotTruncate = errors.New("octlm: the cache holds a recurrent state, which cannot be truncated")

// minCacheCapacity keeps tiny prompts from growing the cache at every step.
const minCacheCapacity = 64

// NewCache returns an empty cache with room for capacity positions (at least
// minCacheCapacity); it grows when a run needs more. It takes BytesPerPosition per position of
// capacity. A capacity past the context length is a *ContextError.
func (m *Model) NewCache(capacity int) (*Cache, error) {
	return m.newCache(capacity, m.cacheDType())
}

// NewCacheDType is NewCache with keys and values stored in dtype, Float32 or BFloat16,
// whatever the model's dtype: a bfloat16 cache takes half the memory of a float32 one, and
// rounds every key and value to bfloat16 (the attention itself runs in the model's dtype).
func (m *Model) NewCacheDType(capacity int, dtype DType) (*Cache, error) {
	if dtype != Float32 && dtype != BFloat16 {
		return nil, fmt.Errorf("octlm: a KV cache of %s (want f32 or bf16): %w", dtype, ErrBadInput)
	}
	return m.newCache(capacity, dtype.gomlx())
}

func (m *Model) newCache(capacity int, dtype dtypes.DType) (*Cache, error) {
	c := &Cache{model: m, dtype: dtype, specs: m.arch.state()}
	if err := c.reserve(max(capacity, 1), true); err != nil {
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
	for i, t := range c.state {
		spec := c.specs[i]
		var err error
		if spec.PosAxis < 0 {
			err = t.MutableBytes(func(b []byte) { clear(b) })
		} else {
			outer, rowBytes := posGeometry(t, spec, c.capacity)
			err = t.MutableBytes(func(b []byte) {
				for h := range outer {
					clear(b[(h*c.capacity+n)*rowBytes : (h*c.capacity+c.length)*rowBytes])
				}
			})
		}
		if err != nil {
			c.broken = true
			return fmt.Errorf("octlm: truncating the cache (%s): %w", spec.Name, err)
		}
	}
	c.length = n
	c.ids = c.ids[:n]
	return nil
}

// posGeometry views a position-indexed state of the given capacity as outer × capacity rows of
// rowBytes bytes.
func posGeometry(t *tensors.Tensor, spec stateSpec, capacity int) (outer, rowBytes int) {
	dims := t.Shape().Dimensions
	outer = 1
	for _, d := range dims[:spec.PosAxis] {
		outer *= d
	}
	return outer, int(t.Shape().ByteSize()) / (outer * capacity)
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

// cacheDType is the dtype of the cache's position-indexed state: the model's (TestScatterSumFloat16
// checks the float16 cache write).
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
	if err := c.reserve(c.length+n, false); err != nil {
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
	for _, t := range c.state {
		if t != nil {
			_ = t.FinalizeAll()
		}
	}
	c.state = nil
	c.broken = true
}

// reserve makes room for n positions, growing to exactly n or, to leave room for what comes
// next, to a length bucket (at least minCacheCapacity, at most the context length) and copying
// what the cache holds. A fixed-size state is allocated once and kept as it is.
func (c *Cache) reserve(n int, exact bool) error {
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
	capacity := n
	if !exact {
		capacity = lengthBucket(n)
	}
	capacity = min(max(capacity, minCacheCapacity), context)
	grown := make([]*tensors.Tensor, len(c.specs))
	fail := func(err error) error {
		for i, g := range grown {
			if g != nil && (c.state == nil || g != c.state[i]) {
				_ = g.FinalizeAll()
			}
		}
		return err
	}
	for i, spec := range c.specs {
		if spec.PosAxis < 0 && c.state != nil {
			grown[i] = c.state[i] // fixed size: kept
			continue
		}
		dtype := c.dtype
		if spec.Float32 {
			dtype = dtypes.Float32
		}
		t, err := tensors.FromShapeForBackend(c.model.Backend, 0, shapes.Make(dtype, spec.shape(capacity)...)) // zeroed
		if err != nil {
			return fail(fmt.Errorf("octlm: allocating a cache of %d positions (%s): %w", capacity, spec.Name, err))
		}
		grown[i] = t
		if c.length > 0 && spec.PosAxis >= 0 {
			if err := copyCacheRows(t, c.state[i], spec, c.capacity, capacity, c.length); err != nil {
				return fail(err)
			}
		}
	}
	for i, t := range c.state {
		if t != grown[i] {
			_ = t.FinalizeAll()
		}
	}
	c.state, c.capacity = grown, capacity
	return nil
}

// copyCacheRows copies the first n positions of a position-indexed state from src (capacity
// oldCap) to dst (capacity newCap).
func copyCacheRows(dst, src *tensors.Tensor, spec stateSpec, oldCap, newCap, n int) error {
	outer, rowBytes := posGeometry(src, spec, oldCap)
	var err error
	cerr := src.ConstBytes(func(from []byte) {
		err = dst.MutableBytes(func(to []byte) {
			for h := range outer {
				copy(to[h*newCap*rowBytes:(h*newCap+n)*rowBytes], from[h*oldCap*rowBytes:(h*oldCap+n)*rowBytes])
			}
		})
	})
	if err = errors.Join(cerr, err); err != nil {
		return fmt.Errorf("octlm: growing the cache (%s): %w", spec.Name, err)
	}
	return nil
}
