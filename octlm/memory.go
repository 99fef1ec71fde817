package octlm

import (
	"fmt"

	"github.com/gomlx/compute"
)

// Memory is what a model needs resident, worked out from its Config before any weight is read.
type Memory struct {
	DType     DType
	Weights   int64 // the resident weights in the backend's layout (zero rows of the last head block included)
	KVCache   int64 // keys and values for Positions positions (the cache's capacity bucket)
	Positions int
	// Working is the largest transient buffer: the float32 scratch one weight passes through
	// while it is converted or transposed into place (every Linear weight; columnRows rows of a
	// head stored as columns; an embedding or head in row blocks where the resident dtype is
	// float16, which the checkpoint's BF16 is not).
	Working int64
}

// Total is Weights + KVCache + Working.
func (m Memory) Total() int64 { return m.Weights + m.KVCache + m.Working }

// String lists the parts: "bf16 weights 15.3 GiB + KV cache 9.0 MiB for 40 positions + working 2.3 GiB".
func (m Memory) String() string {
	return fmt.Sprintf("%s weights %s + KV cache %s for %d positions + working %s", m.DType,
		gib(m.Weights), gib(m.KVCache), m.Positions, gib(m.Working))
}

func gib(n int64) string {
	if n < 1<<30 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// MemoryNeeded works out the memory a model of cfg needs on backend with dtype weights and a
// KV cache of positions positions: exactly the weights Load allocates and the cache NewCache
// allocates, plus the largest transient buffer.
func MemoryNeeded(cfg Config, dtype DType, backend compute.Backend, positions int) Memory {
	if dtype == "" {
		dtype = Float32
	}
	m := Memory{DType: dtype, Positions: positions}
	size := int64(dtype.gomlx().Size())
	var scratch int64
	for _, s := range layoutFor(backend).lay(weightSpecs(cfg)) {
		n := int64(1)
		for _, d := range s.residentShape() {
			n *= int64(d)
		}
		m.Weights += n * size
		switch {
		case s.Kind == columnWeight || s.Kind == rowWeight || (s.Kind == embeddingWeight && dtype == Float16):
			scratch = max(scratch, 4*n) // see fill
		case s.Kind == embeddingColumns:
			scratch = max(scratch, 4*int64(min(columnRows, s.HubShape[0])*s.HubShape[1])) // see fillColumns
		}
	}
	m.Working = scratch
	model := &Model{Config: cfg, DType: dtype}
	m.KVCache = int64(cacheCapacity(cfg, positions)) * model.kvBytesPerPosition()
	return m
}

// cacheCapacity is the capacity NewCache gives a cache for n positions: n, at least
// minCacheCapacity, at most the context length.
func cacheCapacity(cfg Config, n int) int {
	return min(max(n, 1, minCacheCapacity), cfg.ContextLength)
}
