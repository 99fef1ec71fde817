package octlm

import (
	"fmt"
	"slices"
	"time"
)

// Qwen3's stop tokens: <|im_end|> and <|endoftext|>.
const (
	QwenIMEnd      = 151645
	QwenEndOfText  = 151643
	StopEOS        = "eos"
	StopLength     = "length"
	StopCallback   = "stopped"
	defaultMaxNew  = 256
)

// QwenStopIDs are the token IDs that end a Qwen3 generation.
var QwenStopIDs = []int{QwenIMEnd, QwenEndOfText}

// GenerateOptions configure Generate.
type GenerateOptions struct {
	MaxNewTokens int      // 0 means 256
	Sampling     Sampling // Greedy() or QwenDefaults() or your own
	StopIDs      []int    // generation ends after emitting one of these (it is kept in GeneratedIDs)
	// OnToken, when set, is called with every generated token as it arrives; returning false stops.
	OnToken func(id int) bool
}

// Generation is the result of Generate.
type Generation struct {
	PromptIDs        []int
	GeneratedIDs     []int
	StopReason       string // "eos", "length" or "stopped"
	TimeToFirstToken time.Duration
	Prefill          time.Duration // the prompt's forward pass
	Decode           time.Duration // every step after the first token
}

// TokensPerSecond is the decode speed: generated tokens after the first, per second.
func (g Generation) TokensPerSecond() float64 {
	if len(g.GeneratedIDs) < 2 || g.Decode <= 0 {
		return 0
	}
	return float64(len(g.GeneratedIDs)-1) / g.Decode.Seconds()
}

// Generate continues prompt on the cached path: one forward pass over the prompt, then one
// token at a time on top of the KV cache, whose capacity is reserved up front. If a step fails,
// it returns the tokens generated so far together with the error.
func (m *Model) Generate(prompt []int, opts GenerateOptions) (Generation, error) {
	if err := opts.Sampling.Validate(); err != nil {
		return Generation{}, err
	}
	maxNew := opts.MaxNewTokens
	if maxNew == 0 {
		maxNew = defaultMaxNew
	}
	if maxNew < 0 {
		return Generation{}, fmt.Errorf("octlm: max new tokens must be positive, got %d: %w", maxNew, ErrBadInput)
	}
	if len(prompt) == 0 {
		return Generation{}, fmt.Errorf("octlm: empty prompt: %w", ErrBadInput)
	}
	if len(prompt) > m.Config.ContextLength {
		return Generation{}, fmt.Errorf("octlm: the prompt's %d tokens exceed the context length %d: %w",
			len(prompt), m.Config.ContextLength, ErrBadInput)
	}
	maxNew = min(maxNew, m.Config.ContextLength-len(prompt)+1)
	cache, err := m.NewCache(len(prompt) + maxNew - 1)
	if err != nil {
		return Generation{}, err
	}
	defer cache.Close()

	sampler := NewSampler(opts.Sampling)
	g := Generation{PromptIDs: slices.Clone(prompt), StopReason: StopLength}
	seen := slices.Clone(prompt)
	begin := time.Now()
	logits, err := m.Next(prompt, cache)
	if err != nil {
		return g, err
	}
	g.Prefill = time.Since(begin)
	for {
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
		if logits, err = m.Next([]int{id}, cache); err != nil {
			return g, err
		}
	}
	g.Decode = time.Since(begin) - g.TimeToFirstToken
	return g, nil
}
