package octlm

import (
	"fmt"
	"math"

	"github.com/gomlx/compute"

	"github.com/octlm/octlm/units"
)

// Memory is what a model needs resident, worked out from its Config before any weight is read.
type Memory struct {
	DType     DType
	Weights   int64 // the resident weights in the engine's layout
	KVCache   int64 // the cache for Positions positions (its capacity bucket), fixed-size state included
	Positions int
	// Working is the largest transient memory: while loading, the float32 scratch one weight
	// passes through while it is converted or transposed into place (every Linear weight;
	// Layout.ColumnRows rows of a table stored as columns; a table stored as rows where the
	// resident dtype is float16, which the checkpoint's BF16 is not). A step writes nothing but
	// the chunk's new keys and values besides the cache, which it reads in place.
	Working int64
}

// Total is Weights + KVCache + Working (at most math.MaxInt64).
func (m Memory) Total() int64 { return addBytes(addBytes(m.Weights, m.KVCache), m.Working) }

// mulBytes is a·b for sizes (never negative), math.MaxInt64 where that would overflow: an
// estimate is compared with the memory available, and a saturated one fits nowhere.
func mulBytes(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// addBytes is a+b for sizes, math.MaxInt64 where that would overflow.
func addBytes(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// String lists the parts: "bf16 weights 15.26 GiB + KV cache 9.00 MiB for 40 positions + working 192.00 MiB".
func (m Memory) String() string {
	return fmt.Sprintf("%s weights %s + KV cache %s for %d positions + working %s", m.DType,
		units.Bytes(m.Weights), units.Bytes(m.KVCache), m.Positions, units.Bytes(m.Working))
}

// MemoryNeededQwen3 works out the memory a model of cfg (Qwen3) needs on backend with dtype weights
// and a cache of positions positions: exactly the weights Load allocates and the cache NewCache
// allocates, plus the largest transient buffer. A cfg that fails Validate (sizes past their
// bounds among them) needs math.MaxInt64 bytes of weights, which nothing fits; no weight table
// is built for it.
func MemoryNeededQwen3(cfg Config, dtype DType, backend compute.Backend, positions int) Memory {
	if cfg.Validate() != nil {
		if dtype == "" {
			dtype = Float32
		}
		return Memory{DType: dtype, Weights: math.MaxInt64, Positions: positions}
	}
	return memoryNeeded(qwen3{cfg}, layoutOf(backend), dtype, positions)
}

// memoryNeeded derives the estimate from the architecture's weight table and cache state.
func memoryNeeded(arch architecture, layout Layout, dtype DType, positions int) Memory {
	if dtype == "" {
		dtype = Float32
	}
	m := Memory{DType: dtype, Positions: positions}
	var scratch int64
	// The config's sizes are bounded (MaxLayers…), which keeps these products far inside int64;
	// the arithmetic saturates all the same.
	for _, s := range arch.weights() {
		n := int64(1)
		for _, d := range s.residentShape(layout) {
			n = mulBytes(n, int64(d))
		}
		size := int64(s.residentDType(dtype).Size())
		m.Weights = addBytes(m.Weights, mulBytes(n, size))
		switch {
		case s.Kind == tableWeight && layout.TableColumns:
			scratch = max(scratch, mulBytes(4, mulBytes(int64(min(layout.columnRows(), s.Shape[0])), int64(s.Shape[1])))) // see fillColumns
		case s.Kind == linearWeight || (s.Kind == tableWeight && dtype == Float16):
			scratch = max(scratch, mulBytes(4, n)) // see fill
		}
	}
	sizes := stateBytes(arch.state(), dtype.gomlx())
	m.KVCache = addBytes(mulBytes(int64(cacheCapacity(arch.shape(), layout.cacheBlock(layout.stateSpecs(arch.state())), positions)), sizes.perPosition), sizes.fixed)
	m.Working = scratch
	return m
}

// cacheCapacity is the capacity NewCache gives a cache for n positions: whole blocks of at
// most largest (see nextBlock) holding n, at most the context length.
func cacheCapacity(shape Shape, largest, n int) int {
	return blocksCapacity(max(n, 1), shape.Context, largest)
}
