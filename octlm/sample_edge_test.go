package octlm

import (
	"math"
	"slices"
	"testing"
)

// TestSamplerEdgeLogits holds sampling to sane choices on logits a broken or masked model can
// produce, and on temperatures small enough to overflow logit/temperature.
func TestSamplerEdgeLogits(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tests := []struct {
		name    string
		s       Sampling
		logits  []float32
		allowed []int
	}{
		{"tiny temperature", Sampling{Temperature: 1e-320}, []float32{1, 5, 3, -2}, []int{1}},
		{"tiny temperature, negative logits", Sampling{Temperature: 1e-320}, []float32{-5, -1, -3}, []int{1}},
		{"tiny temperature, top-p", Sampling{Temperature: 1e-320, TopP: 0.9}, []float32{1, 5, 3, -2}, []int{1}},
		{"NaN logits", Sampling{Temperature: 1}, []float32{nan, 2, 1, nan}, []int{1, 2}},
		{"NaN logits, top-p", Sampling{Temperature: 1, TopP: 0.9}, []float32{nan, 2, 1, nan}, []int{1, 2}},
		{"NaN logits, top-k", Sampling{Temperature: 1, TopK: 2}, []float32{nan, 2, nan, 1, nan}, []int{1, 3}},
		{"masked to one token", Sampling{Temperature: 1}, []float32{-inf, 0, -inf}, []int{1}},
		{"+Inf logit", Sampling{Temperature: 1, TopP: 0.5}, []float32{0, inf, 1}, []int{1}},
		{"all -Inf", Sampling{Temperature: 1}, []float32{-inf, -inf, -inf}, []int{0, 1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp := NewSampler(tt.s)
			for range 200 {
				if id := sp.Next(slices.Clone(tt.logits), nil); !slices.Contains(tt.allowed, id) {
					t.Fatalf("drew %d from %v, allowed only %v", id, tt.logits, tt.allowed)
				}
			}
		})
	}
}

// TestRepetitionPenaltyOnce: like transformers, a token seen several times is penalised once.
func TestRepetitionPenaltyOnce(t *testing.T) {
	tests := []struct {
		seen []int
		want []float32
	}{
		{[]int{0}, []float32{2, -4, 1}},
		{[]int{0, 0, 0}, []float32{2, -4, 1}},
		{[]int{1, 0, 1, 0}, []float32{2, -8, 1}},
	}
	for _, tt := range tests {
		logits := []float32{4, -4, 1}
		NewSampler(Sampling{RepetitionPenalty: 2}).Next(logits, tt.seen)
		if !slices.Equal(logits, tt.want) {
			t.Errorf("seen %v: penalised logits %v, want %v", tt.seen, logits, tt.want)
		}
	}
}
