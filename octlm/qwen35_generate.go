package octlm

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/octlm/octlm/internal/fileio"
)

// Generate continues prompt (token IDs) on a fresh cache until a stop ID, MaxNewTokens or the
// context length, as Model.Generate does. Qwen3.5's cache cannot be cut back to a shared
// prefix (the DeltaNet state holds every position at once), so every generation starts afresh.
func (m *Qwen35Model) Generate(prompt []int, opts GenerateOptions) (Generation, error) {
	if err := opts.Sampling.Validate(); err != nil {
		return Generation{}, err
	}
	maxNew := opts.MaxNewTokens
	if maxNew == 0 {
		maxNew = min(defaultMaxNew, max(m.Config.ContextLength-len(prompt), 1))
	}
	if maxNew < 0 {
		return Generation{}, fmt.Errorf("octlm: max new tokens must be positive, got %d: %w", maxNew, ErrBadInput)
	}
	if len(prompt) == 0 {
		return Generation{}, fmt.Errorf("octlm: empty prompt: %w", ErrBadInput)
	}
	if room := m.Config.ContextLength - len(prompt); maxNew > room {
		return Generation{}, &ContextError{Positions: len(prompt) + min(maxNew, math.MaxInt-len(prompt)),
			ContextLength: m.Config.ContextLength, Prompt: len(prompt), NewTokens: maxNew}
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	cache, err := m.NewCache()
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
		if ctx.Err() != nil {
			g.StopReason = StopInterrupted
			break
		}
		if err := checkFinite(logits); err != nil {
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
		if logits, err = m.Next([]int{id}, cache); err != nil {
			return g, err
		}
	}
	if len(g.GeneratedIDs) > 0 {
		g.Decode = time.Since(begin) - g.TimeToFirstToken
	}
	return g, nil
}

// Qwen35StopIDs reads a Qwen3.5 folder's end-of-sequence IDs: generation_config.json's
// eos_token_id, else config.json's, else its text_config's (the multimodal form keeps it
// there). None found is no stop ID.
func Qwen35StopIDs(dir string) ([]int, error) {
	for _, name := range []string{"generation_config.json", "config.json"} {
		ids, err := readEOSTokenIDs(filepath.Join(dir, name))
		if err != nil || ids != nil {
			return ids, err
		}
	}
	path := filepath.Join(dir, "config.json")
	data, err := fileio.ReadFile(path, MaxConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("octlm: %w", err)
	}
	var top struct {
		Text json.RawMessage `json:"text_config"`
	}
	if err := json.Unmarshal(data, &top); err != nil || len(top.Text) == 0 {
		return nil, nil
	}
	ids, err := parseEOSTokenIDs(top.Text, path+": text_config")
	return ids, err
}
