package octlm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/octlm/octlm/internal/logitscan"
)

// Sampling chooses the next token from logits. A zero Temperature means greedy decoding; the
// other fields then have no effect. The steps run in transformers' order: repetition penalty,
// temperature, top-k, top-p, min-p.
type Sampling struct {
	Temperature       float64 // 0 is greedy
	TopK              int     // 0 keeps every token
	TopP              float64 // 0 or 1 keeps every token
	MinP              float64 // 0 keeps every token
	RepetitionPenalty float64 // 0 or 1 is none
	Seed              uint64
}

// Greedy picks the most likely token at every step.
func Greedy() Sampling { return Sampling{} }

// QwenDefaults are Qwen3's generation_config.json defaults (thinking mode).
func QwenDefaults() Sampling {
	return Sampling{Temperature: 0.6, TopK: 20, TopP: 0.95, RepetitionPenalty: 1}
}

// Validate reports a setting out of range.
func (s Sampling) Validate() error {
	switch {
	case s.Temperature < 0 || math.IsNaN(s.Temperature) || math.IsInf(s.Temperature, 0):
		return fmt.Errorf("octlm: temperature must be ≥ 0, got %v", s.Temperature)
	case s.TopK < 0:
		return fmt.Errorf("octlm: top-k must be ≥ 0, got %d", s.TopK)
	case s.TopP < 0 || s.TopP > 1 || math.IsNaN(s.TopP):
		return fmt.Errorf("octlm: top-p must be in [0, 1], got %v", s.TopP)
	case s.MinP < 0 || s.MinP > 1 || math.IsNaN(s.MinP):
		return fmt.Errorf("octlm: min-p must be in [0, 1], got %v", s.MinP)
	case s.RepetitionPenalty < 0 || math.IsNaN(s.RepetitionPenalty) || math.IsInf(s.RepetitionPenalty, 0):
		return fmt.Errorf("octlm: repetition penalty must be ≥ 0, got %v", s.RepetitionPenalty)
	}
	return nil
}

// Sampler draws tokens with one Sampling's settings and its own random stream.
type Sampler struct {
	s     Sampling
	rng   *rand.Rand
	order []int     // scratch: candidate token IDs
	probs []float64 // scratch
	seen  []bool    // scratch: tokens already penalised this step
}

// NewSampler returns a sampler seeded with s.Seed.
func NewSampler(s Sampling) *Sampler {
	return &Sampler{s: s, rng: rand.New(rand.NewPCG(s.Seed, 0x6f63746c6d))}
}

// Argmax is the index of the largest logit (the first one on ties, like torch.argmax; a NaN is
// never the largest unless it is the first).
func Argmax(logits []float32) int { return logitscan.Argmax(logits) }

// Next picks a token from logits given the tokens seen so far (for the repetition penalty).
// It modifies logits in place.
func (sp *Sampler) Next(logits []float32, seen []int) int {
	s := sp.s
	if p := s.RepetitionPenalty; p != 0 && p != 1 {
		sp.penalize(logits, seen, float32(p))
	}
	if s.Temperature == 0 {
		return Argmax(logits)
	}
	sp.rank(logits, s.TopK)
	sp.softmax(logits, s.Temperature)
	return sp.draw(sp.nucleus(s.TopP, s.MinP))
}

// penalize applies the repetition penalty p to the logits of the tokens in seen: a positive
// logit is divided by p, a negative one multiplied. It acts once per distinct token, however
// often it was seen, as transformers does.
func (sp *Sampler) penalize(logits []float32, seen []int, p float32) {
	if len(sp.seen) < len(logits) {
		sp.seen = make([]bool, len(logits))
	}
	for _, id := range seen {
		if sp.seen[id] {
			continue
		}
		sp.seen[id] = true
		if v := logits[id]; v > 0 {
			logits[id] = v / p
		} else {
			logits[id] = v * p
		}
	}
	for _, id := range seen {
		sp.seen[id] = false
	}
}

// rank sets sp.order to the candidate token IDs sorted by logit, highest first: the topK best
// when topK > 0, else all. A NaN logit becomes -Inf.
func (sp *Sampler) rank(logits []float32, topK int) {
	// A NaN logit is no candidate: it would poison the softmax and the sort.
	for i, v := range logits {
		if v != v {
			logits[i] = float32(math.Inf(-1))
		}
	}
	sp.order = sp.order[:0]
	for i := range logits {
		sp.order = append(sp.order, i)
	}
	if topK > 0 && topK < len(logits) {
		// Partial selection: only the top k need sorting.
		selectTop(sp.order, logits, topK)
		sp.order = sp.order[:topK]
	}
	slices.SortStableFunc(sp.order, func(a, b int) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return 0
	})
}

// softmax sets sp.probs to the softmax of logits / temperature over the candidates in sp.order.
// Logits are shifted by the top one before dividing so that a tiny temperature cannot overflow
// to Inf-Inf. Tokens tied with the top weigh 1, which also covers a top of ±Inf (when every logit
// is -Inf, all tie).
func (sp *Sampler) softmax(logits []float32, temperature float64) {
	sp.probs = sp.probs[:0]
	top := float64(logits[sp.order[0]])
	sum := 0.0
	for _, id := range sp.order {
		p := 1.0
		if v := float64(logits[id]); v != top {
			p = math.Exp((v - top) / temperature)
		}
		sp.probs = append(sp.probs, p)
		sum += p
	}
	for i := range sp.probs {
		sp.probs[i] /= sum
	}
}

// nucleus returns how many of the candidates, best first, top-p and then min-p keep (at least
// one): the smallest prefix whose mass reaches topP (when 0 < topP < 1), cut before the first
// token less likely than minP times the best.
func (sp *Sampler) nucleus(topP, minP float64) int {
	n := len(sp.order)
	if topP > 0 && topP < 1 {
		cum := 0.0
		for i, p := range sp.probs {
			cum += p
			if cum >= topP {
				n = i + 1
				break
			}
		}
	}
	if minP > 0 {
		limit := minP * sp.probs[0]
		for i := 1; i < n; i++ {
			if sp.probs[i] < limit {
				n = i
				break
			}
		}
	}
	return n
}

// draw picks one of the first n candidates with probability proportional to its weight.
func (sp *Sampler) draw(n int) int {
	mass := 0.0
	for _, p := range sp.probs[:n] {
		mass += p
	}
	r := sp.rng.Float64() * mass
	for i, p := range sp.probs[:n] {
		r -= p
		if r < 0 {
			return sp.order[i]
		}
	}
	return sp.order[n-1]
}

// selectTop moves the k highest-logit IDs of order to its front (quickselect).
func selectTop(order []int, logits []float32, k int) {
	lo, hi := 0, len(order)-1
	for lo < hi {
		pivot := logits[order[(lo+hi)/2]]
		i, j := lo, hi
		for i <= j {
			for logits[order[i]] > pivot {
				i++
			}
			for logits[order[j]] < pivot {
				j--
			}
			if i <= j {
				order[i], order[j] = order[j], order[i]
				i++
				j--
			}
		}
		switch {
		case k-1 <= j:
			hi = j
		case k-1 >= i:
			lo = i
		default:
			return
		}
	}
}
