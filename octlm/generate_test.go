package octlm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/core/tensors"
)

// TestCacheTruncate: positions dropped by Truncate leave no trace. Running other tokens,
// truncating them away and running the rest gives the full path's logits (to float tolerance:
// the chunks are padded to other lengths).
func TestCacheTruncate(t *testing.T) {
	m := loadFixture(t, "tiny-qwen3", Float32)
	ids := []int{165, 77, 202, 24, 37, 274, 48, 9, 300, 12}
	want, err := m.Forward(ids)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ keep, junk int }{{4, 3}, {0, 5}, {9, 1}, {4, 70}} // 4+70 grows the cache
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.keep, "+", tt.junk), func(t *testing.T) {
			cache, err := m.NewCache(1)
			if err != nil {
				t.Fatal(err)
			}
			defer cache.Close()
			head := Logits{Vocab: m.Shape().Vocab}
			if tt.keep > 0 {
				if head, err = m.ForwardCached(ids[:tt.keep], cache); err != nil {
					t.Fatal(err)
				}
			}
			junk := make([]int, tt.junk)
			for i := range junk {
				junk[i] = 5 + i*13%300
			}
			if _, err := m.ForwardCached(junk, cache); err != nil {
				t.Fatal(err)
			}
			if err := cache.Truncate(tt.keep); err != nil {
				t.Fatal(err)
			}
			if cache.Len() != tt.keep || !slices.Equal(cache.IDs(), ids[:tt.keep]) {
				t.Fatalf("after truncating: len %d IDs %v, want %d %v", cache.Len(), cache.IDs(), tt.keep, ids[:tt.keep])
			}
			tail, err := m.ForwardCached(ids[tt.keep:], cache)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxAbsError(t, concatLogits(head, tail), want); d > 1e-4 {
				t.Errorf("logits after truncating differ from the full path by %g", d)
			}
		})
	}
	cache, _ := m.NewCache(4)
	defer cache.Close()
	if err := cache.Truncate(1); !errors.Is(err, ErrBadInput) {
		t.Errorf("truncating an empty cache to 1: %v, want bad input", err)
	}
}

// TestGenerateOnReusesTheCache: a second turn whose prompt extends the first's context runs
// only the new tokens, and picks the same tokens as a fresh generation (greedy; the fixture
// case has a top-2 logit gap of 1.9, far beyond float noise).
func TestGenerateOnReusesTheCache(t *testing.T) {
	m := loadFixture(t, "tiny-qwen3", Float32)
	turn1 := []int{187, 298, 29, 259, 109, 19, 44, 222}
	cache, err := m.NewCache(1)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	g1, err := m.GenerateOn(cache, turn1, GenerateOptions{MaxNewTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	if g1.Reused != 0 || cache.Len() != len(turn1)+2 {
		t.Fatalf("first turn: reused %d, cache %d positions, want 0 and %d", g1.Reused, cache.Len(), len(turn1)+2)
	}
	tests := []struct {
		name   string
		prompt []int
		reused int
	}{
		{"extends", append(append(slices.Clone(turn1), g1.GeneratedIDs...), 35, 123, 46), len(turn1) + 2},
		{"diverges", append(slices.Clone(turn1[:5]), 7, 8, 9), 5},
		{"inside", slices.Clone(turn1[:3]), 2}, // the last prompt token always runs
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fresh, err := m.Generate(tt.prompt, GenerateOptions{MaxNewTokens: 4})
			if err != nil {
				t.Fatal(err)
			}
			g, err := m.GenerateOn(cache, tt.prompt, GenerateOptions{MaxNewTokens: 4})
			if err != nil {
				t.Fatal(err)
			}
			if g.Reused != tt.reused {
				t.Errorf("reused %d positions, want %d", g.Reused, tt.reused)
			}
			if !slices.Equal(g.GeneratedIDs, fresh.GeneratedIDs) {
				t.Errorf("generated %v on the kept cache, %v fresh", g.GeneratedIDs, fresh.GeneratedIDs)
			}
			if want := append(slices.Clone(tt.prompt), g.GeneratedIDs[:len(g.GeneratedIDs)-1]...); !slices.Equal(cache.IDs(), want) {
				t.Errorf("cache holds %v, want %v", cache.IDs(), want)
			}
		})
	}
}

// TestGenerateNonFiniteLogits: a NaN weight makes every logit NaN; generation stops with
// ErrNonFinite instead of emitting token 0 (greedy) or an arbitrary token (sampling).
func TestGenerateNonFiniteLogits(t *testing.T) {
	for _, s := range []Sampling{Greedy(), QwenDefaults()} {
		t.Run(fmt.Sprint(s.Temperature), func(t *testing.T) {
			m := loadFixture(t, "tiny-qwen3", Float32)
			// m.weights[1] is the final norm: one NaN there reaches every logit.
			err := tensors.MutableFlatData(m.weights[1], func(flat []float32) { flat[3] = float32(math.NaN()) })
			if err != nil {
				t.Fatal(err)
			}
			g, err := m.Generate([]int{1, 2, 3}, GenerateOptions{MaxNewTokens: 4, Sampling: s})
			if !errors.Is(err, ErrNonFinite) {
				t.Fatalf("err = %v, want ErrNonFinite", err)
			}
			if len(g.GeneratedIDs) != 0 {
				t.Errorf("generated %v from NaN logits", g.GeneratedIDs)
			}
		})
	}
}

// TestGenerateInterrupted: a cancelled context ends the generation before the next step,
// keeping the tokens so far, with StopInterrupted and no error.
func TestGenerateInterrupted(t *testing.T) {
	m := loadFixture(t, "tiny-qwen3", Float32)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	g, err := m.Generate([]int{1, 2, 3}, GenerateOptions{MaxNewTokens: 50, Context: ctx, OnToken: func(int) bool {
		n++
		if n == 3 {
			cancel()
		}
		return true
	}})
	if err != nil {
		t.Fatal(err)
	}
	if g.StopReason != StopInterrupted || len(g.GeneratedIDs) != 3 {
		t.Errorf("stop %q after %d tokens, want interrupted after 3", g.StopReason, len(g.GeneratedIDs))
	}
}
