package figures

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"

	"github.com/octlm/octlm/internal/units"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/parity"
)

// Histogram bins of |Δlogit|: binsPerDecade per decade from 10^histLo to 10^histHi; smaller
// non-zero errors go to the first bin, larger ones to the last.
const (
	histLo, histHi = -10, 0
	binsPerDecade  = 4
)

// CaseErrors are one reference case's per-position statistics on the full path.
type CaseErrors struct {
	Index, Positions int
	MaxErr           []float64 // max over the vocabulary of |Δlogit|, per position
	Range            []float64 // reference max − min logit, per position
	Gap              []float64 // reference top-1 − top-2 logit, per position
	ArgmaxSame       []bool    // the model's top token is the reference's
}

// ParityResult is the parity protocol on one checkpoint with the statistics behind 04-parity's
// figures.
type ParityResult struct {
	Label   string
	Backend string
	Report  parity.Report // the gated rows, both paths
	Cases   []CaseErrors
	Bins    []int64 // histogram of |Δlogit| over every logit of every case (full path)
	Zeros   int64   // logits with no error at all
	Logits  int64   // logits compared
}

// MeasureParity runs the gated protocol (parity.Run: every case, full and cached path) on the
// float32 model, then the full path once more per case to keep per-logit statistics. A failed gate
// is not an error: the result says FAIL.
func MeasureParity(src *Source) (*ParityResult, error) {
	ref, err := src.ReadReference()
	if err != nil {
		return nil, err
	}
	m, err := src.Load(octlm.Float32, nil)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	r := &ParityResult{Label: src.Label, Backend: src.Info.Name, Bins: make([]int64, (histHi-histLo)*binsPerDecade)}
	r.Report.Run = parity.RunInfo{Model: src.Label, Reference: src.Reference, Backend: src.Info.Name, Cases: len(ref.Cases)}
	r.Report.Rows, err = parity.Run(m, ref, parity.Options{})
	if err != nil && !errors.Is(err, parity.ErrFailed) {
		return nil, err
	}
	for _, c := range ref.Cases {
		got, err := parity.FullPath(m, c.IDs)
		if err != nil {
			return nil, err
		}
		want, err := c.Logits()
		if err != nil {
			return nil, err
		}
		ce := CaseErrors{Index: c.Index, Positions: want.Rows}
		for p := range want.Rows {
			g, w := got.Row(p), want.Row(p)
			worst := 0.0
			lo, hi := math.Inf(1), math.Inf(-1)
			for v := range w {
				d := math.Abs(float64(g[v]) - float64(w[v]))
				if math.IsNaN(d) {
					d = math.Inf(1)
				}
				worst = max(worst, d)
				r.add(d)
				lo, hi = min(lo, float64(w[v])), max(hi, float64(w[v]))
			}
			ce.MaxErr = append(ce.MaxErr, worst)
			ce.Range = append(ce.Range, hi-lo)
			ce.Gap = append(ce.Gap, topGap(w))
			ce.ArgmaxSame = append(ce.ArgmaxSame, octlm.Argmax(g) == octlm.Argmax(w))
		}
		r.Cases = append(r.Cases, ce)
	}
	return r, nil
}

func (r *ParityResult) add(d float64) {
	r.Logits++
	if d == 0 {
		r.Zeros++
		return
	}
	i := int(math.Floor((math.Log10(d) - histLo) * binsPerDecade))
	r.Bins[min(max(i, 0), len(r.Bins)-1)]++
}

// topGap is the top-1 minus top-2 logit.
func topGap(row []float32) float64 {
	a, b := math.Inf(-1), math.Inf(-1)
	for _, v := range row {
		x := float64(v)
		if x > a {
			a, b = x, a
		} else if x > b {
			b = x
		}
	}
	return a - b
}

// Verdict is the protocol's one-line summary (PASS or FAIL).
func (r *ParityResult) Verdict() string { return r.Report.Verdict() }

// Err is the gate's error, nil when every comparison passed.
func (r *ParityResult) Err() error { return r.Report.Err() }

// Table is the protocol's per-case table: one row per case and path.
func (r *ParityResult) Table() Table {
	t := Table{Name: "04-parity", Caption: fmt.Sprintf("logit parity, %s on %s, float32, gate %g: %s", r.Label, r.Backend, parity.Tolerance, r.Verdict()),
		Header: []string{"case", "path", "positions", "max |Δlogit|", "mean |Δlogit|", "argmax", "verdict"}}
	for _, row := range r.Report.Rows {
		verdict := "PASS"
		if row.Failed() {
			verdict = "FAIL"
		}
		t.Rows = append(t.Rows, []string{strconv.Itoa(row.Case), row.Path, strconv.Itoa(row.Stats.Positions),
			fmt.Sprintf("%.2e", row.Stats.MaxAbsoluteError), fmt.Sprintf("%.2e", row.Stats.MeanAbsoluteError),
			fmt.Sprintf("%d/%d", row.Stats.ArgmaxMatches, row.Stats.Positions), verdict})
	}
	return t
}

// Histogram draws the distribution of |Δlogit| over every logit of every case (full path) on a log
// axis, with the gate.
func (r *ParityResult) Histogram() Figure {
	s := series{Label: "", Kind: binSeries, Color: palette[0]}
	worst := 0.0
	for _, c := range r.Cases {
		for _, e := range c.MaxErr {
			worst = max(worst, e)
		}
	}
	for i := range r.Bins {
		s.X = append(s.X, math.Pow(10, histLo+float64(i)/binsPerDecade))
		s.Y = append(s.Y, 100*float64(r.Bins[i])/float64(max(1, r.Logits)))
	}
	s.X = append(s.X, math.Pow(10, histHi))
	title := "Distribution of |Δlogit| against the float32 reference: " + r.Label
	c := chart{Title: title, Width: 760, Series: []series{s},
		X: axis{Label: "|Δlogit| (log scale, 4 bins per decade)", Log: true, Min: math.Pow(10, histLo), Max: math.Pow(10, histHi)},
		Y: axis{Label: "share of logits (%)"},
		Lines: []refLine{{Label: "gate 1e-3", Value: parity.Tolerance, Vertical: true},
			{Label: fmt.Sprintf("worst %.1e", worst), Value: worst, Vertical: true, Color: "#555"}},
		Note: fmt.Sprintf("%s logits (every position × vocabulary entry of %d cases, full path); %s (%.1f%%) are exactly equal",
			units.Commas(r.Logits), len(r.Cases), units.Commas(r.Zeros), 100*float64(r.Zeros)/float64(max(1, r.Logits)))}
	return Figure{Name: "04-error-histogram", Title: title, SVG: c.render()}
}

// PerPosition draws each case's maximum |Δlogit| at every position, with the gate. Longer cases
// are drawn first, so a short case's few points lie on top of them, with larger markers.
func (r *ParityResult) PerPosition() Figure {
	all := make([]series, len(r.Cases))
	for i, c := range r.Cases {
		s := series{Label: fmt.Sprintf("case %d (%d pos)", c.Index, c.Positions), Kind: lineSeries, Color: palette[i%len(palette)]}
		if c.Positions > 64 {
			s.Kind = stepSeries
		}
		for p, e := range c.MaxErr {
			s.X, s.Y = append(s.X, float64(p)), append(s.Y, e)
		}
		all[i] = s
	}
	// Draw order: longest first. The legend keeps the cases' order.
	order := make([]int, len(all))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return len(all[b].X) - len(all[a].X) })
	drawn := make([]series, len(all))
	legend := make([]int, len(all)) // legend[j]: where case j is drawn
	for i, j := range order {
		drawn[i] = all[j]
		legend[j] = i
		if len(all[j].X) <= 16 {
			drawn[i].Marker = 4
		}
	}
	title := "Maximum |Δlogit| per position: " + r.Label
	c := chart{Title: title, Width: 760, Series: drawn, Legend: legend, X: axis{Label: "position", Tight: true}, Y: axis{Label: "max over the vocabulary of |Δlogit|", Log: true},
		Lines: []refLine{{Label: "gate 1e-3", Value: parity.Tolerance}}}
	return Figure{Name: "04-per-position", Title: title, SVG: c.render()}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ranges returns per case the median logit range, the smallest top-2 gap and the worst error.
func (c CaseErrors) summary() (medRange, minGap, worst float64, same int) {
	minGap = math.Inf(1)
	for p := range c.MaxErr {
		worst = max(worst, c.MaxErr[p])
		minGap = min(minGap, c.Gap[p])
		if c.ArgmaxSame[p] {
			same++
		}
	}
	return median(c.Range), minGap, worst, same
}

// ArgmaxTable is the top-token agreement per case: how many positions pick the reference's top
// token, and the smallest gap between the reference's top two logits, which an error must reach
// half of to flip a top token.
func (r *ParityResult) ArgmaxTable() Table {
	t := Table{Name: "04-argmax", Caption: "top-token agreement (full path), " + r.Label,
		Header: []string{"case", "positions", "same top token", "smallest top-2 gap", "max |Δlogit|", "gap ÷ (2 · max error)"}}
	for _, c := range r.Cases {
		_, gap, worst, same := c.summary()
		t.Rows = append(t.Rows, []string{strconv.Itoa(c.Index), strconv.Itoa(c.Positions), fmt.Sprintf("%d/%d", same, c.Positions),
			fmt.Sprintf("%.3g", gap), fmt.Sprintf("%.2e", worst), fmt.Sprintf("%.0f", gap/(2*worst))})
	}
	return t
}

// RangeTable is the evidence for the 1e-3 gate: per case, the median spread of the reference's
// logits at a position (the scale a mapping bug moves logits by) and the measured worst error,
// with the gate's headroom on both sides.
func (r *ParityResult) RangeTable() Table {
	t := Table{Name: "04-logit-range", Caption: "why 1e-3: logit scale against measured error, " + r.Label,
		Header: []string{"case", "positions", "median max−min logit", "max |Δlogit|", "range ÷ gate", "gate ÷ max error"}}
	for _, c := range r.Cases {
		mr, _, worst, _ := c.summary()
		t.Rows = append(t.Rows, []string{strconv.Itoa(c.Index), strconv.Itoa(c.Positions), fmt.Sprintf("%.1f", mr),
			fmt.Sprintf("%.2e", worst), fmt.Sprintf("%.0f", mr/parity.Tolerance), fmt.Sprintf("%.0f", parity.Tolerance/worst)})
	}
	return t
}

// Save writes the result to path, so that the cells of a notebook (each a fresh program) draw
// from one measurement.
func (r *ParityResult) Save(path string) error {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(r); err != nil {
		return fmt.Errorf("figures: saving the parity result: %w", err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("figures: %w", err)
	}
	return nil
}

// LoadParityResult reads a result Save wrote.
func LoadParityResult(path string) (*ParityResult, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("figures: %w (run the cell that measures parity first)", err)
	}
	r := &ParityResult{}
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(r); err != nil {
		return nil, fmt.Errorf("figures: %s: %w", path, err)
	}
	return r, nil
}

// RangeFigure draws per case the median max−min logit range and the smallest top-2 gap against the
// measured maximum error, on one log axis with the gate between them.
func (r *ParityResult) RangeFigure() Figure {
	var cats []string
	rng := series{Label: "median max−min logit", Kind: labelledBars, Format: shortNumber}
	gap := series{Label: "smallest top-2 gap", Kind: labelledBars, Format: shortNumber}
	errS := series{Label: "max |Δlogit| (measured)", Kind: labelledBars, Format: shortNumber}
	for i, c := range r.Cases {
		cats = append(cats, fmt.Sprintf("case %d · %d pos", c.Index, c.Positions))
		mr, g, worst, _ := c.summary()
		rng.X, rng.Y = append(rng.X, float64(i)), append(rng.Y, mr)
		gap.X, gap.Y = append(gap.X, float64(i)), append(gap.Y, g)
		errS.X, errS.Y = append(errS.X, float64(i)), append(errS.Y, worst)
	}
	title := "Logit scale against measured error: " + r.Label
	c := chart{Title: title, Width: 820, Height: 380, Categories: cats, Series: []series{rng, gap, errS},
		X: axis{Label: "reference case"}, Y: axis{Label: "logits (log scale)", Log: true},
		Lines: []refLine{{Label: "gate 1e-3", Value: parity.Tolerance}},
		Note:  "a wrong mapping moves logits on the scale of their range; float32 rounding stays far below the gate"}
	return Figure{Name: "04-logit-range", Title: title, SVG: c.render()}
}
