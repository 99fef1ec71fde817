package octlm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/octlm/octlm/internal/logitscan"
)

// Stop reasons of a Generation, and the default MaxNewTokens.
const (
	StopEOS       = "eos"
	StopLength    = "length"
	StopCallback  = "stopped"
	defaultMaxNew = 256
)

// StopInterrupted is the stop reason of a generation whose context was cancelled (Ctrl-C).
const StopInterrupted = "interrupted"

// ErrNonFinite is wrapped by Generate's error when a step's logits hold NaN or ±Inf: no token
// can be chosen from them (a corrupt weight, or an overflow in half precision).
var ErrNonFinite = errors.New("non-finite logits")

// GenerateOptions configure Generate.
type GenerateOptions struct {
	MaxNewTokens int      // 0 means 256, or what the context leaves room for when less
	Sampling     Sampling // Greedy() or QwenDefaults() or your own
	StopIDs      []int    // generation ends after emitting one of these (it is kept in GeneratedIDs)
	// OnToken, when set, is called with every generated token as it arrives; returning false stops.
	OnToken func(id int) bool
	// Context, when set and done, ends the generation before the next step with StopReason
	// StopInterrupted and no error: the tokens so far are kept. A step already running finishes.
	Context context.Context
	// KVDType is the dtype Generate and GenerateBatch store their KV caches in: Float32,
	// BFloat16 or Float16; "" means Model.GenerationCacheDType. (GenerateOn uses the cache given.)
	KVDType DType
}

// GenerationCacheDType is the dtype Generate and GenerateBatch store a KV cache in unless
// GenerateOptions.KVDType says otherwise: Float16 where the weights are float32 and the engine
// reads a float16 cache as it lies (attention in Go, Layout.HostAttention: the go engine where
// the CPU has the vector kernels), as llama.cpp stores its cache by default. That halves the
// bytes a decode step reads from the cache (at depth 4,096 on Qwen3-0.6B, 0.47 GB of a step's
// 2.9) and keeps the greedy continuations of every fixture (TestFloat16Cache), its logits within
// float16's rounding of keys and values of the float32 reference (max abs error 0.004–0.033 on
// the tiny random fixtures, a tenth of a bfloat16 cache's). Elsewhere, where every step would
// widen the whole cache first, and for half-precision weights: the model's dtype. Forward,
// ForwardCached on NewCache, parity and evaluation keep the model's dtype.
func (m *Model) GenerationCacheDType() DType {
	if m.DType == Float32 && m.layout.HostAttention {
		return Float16
	}
	return m.DType
}

// NewGenerationCache is a KV cache of capacity positions in the dtype a generation with opts
// stores its cache in (opts.KVDType, or GenerationCacheDType): for GenerateOn, as a chat keeps one.
func (m *Model) NewGenerationCache(capacity int, opts GenerateOptions) (*Cache, error) {
	dtype := opts.KVDType
	if dtype == "" {
		dtype = m.GenerationCacheDType()
	}
	return m.NewCacheDType(capacity, dtype)
}

// Generation is the result of Generate.
type Generation struct {
	PromptIDs        []int
	GeneratedIDs     []int
	StopReason       string // "eos", "length", "stopped" or "interrupted"
	TimeToFirstToken time.Duration
	Prefill          time.Duration // the prompt's forward pass
	Decode           time.Duration // every step after the first token
	// Reused is the number of prompt positions taken from the cache instead of recomputed
	// (GenerateOn only).
	Reused int
}

// TokensPerSecond is the decode speed: generated tokens after the first, per second. It is
// 0 when fewer than two tokens were generated (there is no decode step to time then).
func (g Generation) TokensPerSecond() float64 {
	if len(g.GeneratedIDs) < 2 || g.Decode <= 0 {
		return 0
	}
	return float64(len(g.GeneratedIDs)-1) / g.Decode.Seconds()
}

// Generate continues prompt on the cached path: one forward pass over the prompt, then one
// token at a time on top of the KV cache, whose capacity is reserved up front. A prompt plus
// MaxNewTokens past the context length is a *ContextError (the default of 256 new tokens
// shrinks to fit instead). If a step fails, it returns the tokens generated so far together
// with the error.
func (m *Model) Generate(prompt []int, opts GenerateOptions) (Generation, error) {
	maxNew, err := checkGenerate(m, prompt, opts)
	if err != nil {
		return Generation{}, err
	}
	cache, err := m.NewGenerationCache(len(prompt)+maxNew-1, opts)
	if err != nil {
		return Generation{}, err
	}
	defer cache.Close()
	return m.generate(cache, prompt, opts)
}

// GenerateOn is Generate on a cache kept between calls, as a chat keeps one across turns:
// the part of prompt that cache already holds (the longest common prefix of prompt and
// Cache.IDs) is not recomputed, positions past it are dropped from the cache, and the rest of
// prompt is run on top. A cache that cannot drop positions (a recurrent state: CanTruncate
// false) is reused only if it holds a prefix of prompt; otherwise it starts over. Afterwards the cache holds prompt and every generated token but the
// last, which no step has seen.
func (m *Model) GenerateOn(cache *Cache, prompt []int, opts GenerateOptions) (Generation, error) {
	if cache == nil || cache.model != m {
		return Generation{}, fmt.Errorf("octlm: the cache does not belong to this model: %w", ErrBadInput)
	}
	if _, err := checkGenerate(m, prompt, opts); err != nil {
		return Generation{}, err
	}
	return m.generate(cache, prompt, opts)
}

// checkGenerate validates a generation request and returns the number of new tokens to reserve.
func checkGenerate(m *Model, prompt []int, opts GenerateOptions) (int, error) {
	if err := opts.Sampling.Validate(); err != nil {
		return 0, err
	}
	maxNew := opts.MaxNewTokens
	if maxNew == 0 {
		maxNew = defaultMaxNew
	}
	if maxNew < 0 {
		return 0, fmt.Errorf("octlm: max new tokens must be positive, got %d: %w", maxNew, ErrBadInput)
	}
	if len(prompt) == 0 {
		return 0, fmt.Errorf("octlm: empty prompt: %w", ErrBadInput)
	}
	room := m.shape.Context - len(prompt)
	if opts.MaxNewTokens == 0 && room > 0 {
		maxNew = min(maxNew, room) // the default leaves room for the prompt
	}
	if len(prompt) > m.shape.Context || maxNew > room {
		return 0, &ContextError{Positions: len(prompt) + min(maxNew, math.MaxInt-len(prompt)), ContextLength: m.shape.Context,
			Prompt: len(prompt), NewTokens: maxNew}
	}
	return maxNew, nil
}

// generate runs prompt on top of the part of cache it shares, then samples until a stop.
func (m *Model) generate(cache *Cache, prompt []int, opts GenerateOptions) (Generation, error) {
	maxNew, _ := checkGenerate(m, prompt, opts)
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	// At least the prompt's last token runs, to give the first logits.
	keep := min(commonPrefix(cache.IDs(), prompt), len(prompt)-1)
	if keep != cache.Len() && !cache.CanTruncate() {
		keep = 0 // a recurrent state cannot go back: run the whole prompt again
	}
	if err := cache.Truncate(keep); err != nil {
		return Generation{}, err
	}
	sampler := NewSampler(opts.Sampling)
	g := Generation{PromptIDs: slices.Clone(prompt), StopReason: StopLength, Reused: keep}
	seen := slices.Clone(prompt)
	begin := time.Now()
	logits, err := m.Next(prompt[keep:], cache)
	if err != nil {
		return g, err
	}
	g.Prefill = time.Since(begin)
	for {
		if ctx.Err() != nil {
			g.StopReason = StopInterrupted
			break
		}
		if err := CheckFinite(logits); err != nil {
			return g, fmt.Errorf("octlm: generated token %d: %w", len(g.GeneratedIDs)+1, err)
		}
		id := sampler.Next(logits, seen)
		if len(g.GeneratedIDs) == 0 {
			g.TimeToFirstToken = time.Since(begin)
		}
		g.GeneratedIDs = append(g.GeneratedIDs, id)
		seen = append(seen, id)
		if opts.OnToken != nil && !opts.OnToken(id) {
			g.StopReason = StopCallback
			break
		}
		if slices.Contains(opts.StopIDs, id) {
			g.StopReason = StopEOS
			break
		}
		if len(g.GeneratedIDs) >= maxNew {
			break
		}
		if logits, err = m.NextInto([]int{id}, cache, logits); err != nil {
			return g, err
		}
	}
	if len(g.GeneratedIDs) > 0 {
		g.Decode = time.Since(begin) - g.TimeToFirstToken
	}
	return g, nil
}

// CheckFinite reports the first NaN or ±Inf in a row of logits as an ErrNonFinite.
func CheckFinite(logits []float32) error {
	if i := logitscan.FirstNonFinite(logits); i >= 0 {
		return fmt.Errorf("%w: the logit of token %d is %v (a corrupt weight, or an overflow in half precision?)", ErrNonFinite, i, logits[i])
	}
	return nil
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
