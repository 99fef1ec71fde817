package octlm

import (
	"errors"
	"fmt"
	"math"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/gomlx/core/tensors"
)

// Cache is a KV cache: for every layer, keys and values [kvHeads, capacity, headDim] on the
// model's backend. Its capacity is fixed between growths, so one compiled graph serves every
// decoding step; it grows by length bucket when a chunk would not fit, never per token.
// Slots beyond Len are zero (the graph writes keys by adding into zeroed slots).
type Cache struct {
	model    *Model
	dtype    dtypes.DType      // of the stored keys and values
	kv       []*tensors.Tensor // k0, v0, k1, v1, ...
	capacity int
	length   int
	ids      []int // the token IDs at positions [0, length)
	broken   bool
}

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
	c := &Cache{model: m, dtype: dtype}
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

// Truncate drops every position from n on, so that the cache holds the first n positions it
// held. The dropped slots are zeroed, as the step graph requires of slots past Len.
func (c *Cache) Truncate(n int) error {
	if c.broken {
		return errors.New("octlm: the KV cache was closed or lost in a failed step")
	}
	if n < 0 || n > c.length {
		return fmt.Errorf("octlm: cannot truncate a cache of %d positions to %d: %w", c.length, n, ErrBadInput)
	}
	if n == c.length {
		return nil
	}
	for _, t := range c.kv {
		heads := t.Shape().Dimensions[0]
		rowBytes := int(t.Shape().ByteSize()) / (heads * c.capacity)
		if err := t.MutableBytes(func(b []byte) {
			for h := range heads {
				clear(b[(h*c.capacity+n)*rowBytes : (h*c.capacity+c.length)*rowBytes])
			}
		}); err != nil {
			c.broken = true
			return fmt.Errorf("octlm: truncating the KV cache: %w", err)
		}
	}
	c.length = n
	c.ids = c.ids[:n]
	return nil
}

// Capacity is the number of positions the cache has room for before it grows.
func (c *Cache) Capacity() int { return c.capacity }

// BytesPerPosition is the KV-cache size of one position over all layers.
func (c *Cache) BytesPerPosition() int64 { return kvBytesPerPosition(c.model.Config, c.dtype) }

// kvBytesPerPosition is the size of one position of a cache of the model's own dtype.
func (m *Model) kvBytesPerPosition() int64 { return kvBytesPerPosition(m.Config, m.cacheDType()) }

func kvBytesPerPosition(cfg Config, dtype dtypes.DType) int64 {
	return int64(2*cfg.NLayers*cfg.KVHeads*cfg.HeadWidth()) * int64(dtype.Size())
}

// cacheDType is the dtype of the KV cache: the model's (TestScatterSumFloat16 checks the
// float16 cache write).
func (m *Model) cacheDType() dtypes.DType { return m.DType.gomlx() }

// Pad appends n positions whose keys and values are zero, without running the model. A decode
// step's work depends on how many positions the cache holds, not on their values, so a padded
// cache times decoding at a depth without the prefill that would fill it (llama-bench's -d);
// what the model computes on top of it means nothing.
func (c *Cache) Pad(n int) error {
	if n < 0 {
		return fmt.Errorf("octlm: padding the KV cache by %d positions: %w", n, ErrBadInput)
	}
	if n > c.model.Config.ContextLength-c.length {
		return &ContextError{Positions: c.length + min(n, math.MaxInt-c.length), ContextLength: c.model.Config.ContextLength}
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
	for _, t := range c.kv {
		if t != nil {
			_ = t.FinalizeAll()
		}
	}
	c.kv = nil
	c.broken = true
}

// reserve makes room for n positions, growing to exactly n or, to leave room for what comes
// next, to a length bucket (at least minCacheCapacity, at most the context length) and copying
// what the cache holds.
func (c *Cache) reserve(n int, exact bool) error {
	if c.broken {
		return errors.New("octlm: the KV cache was closed or lost in a failed step")
	}
	if n <= c.capacity {
		return nil
	}
	cfg := c.model.Config
	if n > cfg.ContextLength {
		return &ContextError{Positions: n, ContextLength: cfg.ContextLength}
	}
	capacity := n
	if !exact {
		capacity = lengthBucket(n)
	}
	capacity = min(max(capacity, minCacheCapacity), cfg.ContextLength)
	shape := shapes.Make(c.dtype, cfg.KVHeads, capacity, cfg.HeadWidth())
	grown := make([]*tensors.Tensor, 2*cfg.NLayers)
	for i := range grown {
		t, err := tensors.FromShapeForBackend(c.model.Backend, 0, shape) // zeroed
		if err == nil {
			grown[i] = t
			if c.length > 0 {
				err = copyCacheRows(t, c.kv[i], c.capacity, capacity, c.length)
			}
		} else {
			err = fmt.Errorf("octlm: allocating a KV cache of %d positions: %w", capacity, err)
		}
		if err != nil {
			for _, g := range grown[:i+1] {
				if g != nil {
					_ = g.FinalizeAll()
				}
			}
			return err
		}
	}
	for _, t := range c.kv {
		_ = t.FinalizeAll()
	}
	c.kv, c.capacity = grown, capacity
	return nil
}

// copyCacheRows copies the first n positions of every head from src [h, oldCap, d] to dst [h, newCap, d].
func copyCacheRows(dst, src *tensors.Tensor, oldCap, newCap, n int) error {
	heads := src.Shape().Dimensions[0]
	rowBytes := int(src.Shape().ByteSize()) / (heads * oldCap)
	var err error
	cerr := src.ConstBytes(func(from []byte) {
		err = dst.MutableBytes(func(to []byte) {
			for h := range heads {
				copy(to[h*newCap*rowBytes:(h*newCap+n)*rowBytes], from[h*oldCap*rowBytes:(h*oldCap+n)*rowBytes])
			}
		})
	})
	if err = errors.Join(cerr, err); err != nil {
		return fmt.Errorf("octlm: growing the KV cache: %w", err)
	}
	return nil
}
