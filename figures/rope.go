package figures

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/parity"
	"github.com/octlm/octlm/units"
)

// ropeColor shades pair i of n from dark (fast, i = 0) to light (slow).
func ropeColor(i, n int) string {
	f := 0.0
	if n > 1 {
		f = float64(i) / float64(n-1)
	}
	lerp := func(a, b float64) int { return int(math.Round(a + f*(b-a))) }
	// #08306b (dark blue) to #fdae6b (light orange).
	return fmt.Sprintf("#%02x%02x%02x", lerp(0x08, 0xfd), lerp(0x30, 0xae), lerp(0x6b, 0x6b))
}

// RopePartner is the channel that rotates together with channel c in a head of headDim channels:
// c ± headDim/2 with split pairing (Hugging Face's rotate_half, Qwen3), c ± 1 with neighbour
// pairing (the classic decoder). Pair returns the pair's frequency index i (angle p·θᵢ).
func RopePartner(c, headDim int, split bool) (partner, pair int) {
	half := headDim / 2
	if split {
		if c < half {
			return c + half, c
		}
		return c - half, c - half
	}
	if c%2 == 0 {
		return c + 1, c / 2
	}
	return c - 1, c / 2
}

// RopePairs draws which channels of a head of `channels` channels rotate together under each
// pairing: arcs join the two channels of a pair, and colour is the pair's frequency (dark: fast).
func RopePairs(channels int) (Figure, error) {
	if channels < 4 || channels%2 != 0 || channels > 64 {
		return Figure{}, fmt.Errorf("figures: RopePairs: %d channels: want an even number from 4 to 64", channels)
	}
	const w, left = 780.0, 30.0
	cw := (w - 2*left) / float64(channels)
	title := fmt.Sprintf("RoPE channel pairs in a head of %d channels", channels)
	var b strings.Builder
	svgOpen(&b, w, 380, title)
	panel := func(y float64, split bool, label string) {
		fmt.Fprintf(&b, `<g class="panel" data-pairing="%s">`, map[bool]string{true: "split", false: "neighbour"}[split])
		fmt.Fprintf(&b, `<text class="axis-label" x="%g" y="%g" font-weight="bold">%s</text>`, left, y-92, esc(label))
		for c := range channels {
			partner, pair := RopePartner(c, channels, split)
			x := left + float64(c)*cw
			fmt.Fprintf(&b, `<rect class="channel" x="%.1f" y="%g" width="%.1f" height="26" fill="%s" stroke="white"><title>channel %d rotates with %d by p·θ%d</title></rect>`,
				x, y, cw, ropeColor(pair, channels/2), c, partner, pair)
			fmt.Fprintf(&b, `<text x="%.1f" y="%g" text-anchor="middle" font-size="10" fill="white">θ%d</text>`, x+cw/2, y+17, pair)
			fmt.Fprintf(&b, `<text x="%.1f" y="%g" text-anchor="middle" font-size="10">%d</text>`, x+cw/2, y+40, c)
			if partner > c {
				x2 := left + float64(partner)*cw + cw/2
				x1 := x + cw/2
				h := 14.0
				if split {
					h = 16 + 60*float64(pair)/float64(channels/2)
				}
				fmt.Fprintf(&b, `<path class="pair" d="M %.1f %g C %.1f %.1f %.1f %.1f %.1f %g" fill="none" stroke="%s" stroke-width="1.8"/>`,
					x1, y, x1, y-h*1.3, x2, y-h*1.3, x2, y, ropeColor(pair, channels/2))
			}
		}
		b.WriteString("</g>")
	}
	panel(140, true, fmt.Sprintf("split halves (Qwen3, Hugging Face's rotate_half): channel i with i+%d", channels/2))
	panel(310, false, "neighbours (classic decoder): channel 2i with 2i+1")
	fmt.Fprintf(&b, `<text x="%g" y="370" font-size="10" fill="#555">channel index below each box; θᵢ = base^(−2i/d): pair i turns by p·θᵢ at position p, dark pairs fastest</text>`, left)
	b.WriteString("</svg>\n")
	return Figure{Name: "02-rope-pairs", Title: title, SVG: []byte(b.String())}, nil
}

// RopeAngles draws the rotation angle p·θᵢ of a few pairs i at a few positions p, each as a hand
// on a dial, with θ from octlm.InvFreq(headDim, base); the table lists each pair's channels under
// both pairings, θᵢ and its period.
func RopeAngles(headDim int, base float64, pairs, positions []int) (Figure, Table, error) {
	inv := octlm.InvFreq(headDim, base)
	for _, p := range pairs {
		if p < 0 || p >= len(inv) {
			return Figure{}, Table{}, fmt.Errorf("figures: RopeAngles: pair %d outside 0..%d", p, len(inv)-1)
		}
	}
	const cell, left, top = 58.0, 170.0, 58.0
	w := left + cell*float64(len(positions)) + 110
	h := top + cell*float64(len(pairs)) + 30
	title := fmt.Sprintf("RoPE angle p·θᵢ by position (head_dim %d, base %s)", headDim, baseText(base))
	var b strings.Builder
	svgOpen(&b, w, h, title)
	for j, p := range positions {
		fmt.Fprintf(&b, `<text class="tick x" x="%.1f" y="%g" text-anchor="middle">p = %d</text>`, left+cell*(float64(j)+0.5), top-8, p)
	}
	fmt.Fprintf(&b, `<text class="axis-label x" x="%.1f" y="%g" text-anchor="middle">position</text>`, left+cell*float64(len(positions))/2, top-24)
	t := Table{Name: "02-rope-angles", Caption: title,
		Header: []string{"pair i", "split: channels", "neighbour: channels", "θᵢ (rad per position)", "period 2π/θᵢ (positions)"}}
	for r, i := range pairs {
		theta := float64(inv[i])
		cy := top + cell*(float64(r)+0.5)
		fmt.Fprintf(&b, `<g class="series" data-label="pair %d">`, i)
		fmt.Fprintf(&b, `<text x="%g" y="%.1f" text-anchor="end">pair %d: θ = %.3g</text>`, left-10, cy+4, i, theta)
		for j, p := range positions {
			cx := left + cell*(float64(j)+0.5)
			a := math.Mod(float64(p)*theta, 2*math.Pi)
			r := cell*0.5 - 6
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="%.1f" fill="none" stroke="#ccc"/>`, cx, cy, r)
			fmt.Fprintf(&b, `<line class="hand" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5" stroke-linecap="round"><title>p·θ = %.4g rad (mod 2π: %.4g)</title></line>`,
				cx, cy, cx+r*math.Cos(a), cy-r*math.Sin(a), ropeColor(i, len(inv)), float64(p)*theta, a)
		}
		period := 2 * math.Pi / theta
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" fill="#555">turn: %s pos</text></g>`, left+cell*float64(len(positions))+8, cy+4, periodText(period))
		sp, _ := RopePartner(i, headDim, true)
		t.Rows = append(t.Rows, []string{strconv.Itoa(i), fmt.Sprintf("%d, %d", i, sp), fmt.Sprintf("%d, %d", 2*i, 2*i+1),
			strconv.FormatFloat(theta, 'g', 4, 64), periodText(period)})
	}
	b.WriteString("</svg>\n")
	return Figure{Name: "02-rope-angles", Title: title, SVG: []byte(b.String())}, t, nil
}

// baseText writes a RoPE base as a reader reads it: 1,000,000, or 31622.8 when not whole.
func baseText(base float64) string {
	if base == math.Trunc(base) && math.Abs(base) < 1e15 {
		return units.Commas(int64(base))
	}
	return strconv.FormatFloat(base, 'f', 1, 64)
}

// periodText writes a rotation period in positions in one format: three significant digits below
// 1,000 (6.28, 14.9, 199), whole positions with thousands separators above (6,283, 2,650,000).
func periodText(p float64) string {
	if p < 1000 {
		return strconv.FormatFloat(p, 'g', 3, 64)
	}
	return units.Commas(int64(math.Round(p)))
}

// pairingVariant is one way to run the checkpoint's weights.
type pairingVariant struct {
	label  string
	mutate func(*octlm.Config)
}

// WrongPairing runs every reference case through the full path three ways, the checkpoint's own
// configuration, the classic neighbour pairing (RopeSplit off) and, when the checkpoint's
// rope_theta differs from it, the classic base 10,000, and draws each case's maximum absolute
// logit error against the float32 reference on a log scale, with the 1e-3 gate.
func WrongPairing(src *Source) (Figure, Table, error) {
	ref, err := src.ReadReference()
	if err != nil {
		return Figure{}, Table{}, err
	}
	cfg, err := src.Qwen3Config()
	if err != nil {
		return Figure{}, Table{}, err
	}
	variants := []pairingVariant{{"split halves (correct)", nil}}
	if cfg.RopeSplit {
		variants = append(variants, pairingVariant{"neighbours (RopeSplit off)", func(c *octlm.Config) { c.RopeSplit = false }})
	} else {
		variants = append(variants, pairingVariant{"split halves (RopeSplit on)", func(c *octlm.Config) { c.RopeSplit = true }})
		variants[0].label = "neighbours (correct)"
	}
	if cfg.Base() != octlm.DefaultRopeBase {
		variants = append(variants, pairingVariant{"base 10,000 (RopeBase off)", func(c *octlm.Config) { c.RopeBase = 0 }})
	}
	var cats []string
	for _, c := range ref.Cases {
		cats = append(cats, fmt.Sprintf("case %d · %d pos", c.Index, c.Positions()))
	}
	t := Table{Name: "02-wrong-pairing", Caption: "maximum absolute logit error against the float32 reference, full path, " + src.Label,
		Header: []string{"configuration", "case", "positions", "max |Δlogit|", "argmax agreement", "gate (1e-3)"}}
	var all []series
	for _, v := range variants {
		m, err := src.Load(octlm.Float32, v.mutate)
		if err != nil {
			return Figure{}, Table{}, err
		}
		s := series{Label: v.label, Kind: labelledBars, Format: shortNumber}
		for i, c := range ref.Cases {
			got, err := parity.FullPath(m, c.IDs)
			if err != nil {
				m.Close()
				return Figure{}, Table{}, err
			}
			want, err := c.Logits()
			if err != nil {
				m.Close()
				return Figure{}, Table{}, err
			}
			st, err := parity.Compare(got, want)
			if err != nil {
				m.Close()
				return Figure{}, Table{}, err
			}
			s.X, s.Y = append(s.X, float64(i)), append(s.Y, st.MaxAbsoluteError)
			verdict := "pass"
			if (parity.Row{Stats: st}).Failed() {
				verdict = "FAIL"
			}
			t.Rows = append(t.Rows, []string{v.label, strconv.Itoa(c.Index), strconv.Itoa(st.Positions), fmt.Sprintf("%.2e", st.MaxAbsoluteError),
				fmt.Sprintf("%d/%d", st.ArgmaxMatches, st.Positions), verdict})
		}
		m.Close()
		all = append(all, s)
	}
	title := "Loading Qwen3 weights with the wrong RoPE configuration: " + src.Label
	c := chart{Title: title, Width: 820, Height: 380, Categories: cats, Series: all,
		X: axis{Label: "reference case"}, Y: axis{Label: "max |Δlogit| vs float32 reference", Log: true},
		Lines: []refLine{{Label: "gate 1e-3", Value: parity.Tolerance}},
		Note:  "position 0 is rotated by angle 0, so a one-position case cannot tell the pairings apart"}
	return Figure{Name: "02-wrong-pairing", Title: title, SVG: c.render()}, t, nil
}
