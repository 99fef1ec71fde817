// Package playground is 02-rope's interactive RoPE playground: position, base (rope_theta), head
// width and pairing under the reader's hand, showing how each channel pair turns and what the
// wrong pairing does to a query·key score as the query moves away from the key.
//
// It comes two ways. HTML is a self-contained HTML+JavaScript fragment (rope.js and ui.js inline, no
// network) that works wherever the page is shown, an exported notebook included: JavaScript
// computes RoPE there, rope.js, checked against octlm's graph by rope.test.mjs. Live drives the
// same drawing from gonb's widgets in a running kernel, with every number computed in Go by
// octlm.InvFreq and octlm.RoPE (the graph's own rotation).
package playground

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"slices"

	"github.com/gomlx/compute"

	"github.com/octlm/octlm/octlm"
)

var (
	//go:embed rope.js
	ropeJS string
	//go:embed ui.js
	uiJS string
)

// Widths are the head widths the playground offers.
var Widths = []int{8, 16, 32, 64, 128}

// Limits of the controls.
const (
	MaxPosition     = 1024
	MinBase         = 1e4
	MaxBase         = 1e6
	basesPerDecade  = 20 // the base slider's steps: 10^(4 + k/20)
	defaultPosition = 16
)

// Settings are the playground's controls.
type Settings struct {
	Position int     `json:"position"` // the query's position (the key sits at 0)
	Base     float64 `json:"base"`     // rope_theta
	HeadDim  int     `json:"dim"`      // channels per head
	Split    bool    `json:"split"`    // split halves (Qwen3); false: neighbours
}

// Default are the settings the playground starts from: Qwen3's base and pairing.
var Default = Settings{Position: defaultPosition, Base: 1e6, HeadDim: 32, Split: true}

// Check reports settings outside the controls' ranges.
func (s Settings) Check() error {
	switch {
	case s.Position < 0 || s.Position > MaxPosition:
		return fmt.Errorf("playground: position %d outside 0..%d", s.Position, MaxPosition)
	case !(s.Base >= MinBase*(1-1e-9) && s.Base <= MaxBase*(1+1e-9)):
		return fmt.Errorf("playground: base %g outside %g..%g", s.Base, float64(MinBase), float64(MaxBase))
	case !slices.Contains(Widths, s.HeadDim):
		return fmt.Errorf("playground: head width %d: want one of %v", s.HeadDim, Widths)
	}
	return nil
}

// HTML returns the playground as a self-contained HTML fragment: a <div id=id> and an inline
// script (rope.js, ui.js) that builds the controls and draws, starting from s. id must be unique
// in the page.
func HTML(id string, s Settings) (string, error) {
	if err := s.Check(); err != nil {
		return "", err
	}
	js, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("playground: %w", err)
	}
	idJS, _ := json.Marshal(id)
	return fmt.Sprintf("<div id=\"%s\" class=\"octlm-playground\"></div>\n<script>\n%s\n%s\nOctlmRopePlayground.mount(document.getElementById(%s), %s);\n</script>\n",
		html.EscapeString(id), ropeJS, uiJS, idJS, js), nil
}

// Data is what the playground draws, as rope.js's compute returns it.
type Data struct {
	Position  int       `json:"position"`
	Base      float64   `json:"base"`
	HeadDim   int       `json:"dim"`
	Split     bool      `json:"split"`
	InvFreq   []float64 `json:"invFreq"`   // θᵢ per pair
	Angles    []float64 `json:"angles"`    // position × θᵢ per pair, in float32
	Pairs     [][2]int  `json:"pairs"`     // the two channels of each pair under the chosen pairing
	Distances []int     `json:"distances"` // query–key distances of the score curve
	Trained   []float64 `json:"trained"`   // q·k per distance under split halves (the pairing the weights learned)
	Chosen    []float64 `json:"chosen"`    // q·k per distance under the chosen pairing
}

// DemoVector is the query (and key) the playground scores: a fixed vector of dim channels, the same
// as rope.js's demoVector.
func DemoVector(dim int) []float32 {
	out := make([]float32, dim)
	for c := range out {
		out[c] = float32(math.Sin(1.3*float64(c)+0.7) + 0.5*math.Cos(0.37*float64(c)))
	}
	return out
}

// Distances are the query–key distances the score curve samples for a query at position p: 0 to
// max(128, ⌈1.25 p⌉), at most 257 whole numbers, as rope.js's distances.
func Distances(p int) []int {
	end := max(128, int(math.Ceil(1.25*float64(p))))
	n := min(end, 256)
	out := make([]int, n+1)
	for i := range out {
		out[i] = int(math.Round(float64(i*end) / float64(n)))
	}
	return out
}

// Pairs lists the two channels of every pair i of a head of dim channels.
func Pairs(dim int, split bool) [][2]int {
	out := make([][2]int, dim/2)
	for i := range out {
		if split {
			out[i] = [2]int{i, i + dim/2}
		} else {
			out[i] = [2]int{2 * i, 2*i + 1}
		}
	}
	return out
}

// Compute computes what the playground draws with octlm's own RoPE on backend: θᵢ from
// octlm.InvFreq, the angles in float32 as the graph multiplies them, and the scores from vectors
// rotated by octlm.RoPE.
func Compute(backend compute.Backend, s Settings) (Data, error) {
	if err := s.Check(); err != nil {
		return Data{}, err
	}
	inv := octlm.InvFreq(s.HeadDim, s.Base)
	d := Data{Position: s.Position, Base: s.Base, HeadDim: s.HeadDim, Split: s.Split,
		Pairs: Pairs(s.HeadDim, s.Split), Distances: Distances(s.Position)}
	for _, f := range inv {
		d.InvFreq = append(d.InvFreq, float64(f))
		d.Angles = append(d.Angles, float64(float32(s.Position)*f))
	}
	var err error
	if d.Trained, err = scores(backend, s.HeadDim, s.Base, true, d.Distances); err != nil {
		return Data{}, err
	}
	if d.Chosen, err = scores(backend, s.HeadDim, s.Base, s.Split, d.Distances); err != nil {
		return Data{}, err
	}
	return d, nil
}

// scores returns R(d)q · R(0)q for each distance d, with q the demo vector and R octlm's RoPE.
func scores(backend compute.Backend, dim int, base float64, split bool, distances []int) ([]float64, error) {
	q := DemoVector(dim)
	x := make([][]float32, len(distances)+1)
	pos := make([]int32, len(distances)+1)
	for i, d := range distances {
		x[i], pos[i] = q, int32(d)
	}
	x[len(distances)] = q // the key, at position 0
	rot, err := octlm.RoPE(backend, x, pos, base, split)
	if err != nil {
		return nil, fmt.Errorf("playground: %w", err)
	}
	key := rot[len(distances)]
	out := make([]float64, len(distances))
	for i := range distances {
		for c, v := range rot[i] {
			out[i] += float64(v) * float64(key[c])
		}
	}
	return out, nil
}
