package parity

import (
	"fmt"

	"github.com/octlm/octlm/octlm"
)

// GreedyTokens is how many tokens the half-precision report generates greedily from each case's
// prompt, to compare with the float32 model's.
const GreedyTokens = 32

// HalfRow is one ungated comparison of a half-precision model (bfloat16 or float16 weights and
// activations) with the float32 reference: a JSONL line of type "half_logit_parity" with the
// fields type, dtype, case, path, positions, max_absolute_error, mean_absolute_error,
// argmax_agreement and argmax_matches (no tolerance: it is reported, never gated).
type HalfRow struct {
	DType octlm.DType
	Case  int
	Path  string
	Stats Stats
}

// GreedyRow compares the tokens a half-precision model generates greedily from a case's prompt
// with the float32 model's: a JSONL line of type "half_greedy_agreement" with the fields type,
// dtype, case, prompt_positions, tokens, matches, agreement, common_prefix, float32_ids and ids.
type GreedyRow struct {
	DType           octlm.DType
	Case            int
	PromptPositions int
	Float32IDs      []int // the float32 model's tokens
	IDs             []int // the half-precision model's tokens
}

// Matches counts the steps at which both models chose the same token.
func (r GreedyRow) Matches() int {
	n := 0
	for i := range min(len(r.IDs), len(r.Float32IDs)) {
		if r.IDs[i] == r.Float32IDs[i] {
			n++
		}
	}
	return n
}

// CommonPrefix is the number of tokens generated before the first disagreement; after it the
// two models continue different texts.
func (r GreedyRow) CommonPrefix() int {
	n := 0
	for n < len(r.IDs) && n < len(r.Float32IDs) && r.IDs[n] == r.Float32IDs[n] {
		n++
	}
	return n
}

// Tokens is the number of tokens compared.
func (r GreedyRow) Tokens() int { return len(r.Float32IDs) }

// Agreement is Matches / Tokens in float64.
func (r GreedyRow) Agreement() float64 {
	if r.Tokens() == 0 {
		return 0
	}
	return float64(r.Matches()) / float64(r.Tokens())
}

// CheckGreedy reports, as ErrBadInput, a case whose prompt leaves fewer than n positions of
// the model's context for the greedy comparison, so that a half-precision run is refused before any
// work rather than after the gated run (minutes on the long-context fixture).
func (r *Reference) CheckGreedy(shape octlm.Shape, n int) error {
	for _, c := range r.Cases {
		if room := shape.Context - c.Positions(); room < n {
			return badInput("parity: %s: case %d has %d positions and the context holds %d, leaving %d where the "+
				"half-precision report generates %d greedy tokens after each prompt; measure half precision on "+
				"cases of at most %d positions (the gated float32 run, without --dtypes, takes this case)",
				c.Path, c.Index, c.Positions(), shape.Context, max(room, 0), n, shape.Context-n)
		}
	}
	return nil
}

// Greedy generates n tokens greedily from every case's prompt (no stop tokens), on the cached path.
func Greedy(m *octlm.Model, ref *Reference, n int, opts Options) ([][]int, error) {
	if err := ref.Check(m.Shape()); err != nil {
		return nil, err
	}
	if err := ref.CheckGreedy(m.Shape(), n); err != nil {
		return nil, err
	}
	out := make([][]int, len(ref.Cases))
	for i, c := range ref.Cases {
		opts.logf("%s case %d: %d greedy tokens", m.DType, c.Index, n)
		g, err := m.Generate(c.IDs, octlm.GenerateOptions{MaxNewTokens: n, Sampling: octlm.Greedy()})
		if err != nil {
			return nil, fmt.Errorf("parity: case %d: greedy generation: %w", c.Index, err)
		}
		out[i] = g.GeneratedIDs
	}
	return out, nil
}

// RunHalf measures a half-precision model m against the float32 reference on both paths, and its
// greedy tokens against float32IDs, the float32 model's (from Greedy, one list per case). Nothing
// is gated: the rows are the report.
func RunHalf(m *octlm.Model, ref *Reference, float32IDs [][]int, opts Options) ([]HalfRow, []GreedyRow, error) {
	if len(float32IDs) != len(ref.Cases) {
		return nil, nil, fmt.Errorf("parity: %d float32 greedy continuations for %d cases", len(float32IDs), len(ref.Cases))
	}
	var rows []HalfRow
	err := bothPaths(m, ref, opts, func(c Case, path string, s Stats) {
		rows = append(rows, HalfRow{DType: m.DType, Case: c.Index, Path: path, Stats: s})
	})
	if err != nil {
		return rows, nil, err
	}
	n := 0
	for _, ids := range float32IDs {
		n = max(n, len(ids))
	}
	ids, err := Greedy(m, ref, n, opts)
	if err != nil {
		return rows, nil, err
	}
	greedy := make([]GreedyRow, len(ref.Cases))
	for i, c := range ref.Cases {
		greedy[i] = GreedyRow{DType: m.DType, Case: c.Index, PromptPositions: c.Positions(), Float32IDs: float32IDs[i], IDs: ids[i]}
	}
	return rows, greedy, nil
}
