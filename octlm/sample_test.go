package octlm

import (
	"math"
	"slices"
	"testing"
)

func TestSampler(t *testing.T) {
	logits := []float32{1, 5, 3, 4.9, -2}
	draw := func(s Sampling, n int) map[int]int {
		sp := NewSampler(s)
		counts := map[int]int{}
		for range n {
			counts[sp.Next(slices.Clone(logits), nil)]++
		}
		return counts
	}
	tests := []struct {
		name    string
		s       Sampling
		allowed []int // tokens that may be drawn
		all     bool  // every allowed token must show up in 2,000 draws
	}{
		{"greedy", Greedy(), []int{1}, true},
		{"top-k 1", Sampling{Temperature: 1, TopK: 1}, []int{1}, true},
		{"top-k 2", Sampling{Temperature: 1, TopK: 2}, []int{1, 3}, true},
		{"top-p keeps the head", Sampling{Temperature: 1, TopP: 0.4}, []int{1}, true},
		{"top-p 0.9", Sampling{Temperature: 1, TopP: 0.9}, []int{1, 3}, true},
		{"min-p", Sampling{Temperature: 1, MinP: 0.5}, []int{1, 3}, true},
		{"low temperature", Sampling{Temperature: 0.01}, []int{1, 3}, false},
		{"everything", Sampling{Temperature: 1}, []int{0, 1, 2, 3, 4}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			counts := draw(tt.s, 2000)
			for id := range counts {
				if !slices.Contains(tt.allowed, id) {
					t.Errorf("drew %d, allowed only %v (counts %v)", id, tt.allowed, counts)
				}
			}
			if tt.all {
				for _, id := range tt.allowed {
					if counts[id] == 0 {
						t.Errorf("never drew %d (counts %v)", id, counts)
					}
				}
			}
		})
	}
}

func TestSamplerDistribution(t *testing.T) {
	// With temperature 1 and no cuts, token frequencies follow the softmax.
	logits := []float32{0, 1, 2}
	sp := NewSampler(Sampling{Temperature: 1, Seed: 7})
	const n = 60_000
	counts := make([]float64, 3)
	for range n {
		counts[sp.Next(slices.Clone(logits), nil)]++
	}
	z := 1 + math.E + math.E*math.E
	for i, c := range counts {
		want := math.Exp(float64(i)) / z
		if got := c / n; math.Abs(got-want) > 0.01 {
			t.Errorf("token %d: frequency %.3f, softmax %.3f", i, got, want)
		}
	}
}

func TestSamplerSeed(t *testing.T) {
	run := func(seed uint64) []int {
		sp := NewSampler(Sampling{Temperature: 1, Seed: seed})
		var out []int
		for range 50 {
			out = append(out, sp.Next([]float32{1, 1, 1, 1, 1, 1}, nil))
		}
		return out
	}
	if !slices.Equal(run(1), run(1)) {
		t.Error("the same seed drew different tokens")
	}
	if slices.Equal(run(1), run(2)) {
		t.Error("different seeds drew the same 50 tokens")
	}
}

func TestRepetitionPenalty(t *testing.T) {
	sp := NewSampler(Sampling{RepetitionPenalty: 2})
	logits := []float32{3, 2.5, -1}
	if got := sp.Next(logits, []int{0, 2}); got != 1 {
		t.Errorf("penalised token still chosen: %d", got)
	}
	if logits[0] != 1.5 || logits[2] != -2 {
		t.Errorf("penalty applied as %v; want positive logits divided and negative multiplied", logits)
	}
}

func TestSamplingValidate(t *testing.T) {
	bad := []Sampling{
		{Temperature: -1}, {Temperature: math.NaN()}, {TopK: -1}, {TopP: 1.5}, {MinP: -0.1}, {RepetitionPenalty: -1},
	}
	for _, s := range bad {
		if s.Validate() == nil {
			t.Errorf("%+v accepted", s)
		}
	}
	if err := QwenDefaults().Validate(); err != nil {
		t.Errorf("Qwen defaults rejected: %v", err)
	}
}

func TestSelectTop(t *testing.T) {
	logits := []float32{5, 1, 9, 3, 7, 7, 2, 8}
	order := []int{0, 1, 2, 3, 4, 5, 6, 7}
	selectTop(order, logits, 3)
	top := slices.Clone(order[:3])
	slices.Sort(top)
	if !slices.Equal(top, []int{2, 4, 7}) && !slices.Equal(top, []int{2, 5, 7}) {
		t.Errorf("top 3 = %v, want IDs of 9, 8 and a 7", order[:3])
	}
}

func TestGenerateStops(t *testing.T) {
	m := loadFixture(t, "tiny-qwen3", Float32)
	prompt := []int{165, 77, 202, 24, 37, 274, 48}
	// The greedy continuation starts with 261 (reference/greedy.json): stopping on it ends at once.
	g, err := m.Generate(prompt, GenerateOptions{MaxNewTokens: 10, StopIDs: []int{261}})
	if err != nil {
		t.Fatal(err)
	}
	if g.StopReason != StopEOS || !slices.Equal(g.GeneratedIDs, []int{261}) {
		t.Errorf("stop id: got %v (%s)", g.GeneratedIDs, g.StopReason)
	}
	var streamed []int
	g, err = m.Generate(prompt, GenerateOptions{MaxNewTokens: 5, OnToken: func(id int) bool { streamed = append(streamed, id); return true }})
	if err != nil {
		t.Fatal(err)
	}
	if g.StopReason != StopLength || len(g.GeneratedIDs) != 5 || !slices.Equal(streamed, g.GeneratedIDs) {
		t.Errorf("length stop: got %v streamed %v (%s)", g.GeneratedIDs, streamed, g.StopReason)
	}
	if _, err := m.Generate(nil, GenerateOptions{}); err == nil {
		t.Error("empty prompt accepted")
	}
}
