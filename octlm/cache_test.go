package octlm

import (
	"fmt"
	"math"
	"slices"
	"testing"
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
			saved := m.Config.ContextLength
			m.Config.ContextLength = tt.context
			defer func() { m.Config.ContextLength = saved }()
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

// TestGenerateToTheContextLength: a huge --max-new-tokens stops at the context length, with
// len(prompt)+generated-1 positions fed (the last token is never fed back), and the tokens
// match the ones generated with room to spare.
func TestGenerateToTheContextLength(t *testing.T) {
	m := loadFixture(t, "tiny-qwen3", Float32)
	tests := []struct{ context, prompt int }{{40, 33}, {40, 40}, {40, 39}, {64, 1}}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.context, "-", tt.prompt), func(t *testing.T) {
			prompt := make([]int, tt.prompt)
			for i := range prompt {
				prompt[i] = 3 + i*11%300
			}
			want := tt.context - tt.prompt + 1
			free, err := m.Generate(prompt, GenerateOptions{MaxNewTokens: want})
			if err != nil {
				t.Fatal(err)
			}
			saved := m.Config.ContextLength
			m.Config.ContextLength = tt.context
			defer func() { m.Config.ContextLength = saved }()
			g, err := m.Generate(prompt, GenerateOptions{MaxNewTokens: 1 << 40})
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
		})
	}
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
