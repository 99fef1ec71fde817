package octlm

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/octlm/octlm/internal/hostproduct"
	"github.com/octlm/octlm/xla"
)

// TestChunkPaddingFitsCache runs chunks whose padded length bucket reaches past the cache's
// capacity (capped by the context length, or a cache reserved to exactly the right size) and
// holds their logits to the full path's.
func TestChunkPaddingFitsCache(t *testing.T) {
	m := loadFixture(t, "tiny-qwen3", Float32)
	tests := []struct {
		context int
		reserve int
		chunks  []int
	}{
		{context: 40, reserve: 1, chunks: []int{33}},         // bucket 48 > context 40
		{context: 70, reserve: 1, chunks: []int{30, 40}},     // 30 + bucket(40)=48 > 70
		{context: 40960, reserve: 64, chunks: []int{47, 17}}, // 47 + bucket(17)=24 > capacity 64
		{context: 64, reserve: 1, chunks: []int{60, 1, 3}},   // fills the context exactly
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.context, tt.chunks), func(t *testing.T) {
			var ids []int
			for _, n := range tt.chunks {
				for range n {
					ids = append(ids, 3+len(ids)*7%300)
				}
			}
			want, err := m.Forward(ids)
			if err != nil {
				t.Fatal(err)
			}
			saved := m.shape.Context
			m.shape.Context = tt.context
			defer func() { m.shape.Context = saved }()
			cache, err := m.NewCache(tt.reserve)
			if err != nil {
				t.Fatal(err)
			}
			defer cache.Close()
			var parts []Logits
			at := 0
			for _, n := range tt.chunks {
				l, err := m.ForwardCached(ids[at:at+n], cache)
				if err != nil {
					t.Fatalf("chunk of %d at %d: %v", n, at, err)
				}
				parts = append(parts, l)
				at += n
			}
			if cache.Len() != len(ids) || cache.Capacity() > tt.context {
				t.Errorf("cache len %d capacity %d, want len %d capacity ≤ %d", cache.Len(), cache.Capacity(), len(ids), tt.context)
			}
			if d := maxAbsError(t, concatLogits(parts...), want); d > 1e-4 {
				t.Errorf("chunked logits differ from the full path by %g", d)
			}
		})
	}
}

// TestGenerateToTheContextLength: a prompt plus MaxNewTokens that fill the context exactly
// generate the tokens generated with room to spare; one token more, or a huge count, is a
// *ContextError naming both numbers, before any work; the default count shrinks to fit.
func TestGenerateToTheContextLength(t *testing.T) {
	m := loadFixture(t, "tiny-qwen3", Float32)
	tests := []struct{ context, prompt int }{{40, 33}, {40, 39}, {64, 1}, {300, 100}}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.context, "-", tt.prompt), func(t *testing.T) {
			prompt := make([]int, tt.prompt)
			for i := range prompt {
				prompt[i] = 3 + i*11%300
			}
			room := tt.context - tt.prompt
			free, err := m.Generate(prompt, GenerateOptions{MaxNewTokens: room})
			if err != nil {
				t.Fatal(err)
			}
			saved := m.shape.Context
			m.shape.Context = tt.context
			defer func() { m.shape.Context = saved }()
			g, err := m.Generate(prompt, GenerateOptions{MaxNewTokens: room})
			if err != nil {
				t.Fatal(err)
			}
			// The two runs use caches of different capacities, so their attention kernels may sum
			// in other orders: greedy tokens are only compared while the top two logits are
			// further apart than that rounding could ever move them.
			n := greedyRobustPrefix(t, m, prompt, free.GeneratedIDs, 1e-3)
			if g.StopReason != StopLength || len(g.GeneratedIDs) != len(free.GeneratedIDs) || !slices.Equal(g.GeneratedIDs[:n], free.GeneratedIDs[:n]) {
				t.Errorf("generated %v (%s), want %v (length; the first %d must match)", g.GeneratedIDs, g.StopReason, free.GeneratedIDs, n)
			}
			def, err := m.Generate(prompt, GenerateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if want := min(room, 256); len(def.GeneratedIDs) != want {
				t.Errorf("the default generated %d tokens, want %d", len(def.GeneratedIDs), want)
			}
			for _, n := range []int{room + 1, 1 << 40, math.MaxInt} {
				_, err := m.Generate(prompt, GenerateOptions{MaxNewTokens: n})
				var ce *ContextError
				if !errors.As(err, &ce) || !errors.Is(err, ErrBadInput) || ce.Prompt != tt.prompt || ce.NewTokens != n ||
					!strings.Contains(err.Error(), fmt.Sprintf("plus %d new tokens exceeds the context length %d", n, tt.context)) {
					t.Errorf("MaxNewTokens %d: %v, want a *ContextError", n, err)
				}
			}
		})
	}
	// A prompt that fills the context leaves no room, even for the default.
	saved := m.shape.Context
	m.shape.Context = 40
	defer func() { m.shape.Context = saved }()
	var ce *ContextError
	if _, err := m.Generate(make([]int, 40), GenerateOptions{}); !errors.As(err, &ce) || ce.NewTokens != 256 {
		t.Errorf("a prompt filling the context: %v, want a *ContextError", err)
	}
}

// TestNewCacheExact: a new cache holds the positions asked for in whole blocks (64, 64, 128, …
// doubling to maxCacheBlock, then maxCacheBlock at a time), grows by blocks, never past the
// context length.
func TestNewCacheExact(t *testing.T) {
	m := loadFixture(t, "tiny-qwen3", Float32)
	tests := []struct{ reserve, run, wantCap, wantGrown int }{
		{reserve: 1, run: 10, wantCap: minCacheCapacity, wantGrown: minCacheCapacity},
		{reserve: 100, run: 100, wantCap: 128, wantGrown: 128},
		{reserve: 100, run: 129, wantCap: 128, wantGrown: 256},
		{reserve: 1025, run: 2049, wantCap: 2048, wantGrown: 3072},
		{reserve: 40000, run: 40960, wantCap: 40960, wantGrown: 40960},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.reserve, "-", tt.run), func(t *testing.T) {
			cache, err := m.NewCache(tt.reserve)
			if err != nil {
				t.Fatal(err)
			}
			defer cache.Close()
			if cache.Capacity() != tt.wantCap {
				t.Errorf("capacity %d, want %d", cache.Capacity(), tt.wantCap)
			}
			if err := cache.reserve(tt.run); err != nil {
				t.Fatal(err)
			}
			if cache.Capacity() != tt.wantGrown {
				t.Errorf("grown to %d, want %d", cache.Capacity(), tt.wantGrown)
			}
		})
	}
	var ce *ContextError
	if _, err := m.NewCache(m.Shape().Context + 1); !errors.As(err, &ce) || ce.Positions != m.Shape().Context+1 {
		t.Errorf("a cache past the context: %v, want a *ContextError", err)
	}
}

// TestPad: padding appends zero positions (growing the cache as a run would), keeps what the
// cache held, and refuses negative counts and counts past the context.
func TestPad(t *testing.T) {
	m := loadFixture(t, "tiny-qwen3", Float32)
	ids := []int{5, 17, 250, 3, 99}
	cache, err := m.NewCache(len(ids))
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	if _, err := m.ForwardCached(ids, cache); err != nil {
		t.Fatal(err)
	}
	before, err := stateFlat(cache, 0)
	if err != nil {
		t.Fatal(err)
	}
	oldCap := cache.Capacity()
	if err := cache.Pad(100); err != nil {
		t.Fatal(err)
	}
	if cache.Len() != 105 || cache.Capacity() < 105 {
		t.Fatalf("len %d capacity %d after padding, want 105", cache.Len(), cache.Capacity())
	}
	after, err := stateFlat(cache, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := qwen3Of(t, m)
	d, newCap := c.HeadWidth(), cache.Capacity()
	// Element j of kv head h at position pos, the keys stored [kvHeads, positions, hd] or
	// transposed (Layout.KeysTransposed).
	at := func(h, pos, j, capacity int) int {
		if cache.specs[0].PosAxis == 2 {
			return (h*d+j)*capacity + pos
		}
		return (h*capacity+pos)*d + j
	}
	for h := range c.KVHeads {
		for pos := range 105 {
			for j := range d {
				got := after[at(h, pos, j, newCap)]
				want := float32(0)
				if pos < len(ids) {
					want = before[at(h, pos, j, oldCap)]
				}
				if got != want {
					t.Fatalf("head %d position %d: %g, want %g", h, pos, got, want)
				}
			}
		}
	}
	if _, err := m.Next([]int{7}, cache); err != nil || cache.Len() != 106 {
		t.Fatalf("decoding on a padded cache: %v (len %d)", err, cache.Len())
	}
	var ce *ContextError
	if err := cache.Pad(-1); !errors.Is(err, ErrBadInput) {
		t.Errorf("Pad(-1): %v, want bad input", err)
	}
	if err := cache.Pad(math.MaxInt); !errors.As(err, &ce) || cache.Len() != 106 {
		t.Errorf("Pad(MaxInt): %v (len %d), want a *ContextError and the cache unchanged", err, cache.Len())
	}
}

// TestCacheLeftValues: with Layout.CacheLeft a cache stores each layer's values transposed,
// [kvHeads, hd, positions], and with Layout.KeysTransposed its keys too, and holds exactly the
// numbers the stored layout holds [kvHeads, positions, hd], across a block boundary; the stored
// layout's specs are the architecture's.
func TestCacheLeftValues(t *testing.T) {
	ids := make([]int, 70) // past the first block of 64
	for i := range ids {
		ids[i] = (i*29 + 3) % 200
	}
	caches := make([]*Cache, 2)
	for i, left := range []bool{false, true} {
		layout := LayoutFor(xla.EngineGo)
		layout.CacheLeft, layout.KeysTransposed = left, left
		m := loadLayoutOn(t, computeAttentionBackend(t), "tiny-qwen3", layout) // Go's attention would take CacheLeft off
		var err error
		if caches[i], err = m.NewCache(1); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(caches[i].Close)
		if _, err := m.ForwardCached(ids, caches[i]); err != nil {
			t.Fatal(err)
		}
	}
	stored, left := caches[0], caches[1]
	if !reflect.DeepEqual(stored.specs, stored.model.arch.state()) {
		t.Errorf("the stored layout's specs differ from the architecture's")
	}
	for i, spec := range left.specs {
		ws := stored.specs[i]
		want, wantAxis := []int{ws.Dims[0], ws.Dims[2], 0}, 2 // layers.N.k and layers.N.v transposed
		if got := spec.shape(0); !reflect.DeepEqual(got, want) || spec.PosAxis != wantAxis || spec.Values != ws.Values || spec.Keys != ws.Keys {
			t.Fatalf("spec %s: shape %v, position axis %d, want %v, %d", spec.Name, got, spec.PosAxis, want, wantAxis)
		}
		a, err := stateFlat(stored, i)
		if err != nil {
			t.Fatal(err)
		}
		b, err := stateFlat(left, i)
		if err != nil {
			t.Fatal(err)
		}
		kvHeads, capacity, hd := stored.specs[i].Dims[0], stored.Capacity(), stored.specs[i].Dims[2]
		for h := range kvHeads {
			for pos := range capacity {
				for j := range hd {
					at := (h*hd+j)*capacity + pos
					if got, want := b[at], a[(h*capacity+pos)*hd+j]; got != want {
						t.Fatalf("%s head %d position %d element %d: %g, want %g", spec.Name, h, pos, j, got, want)
					}
				}
			}
		}
	}
}

// stateFlat is a float32 cache's state i as one tensor would hold it: a fixed-size state as it
// is, a position-indexed one [outer…, capacity, row…] with its blocks side by side.
func stateFlat(c *Cache, i int) ([]float32, error) {
	spec := c.specs[i]
	if spec.PosAxis < 0 {
		return tensors.CopyFlatData[float32](c.state[i][0])
	}
	outer, rowBytes := c.geometry(spec)
	row := rowBytes / 4
	out := make([]float32, outer*c.capacity*row)
	offset := 0
	for j, t := range c.state[i] {
		data, err := tensors.CopyFlatData[float32](t)
		if err != nil {
			return nil, err
		}
		size := c.blocks[j]
		for h := range outer {
			copy(out[(h*c.capacity+offset)*row:(h*c.capacity+offset+size)*row], data[h*size*row:(h+1)*size*row])
		}
		offset += size
	}
	return out, nil
}

// TestHalfCacheProducts decodes every case of tiny-qwen3 token by token after its first half, on
// a bfloat16 KV cache under float32 weights, so that every step reads the cache: with the go
// layout's HalfCacheProducts (the blocks multiplied as stored, the query rows and probabilities
// rounded to bfloat16) and without (every block widened to float32). Both drift from the
// float32 reference by bfloat16's rounding, about as far, and agree with each other more
// closely than with it.
func TestHalfCacheProducts(t *testing.T) {
	decode := func(m *Model, ids []int) Logits {
		cache, err := m.NewCacheDType(len(ids), BFloat16)
		if err != nil {
			t.Fatal(err)
		}
		defer cache.Close()
		half := max(1, len(ids)/2)
		out, err := m.ForwardCached(ids[:half], cache)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids[half:] {
			next, err := m.ForwardCached([]int{id}, cache)
			if err != nil {
				t.Fatal(err)
			}
			out = concatLogits(out, next)
		}
		return out
	}
	load := func(half bool) *Model {
		layout := LayoutFor(xla.EngineGo)
		layout.HalfCacheProducts = half
		m, err := Load(fixtureDir("tiny-qwen3"), LoadOptions{Backend: computeAttentionBackend(t), Layout: &layout}) // Go's attention reads the blocks as stored either way
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		return m
	}
	inPlace, widened := load(true), load(false)
	var worstInPlace, worstWidened, apart float64
	for _, c := range readReference(t, "tiny-qwen3") {
		if len(c.ids) < 2 {
			continue
		}
		a, b := decode(inPlace, c.ids), decode(widened, c.ids)
		worstInPlace = max(worstInPlace, maxAbsError(t, a, c.logits))
		worstWidened = max(worstWidened, maxAbsError(t, b, c.logits))
		apart = max(apart, maxAbsError(t, a, b))
	}
	t.Logf("bfloat16 cache read token by token: max abs error %.3g in place, %.3g widened; %.3g apart", worstInPlace, worstWidened, apart)
	for _, tt := range []struct {
		name  string
		worst float64
	}{{"in place", worstInPlace}, {"widened", worstWidened}} {
		if !(tt.worst > 1e-4 && tt.worst < 0.5) {
			t.Errorf("%s: max abs error %g, want bfloat16 rounding (1e-4 … 0.5)", tt.name, tt.worst)
		}
	}
	if apart == 0 || apart >= max(worstInPlace, worstWidened) {
		t.Errorf("in place and widened %g apart, want more than 0 (the query rounded) and less than either's error against the reference (%g, %g)", apart, worstInPlace, worstWidened)
	}
}

// TestBFloat16Cache runs every case of the fixtures on a bfloat16 KV cache under float32
// weights: half the bytes per position, and logits that drift from the reference by bfloat16's
// rounding of keys and values only (measurably, and less than bfloat16 weights and
// activations, 0.53 on tiny-qwen3).
func TestBFloat16Cache(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			m := loadFixture(t, name, Float32)
			worst := 0.0
			for _, c := range readReference(t, name) {
				cache, err := m.NewCacheDType(len(c.ids), BFloat16)
				if err != nil {
					t.Fatal(err)
				}
				f32, err := m.NewCache(len(c.ids))
				if err != nil {
					t.Fatal(err)
				}
				if 2*cache.BytesPerPosition() != f32.BytesPerPosition() {
					t.Errorf("bfloat16 cache: %d bytes per position, float32 %d", cache.BytesPerPosition(), f32.BytesPerPosition())
				}
				f32.Close()
				got, err := m.ForwardCached(c.ids, cache)
				cache.Close()
				if err != nil {
					t.Fatal(err)
				}
				worst = max(worst, maxAbsError(t, got, c.logits))
			}
			t.Logf("bfloat16 KV cache: max abs error %.3g against the float32 reference", worst)
			if !(worst > 1e-4 && worst < 0.5) {
				t.Errorf("bfloat16 KV cache: max abs error %g, want bfloat16 rounding (1e-4 … 0.5)", worst)
			}
		})
	}
	m := loadFixture(t, "tiny-qwen3", Float32)
	if _, err := m.NewCacheDType(8, DType("f8")); !errors.Is(err, ErrBadInput) {
		t.Errorf("a cache of f8: %v, want bad input", err)
	}
}

// TestFloat16Cache runs every fixture (Qwen3.5's too) on a float16 KV cache under float32
// weights, as llama.cpp stores its cache by default: half the bytes per position; logits that
// drift from the reference by float16's rounding of keys and values, less than a bfloat16 cache's
// (three fewer bits of mantissa); and greedy continuations (reference/greedy.json) unchanged on
// every fixture, whose decode steps read the cache in Go where this CPU has the kernels (widened
// exactly as read) and on compute elsewhere.
func TestFloat16Cache(t *testing.T) {
	for _, name := range append(slices.Clone(fixtures), "tiny-qwen35") {
		t.Run(name, func(t *testing.T) {
			wrapped := ownHostBackend(t)
			m, err := Load(fixtureDir(name), LoadOptions{Backend: wrapped})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			worst := map[DType]float64{}
			for _, dtype := range []DType{Float16, BFloat16} {
				for _, c := range readReference(t, name) {
					cache, err := m.NewCacheDType(len(c.ids), dtype)
					if err != nil {
						t.Fatal(err)
					}
					if f32 := stateBytes(m.stateSpecs(), dtypes.Float32).perPosition; 2*cache.BytesPerPosition() != f32 {
						t.Errorf("%s cache: %d bytes per position, float32 %d", dtype, cache.BytesPerPosition(), f32)
					}
					got, err := m.ForwardCached(c.ids, cache)
					cache.Close()
					if err != nil {
						t.Fatal(err)
					}
					worst[dtype] = max(worst[dtype], maxAbsError(t, got, c.logits))
				}
			}
			t.Logf("max abs error against the float32 reference: float16 cache %.3g, bfloat16 cache %.3g", worst[Float16], worst[BFloat16])
			if !(worst[Float16] > 1e-6 && worst[Float16] < worst[BFloat16]/2) {
				t.Errorf("float16 cache: max abs error %g, want float16's rounding (more than 0, under half the bfloat16 cache's %g)", worst[Float16], worst[BFloat16])
			}
			before := wrapped.AttentionsRun()
			for n, c := range readGreedy(t, name) {
				cache, err := m.NewCacheDType(len(c.PromptIDs)+len(c.GeneratedIDs), Float16)
				if err != nil {
					t.Fatal(err)
				}
				res, err := m.GenerateOn(cache, c.PromptIDs, GenerateOptions{MaxNewTokens: len(c.GeneratedIDs), Sampling: Greedy()})
				cache.Close()
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(res.GeneratedIDs, c.GeneratedIDs) {
					t.Errorf("case %d on a float16 cache: generated %v\nreference %v (min top-2 gap %.3g)", n, res.GeneratedIDs, c.GeneratedIDs, c.MinTop2Gap)
				}
			}
			if ran := wrapped.AttentionsRun() > before; ran != hostproduct.AttentionKernels() {
				t.Errorf("attention over the float16 cache ran in Go: %v, want %v (where this CPU has the kernels)", ran, hostproduct.AttentionKernels())
			}
		})
	}
}

// TestGenerationCacheDType: generation stores its cache in float16 under float32 weights where
// attention runs in Go (the pure-Go backend as octlm opens it, on a CPU with the kernels), and
// in the weights' dtype under bfloat16 weights or where attention stays on compute;
// GenerateOptions.KVDType overrides it, and an unknown dtype is bad input.
func TestGenerationCacheDType(t *testing.T) {
	load := func(b *hostproduct.Backend, dtype DType) *Model {
		m, err := Load(fixtureDir("tiny-qwen3"), LoadOptions{Backend: b, DType: dtype})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		return m
	}
	inGo := Float32
	if hostproduct.AttentionKernels() {
		inGo = Float16
	}
	for _, tt := range []struct {
		name string
		m    *Model
		want DType
	}{
		{"float32, attention in Go", load(ownHostBackend(t), Float32), inGo},
		{"bfloat16, attention in Go", load(ownHostBackend(t), BFloat16), BFloat16},
		{"float32, attention on compute", load(computeAttentionBackend(t), Float32), Float32},
	} {
		if got := tt.m.GenerationCacheDType(); got != tt.want {
			t.Errorf("%s: generation's cache %s, want %s", tt.name, got, tt.want)
		}
		for _, dtype := range []DType{"", Float32, BFloat16, Float16} {
			cache, err := tt.m.NewGenerationCache(4, GenerateOptions{KVDType: dtype})
			if err != nil {
				t.Fatal(err)
			}
			want := dtype
			if want == "" {
				want = tt.want
			}
			if got := cache.dtype; got != want.gomlx() {
				t.Errorf("%s: a cache for KVDType %q holds %s, want %s", tt.name, dtype, got, want)
			}
			cache.Close()
		}
		if _, err := tt.m.Generate([]int{1, 2}, GenerateOptions{MaxNewTokens: 2, Sampling: Greedy(), KVDType: "f8"}); !errors.Is(err, ErrBadInput) {
			t.Errorf("%s: a generation on a cache of f8: %v, want bad input", tt.name, err)
		}
	}
}

// greedyCase is one case of a fixture's reference/greedy.json.
type greedyCase struct {
	PromptIDs    []int   `json:"prompt_ids"`
	GeneratedIDs []int   `json:"generated_ids"`
	MinTop2Gap   float64 `json:"min_top2_gap"`
}

// readGreedy reads a fixture's reference/greedy.json.
func readGreedy(t testing.TB, name string) []greedyCase {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtureDir(name), "reference", "greedy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []greedyCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatalf("%s greedy.json: %v", name, err)
	}
	return cases
}

// greedyRobustPrefix returns how many of the greedy tokens generated after prompt were chosen
// with a gap of at least margin between the top two logits (on the full path): the tokens
// before the first closer choice, which no rounding difference between code paths can flip.
func greedyRobustPrefix(t *testing.T, m *Model, prompt, generated []int, margin float32) int {
	t.Helper()
	if len(generated) == 0 {
		return 0
	}
	ids := append(slices.Clone(prompt), generated[:len(generated)-1]...)
	logits, err := m.Forward(ids)
	if err != nil {
		t.Fatal(err)
	}
	for i := range generated {
		row := logits.Row(len(prompt) - 1 + i)
		first, second := float32(math.Inf(-1)), float32(math.Inf(-1))
		for _, v := range row {
			if v > first {
				first, second = v, first
			} else if v > second {
				second = v
			}
		}
		if first-second < margin {
			return i // this token may flip, and the ones after it depend on it
		}
	}
	return len(generated)
}

// TestCacheBlock: the go layout halves the largest cache block until a decode step's key
// product against one is under the pure-Go backend's small-kernel threshold; other layouts keep
// maxCacheBlock.
func TestCacheBlock(t *testing.T) {
	keys := func(kvHeads, hd int) []stateSpec {
		return []stateSpec{{Name: "k", Dims: []int{kvHeads, 0, hd}, PosAxis: 1}, {Name: "v", Dims: []int{kvHeads, hd, 0}, PosAxis: 2, Values: true},
			{Name: "recurrent", Dims: []int{16, 128, 128}, PosAxis: -1}}
	}
	goLayout := LayoutFor(xla.EngineGo)
	for _, tt := range []struct {
		name   string
		layout Layout
		specs  []stateSpec
		want   int
	}{
		{"go, Qwen3-0.6B (8 kv heads of 128)", goLayout, keys(8, 128), 512},
		{"go, 4 kv heads of 128", goLayout, keys(4, 128), 1024},
		{"go, 32 kv heads of 128", goLayout, keys(32, 128), 128},
		{"go, tiny-qwen3", goLayout, keys(2, 32), 1024},
		{"onnx, Qwen3-0.6B", LayoutFor(xla.EngineONNX), keys(8, 128), maxCacheBlock},
	} {
		if got := tt.layout.cacheBlock(tt.specs); got != tt.want {
			t.Errorf("%s: largest block %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestCacheGroups: the query groups attention pads to for its products against the cache.
func TestCacheGroups(t *testing.T) {
	goOps := ops{layout: LayoutFor(xla.EngineGo)} // CacheLeftPad 4, CacheLeftRows 16
	unbounded := goOps
	unbounded.layout.CacheLeftRows = 0
	for _, tt := range []struct {
		name          string
		o             ops
		group, seqLen int
		want          int
	}{
		{"go, a decode step of 2 groups (Qwen3-0.6B)", goOps, 2, 1, 4},
		{"go, one group (MHA)", goOps, 1, 1, 4},
		{"go, 4 groups: whole tiles already", goOps, 4, 1, 4},
		{"go, 8 groups", goOps, 8, 1, 8},
		{"go, 2 groups of 2 rows", goOps, 2, 2, 2},
		{"go, 2 groups of 3 rows: 4 groups, 12 rows", goOps, 2, 3, 4},
		{"go, 2 groups of 7 rows: 3 would be 21 rows, past CacheLeftRows", goOps, 2, 7, 2},
		{"go, 2 groups of 9 rows: blocks on the right", goOps, 2, 9, 2},
		{"unbounded, 3 groups of 1 row", unbounded, 3, 1, 4},
		{"unbounded, 2 groups of 9 rows", unbounded, 2, 9, 4},
		{"onnx: no padding", ops{layout: LayoutFor(xla.EngineONNX)}, 2, 1, 2},
	} {
		if got := tt.o.cacheGroups(tt.group, tt.seqLen); got != tt.want {
			t.Errorf("%s: %d groups, want %d", tt.name, got, tt.want)
		}
	}
}
