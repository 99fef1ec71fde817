package octlm

import (
	"errors"
	"fmt"

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
	kv       []*tensors.Tensor // k0, v0, k1, v1, ...
	capacity int
	length   int
	broken   bool
}

// minCacheCapacity keeps tiny prompts from growing the cache at every step.
const minCacheCapacity = 64

// NewCache returns an empty cache with room for at least capacity positions.
func (m *Model) NewCache(capacity int) (*Cache, error) {
	c := &Cache{model: m}
	if err := c.reserve(max(capacity, 1)); err != nil {
		return nil, err
	}
	return c, nil
}

// Len is the number of positions the cache holds.
func (c *Cache) Len() int { return c.length }

// Capacity is the number of positions the cache has room for before it grows.
func (c *Cache) Capacity() int { return c.capacity }

// BytesPerPosition is the KV-cache size of one position over all layers.
func (c *Cache) BytesPerPosition() int64 { return c.model.kvBytesPerPosition() }

func (m *Model) kvBytesPerPosition() int64 {
	return int64(2*m.Config.NLayers*m.Config.KVHeads*m.Config.HeadWidth()) * int64(m.cacheDType().Size())
}

// cacheDType is the dtype of the KV cache: the model's (TestScatterSumFloat16 checks the
// float16 cache write).
func (m *Model) cacheDType() dtypes.DType { return m.DType.gomlx() }

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

// reserve makes room for n positions, growing to a length bucket (at least minCacheCapacity,
// at most the context length) and copying what the cache holds.
func (c *Cache) reserve(n int) error {
	if c.broken {
		return errors.New("octlm: the KV cache was closed or lost in a failed step")
	}
	if n <= c.capacity {
		return nil
	}
	cfg := c.model.Config
	if n > cfg.ContextLength {
		return fmt.Errorf("octlm: %d positions exceed the context length %d: %w", n, cfg.ContextLength, ErrBadInput)
	}
	capacity := min(max(lengthBucket(n), minCacheCapacity), cfg.ContextLength)
	shape := shapes.Make(c.model.cacheDType(), cfg.KVHeads, capacity, cfg.HeadWidth())
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
