package parity

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/octlm/octlm/octlm"
)

// Tolerance is the gate: the largest maximum absolute logit error a float32 run may show. It was
// fixed before the first real run and is not a setting: float32 rounding across Qwen3-0.6B's 28
// layers stays near 1e-4, while a mapping bug moves logits at the scale of their 30-40 range.
const Tolerance = 1e-3

// The two paths through the decoder.
const (
	PathFull   = "full"   // the whole prompt in one call
	PathCached = "cached" // the first half, then the second half on top of the kept KV cache
)

// ErrFailed is matched (errors.Is) by a *GateError: the run completed and a comparison failed.
var ErrFailed = errors.New("logit parity failed")

// Stats compare a decoder's logits with reference logits over every position and entry.
type Stats struct {
	Positions int
	// MaxAbsoluteError and MeanAbsoluteError are computed in float64. When any logit is
	// non-finite both are NaN (some logit NaN) or +Inf (some logit infinite).
	MaxAbsoluteError  float64
	MeanAbsoluteError float64
	// ArgmaxMatches counts the positions whose top token (torch.argmax's, the first on ties)
	// is the reference's.
	ArgmaxMatches int
	// Finite is false when any logit is NaN or infinite.
	Finite bool
}

// ArgmaxAgreement is ArgmaxMatches / Positions, computed in float64 from the exact count.
func (s Stats) ArgmaxAgreement() float64 {
	if s.Positions == 0 {
		return 0
	}
	return float64(s.ArgmaxMatches) / float64(s.Positions)
}

// Compare computes the statistics of got against want; they must have the same shape.
func Compare(got, want octlm.Logits) (Stats, error) {
	if got.Rows != want.Rows || got.Vocab != want.Vocab || len(got.Data) != got.Rows*got.Vocab || len(want.Data) != want.Rows*want.Vocab {
		return Stats{}, fmt.Errorf("parity: logits [%d, %d] (%d values), reference [%d, %d] (%d values)",
			got.Rows, got.Vocab, len(got.Data), want.Rows, want.Vocab, len(want.Data))
	}
	s := Stats{Positions: got.Rows, Finite: true}
	var sum float64
	nan, inf := false, false
	for i, g := range got.Data {
		g64 := float64(g)
		switch {
		case math.IsNaN(g64):
			nan = true
			continue
		case math.IsInf(g64, 0):
			inf = true
			continue
		}
		d := math.Abs(g64 - float64(want.Data[i]))
		s.MaxAbsoluteError = max(s.MaxAbsoluteError, d)
		sum += d
	}
	switch {
	case nan:
		s.Finite, s.MaxAbsoluteError, s.MeanAbsoluteError = false, math.NaN(), math.NaN()
	case inf:
		s.Finite, s.MaxAbsoluteError, s.MeanAbsoluteError = false, math.Inf(1), math.Inf(1)
	case len(got.Data) > 0:
		s.MeanAbsoluteError = sum / float64(len(got.Data))
	}
	for r := range got.Rows {
		if octlm.Argmax(got.Row(r)) == octlm.Argmax(want.Row(r)) {
			s.ArgmaxMatches++
		}
	}
	return s, nil
}

// Row is one gated comparison: one case through one path, as a JSONL line of type
// "logit_parity" with exactly the fields type, case, path, positions, max_absolute_error,
// mean_absolute_error, argmax_agreement, argmax_matches and tolerance. Non-finite errors are
// written as null.
type Row struct {
	Case  int
	Path  string // PathFull or PathCached
	Stats Stats
}

// Failed reports whether the row fails the gate: a non-finite logit or a maximum above Tolerance.
func (r Row) Failed() bool { return !r.Stats.Finite || r.Stats.MaxAbsoluteError > Tolerance }

// GateError is a failed comparison: the first failing row of a run.
type GateError struct {
	DType octlm.DType
	Row   Row
}

// Error reads like "float32 cached logit parity failed on case 2: 0.0132".
func (e *GateError) Error() string {
	return fmt.Sprintf("%s %s logit parity failed on case %d: %s", dtypeWord(e.DType), e.Row.Path, e.Row.Case, formatError(e.Row.Stats.MaxAbsoluteError))
}

// Is makes errors.Is(err, ErrFailed) true.
func (e *GateError) Is(target error) bool { return target == ErrFailed }

// formatError prints an error with three significant digits, or more when three would round a
// value above Tolerance down to it.
func formatError(x float64) string {
	s := strconv.FormatFloat(x, 'g', 3, 64)
	if v, _ := strconv.ParseFloat(s, 64); x > Tolerance && v <= Tolerance {
		s = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return s
}

// dtypeWord is the dtype as the protocol's messages spell it.
func dtypeWord(d octlm.DType) string {
	switch d {
	case octlm.BFloat16:
		return "bfloat16"
	case octlm.Float16:
		return "float16"
	}
	return "float32"
}

// Options tune a run.
type Options struct {
	// Log, when set, receives one line per step (which case, which model).
	Log func(format string, args ...any)
	// Progress, when set, is told the positions done of a case's path as it runs: the paths
	// then run in slices of ProgressStep positions (the same logits; see ProgressStep).
	Progress func(c Case, path string, done, total int)
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		o.Log(format, args...)
	}
}

// Split is where the cached path splits a prompt of n positions: max(1, n/2).
func Split(n int) int { return max(1, n/2) }

// FullPath runs ids through the full path: the whole prompt in one call.
func FullPath(m *octlm.Model, ids []int) (octlm.Logits, error) { return m.Forward(ids) }

// CachedPath runs ids through the cached path: a cache sized for the first Split(len(ids))
// positions takes the first half, then grows and takes the second half on top. A one-token
// prompt has no second half.
func CachedPath(m *octlm.Model, ids []int) (octlm.Logits, error) {
	split := Split(len(ids))
	cache, err := m.NewCache(split)
	if err != nil {
		return octlm.Logits{}, err
	}
	defer cache.Close()
	first, err := m.ForwardCached(ids[:split], cache)
	if err != nil || split == len(ids) {
		return first, err
	}
	second, err := m.ForwardCached(ids[split:], cache)
	if err != nil {
		return octlm.Logits{}, err
	}
	return octlm.Logits{Rows: first.Rows + second.Rows, Vocab: first.Vocab, Data: append(first.Data, second.Data...)}, nil
}

// bothPaths compares the full and the cached path of every case with the reference.
func bothPaths(m *octlm.Model, ref *Reference, opts Options, row func(c Case, path string, s Stats)) error {
	if err := ref.Check(m.Shape()); err != nil {
		return err
	}
	for _, c := range ref.Cases {
		want, err := c.Logits()
		if err != nil {
			return err
		}
		opts.logf("%s case %d (%s): full and cached paths", m.DType, c.Index, plural(c.Positions(), "position"))
		for _, p := range []struct {
			name     string
			run      func(*octlm.Model, []int) (octlm.Logits, error)
			progress func(*octlm.Model, []int, func(done, total int)) (octlm.Logits, error)
		}{{PathFull, FullPath, fullPathProgress}, {PathCached, CachedPath, cachedPathProgress}} {
			var got octlm.Logits
			var err error
			if opts.Progress != nil {
				got, err = p.progress(m, c.IDs, func(done, total int) { opts.Progress(c, p.name, done, total) })
			} else {
				got, err = p.run(m, c.IDs)
			}
			if err != nil {
				err = fmt.Errorf("parity: case %d, %s path: %w", c.Index, p.name, err)
				if errors.Is(err, octlm.ErrBadInput) {
					err = badInput("%w", err)
				}
				return err
			}
			s, err := Compare(got, want)
			if err != nil {
				return fmt.Errorf("parity: case %d, %s path: %w", c.Index, p.name, err)
			}
			row(c, p.name, s)
		}
	}
	return nil
}

// Run is the gated protocol: every case of ref through the full and the cached path of m, which
// must hold float32 weights. It returns one row per case and path, in that order. When every
// comparison ran it returns all rows, and a *GateError for the first failing row if any
// (errors.Is(err, ErrFailed)); a reference that does not fit the model is ErrBadInput.
func Run(m *octlm.Model, ref *Reference, opts Options) ([]Row, error) {
	if m.DType != octlm.Float32 {
		return nil, badInput("parity: the gated run needs float32 weights, the model holds %s (use RunHalf)", m.DType)
	}
	var rows []Row
	err := bothPaths(m, ref, opts, func(c Case, path string, s Stats) {
		rows = append(rows, Row{Case: c.Index, Path: path, Stats: s})
	})
	if err != nil {
		return rows, err
	}
	for _, r := range rows {
		if r.Failed() {
			return rows, &GateError{DType: m.DType, Row: r}
		}
	}
	return rows, nil
}

// plural writes "1 position", "7 positions".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
