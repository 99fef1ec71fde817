package figures

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// The figures are plain SVG written by hand: no font files, no plotting library, and the same bytes
// on every machine. Text uses the viewer's sans-serif font.

// palette are the series colours, in order (Tableau 10).
var palette = []string{"#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b", "#9d755d", "#ff9da6", "#bab0ac"}

// seriesKind is how a series is drawn.
type seriesKind int

const (
	lineSeries   seriesKind = iota // a polyline with small markers
	pointSeries                    // markers only
	barSeries                      // one bar per category (categorical x), grouped with the other bar series
	binSeries                      // histogram: bar i spans X[i]..X[i+1] with height Y[i]
	stepSeries                     // a line without markers (dense data)
	labelledBars                   // barSeries with the value printed above each bar
)

// series is one set of values of a chart.
type series struct {
	Label string
	Color string // default: palette by position
	Kind  seriesKind
	X, Y  []float64
	// Format prints a value above a labelled bar.
	Format func(float64) string
	// Marker is the radius of a point's marker; 0 is 2.5.
	Marker float64
}

// refLine is a horizontal (Y) or vertical (X) reference line with a label, e.g. the tolerance.
type refLine struct {
	Label    string
	Value    float64
	Vertical bool
	Color    string
}

// axis is one axis of a chart. A zero range is computed from the data.
type axis struct {
	Label    string
	Log      bool
	Min, Max float64
	// Tight ends a linear axis at the data's largest value instead of the next round step, for
	// counts such as token or position indices (31 tokens: 0 to 31, not 0 to 40).
	Tight bool
}

// chart is a 2-D plot: line, point, bar and histogram series on linear or log axes, with
// reference lines and a legend.
type chart struct {
	Title      string
	Width      float64 // default 640
	Height     float64 // default 360
	X, Y       axis
	Categories []string // categorical x axis (bar series): one group per category
	Legend     []int    // the series the legend lists, in order (indices into Series); nil: all in order
	Series     []series
	Lines      []refLine
	Note       string // a line of small text under the plot
}

// plot area margins
const (
	marginLeft   = 72
	marginRight  = 24
	marginTop    = 36
	marginBottom = 56
	legendWidth  = 170
)

// scale maps data values to pixels along one axis.
type scale struct {
	lo, hi     float64 // data range (log10 of it for log axes)
	log        bool
	from, to   float64 // pixel range
	categories int
}

func (s scale) at(v float64) float64 {
	if s.log {
		if v <= 0 {
			v = math.Pow(10, s.lo)
		}
		v = math.Log10(v)
	}
	f := (v - s.lo) / (s.hi - s.lo)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		f = 0
	}
	f = min(max(f, -0.02), 1.02) // clip just outside the frame
	return s.from + f*(s.to-s.from)
}

// dataRange returns the finite range of values (positive ones only for log axes).
func dataRange(vals []float64, log bool) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) || (log && v <= 0) {
			continue
		}
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi, lo <= hi
}

// resolve fixes an axis range: explicit bounds win; otherwise the data's range, widened to whole
// decades (log) or nice steps (linear), and to a non-empty span.
func (a axis) resolve(vals []float64) (lo, hi float64) {
	lo, hi = a.Min, a.Max
	if lo != 0 || hi != 0 {
		if a.Log {
			return math.Log10(lo), math.Log10(hi)
		}
		return lo, hi
	}
	dlo, dhi, ok := dataRange(vals, a.Log)
	if a.Log {
		if !ok {
			return -1, 1
		}
		// A third of a decade of room on each side, so no bar or line sits on the frame.
		lo, hi = math.Floor(math.Log10(dlo)-0.3), math.Ceil(math.Log10(dhi)+0.3)
		if hi <= lo {
			hi = lo + 1
		}
		return lo, hi
	}
	if !ok {
		return 0, 1
	}
	dlo = min(dlo, 0) // linear axes start at zero (counts, shares, sizes)
	if dhi <= dlo {
		dhi = dlo + 1
	}
	if a.Tight {
		return dlo, dhi
	}
	step := niceStep((dhi - dlo) / 5)
	return math.Floor(dlo/step) * step, math.Ceil(dhi/step) * step
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x*0.999 {
			return m * p
		}
	}
	return 10 * p
}

// tick is one labelled position on an axis, in data units.
type tick struct {
	v     float64
	label string
}

// ticks returns an axis's labelled positions, every label in one format: plain numbers with the
// same decimals (0.0, 0.5, 1.0), or, where plain numbers would be too long, powers of ten (log axes:
// 10⁻⁸, 10⁻⁶, …) or scientific notation (linear axes: 2.0e-04).
func ticks(lo, hi float64, log bool) []tick {
	var out []tick
	if log {
		n := int(hi - lo)
		every := 1
		for n/every > 8 {
			every++
		}
		var exps []int
		for e := int(math.Ceil(lo)); e <= int(math.Floor(hi)); e++ {
			if (e-int(math.Ceil(lo)))%every == 0 {
				exps = append(exps, e)
			}
		}
		plain := true
		for _, e := range exps {
			plain = plain && e >= -2 && e <= 4
		}
		for _, e := range exps {
			label := powerLabel(e)
			if plain {
				label = strconv.FormatFloat(math.Pow(10, float64(e)), 'f', -1, 64)
			}
			out = append(out, tick{math.Pow(10, float64(e)), label})
		}
		return out
	}
	step := niceStep((hi - lo) / 5)
	var vals []float64
	scientific := false
	for v := math.Ceil(lo/step-1e-9) * step; v <= hi+step*1e-9; v += step {
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		vals = append(vals, v)
		scientific = scientific || math.Abs(v) >= 1e6 || (v != 0 && math.Abs(v) < 1e-3)
	}
	decimals := max(0, -int(math.Floor(math.Log10(step)+1e-9)))
	for _, v := range vals {
		label := strconv.FormatFloat(v, 'f', decimals, 64)
		if scientific {
			label = strconv.FormatFloat(v, 'e', 1, 64)
		}
		out = append(out, tick{v, label})
	}
	return out
}

// powerLabel writes 10^e with a superscript exponent: 10⁻⁵, 10³.
func powerLabel(e int) string {
	sup := strings.NewReplacer("-", "⁻", "0", "⁰", "1", "¹", "2", "²", "3", "³", "4", "⁴", "5", "⁵", "6", "⁶", "7", "⁷", "8", "⁸", "9", "⁹")
	return "10" + sup.Replace(strconv.Itoa(e))
}

// esc escapes text for SVG.
func esc(s string) string { return html.EscapeString(s) }

// svgOpen starts an SVG document of the given size with a title and a white background.
func svgOpen(b *strings.Builder, w, h float64, title string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="11">`, w, h, w, h)
	fmt.Fprintf(b, "<title>%s</title>", esc(title))
	fmt.Fprintf(b, `<rect width="%g" height="%g" fill="white"/>`, w, h)
	if title != "" {
		fmt.Fprintf(b, `<text class="title" x="%g" y="20" text-anchor="middle" font-size="13" font-weight="bold">%s</text>`, w/2, esc(title))
	}
}

// plotArea is where a chart draws: its size, the right and bottom edges of the plot frame (the
// left and top are the margins) and the scales from data to pixels.
type plotArea struct {
	w, h          float64
	right, bottom float64
	x, y          scale
}

// render draws the chart: axes, series, reference lines, legend.
func (c chart) render() []byte {
	p := c.layout()
	var b strings.Builder
	svgOpen(&b, p.w, p.h, c.Title)
	c.writeAxes(&b, p)
	c.writeSeries(&b, p)
	c.writeRefLines(&b, p)
	c.writeLegend(&b, p)
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// legendEntries counts the labelled series, those the legend lists.
func (c chart) legendEntries() int {
	n := 0
	for _, s := range c.Series {
		if s.Label != "" {
			n++
		}
	}
	return n
}

// layout sizes the chart (room for the legend and the note) and fits the axes to the series and
// the reference lines.
func (c chart) layout() plotArea {
	p := plotArea{w: c.Width, h: c.Height}
	if p.w == 0 {
		p.w = 640
	}
	if p.h == 0 {
		p.h = 360
	}
	p.right = p.w - marginRight
	if c.legendEntries() > 0 {
		p.right -= legendWidth
	}
	p.bottom = p.h - marginBottom
	if c.Note != "" {
		p.bottom -= 14
	}
	var xs, ys []float64
	for _, s := range c.Series {
		xs = append(xs, s.X...)
		ys = append(ys, s.Y...)
	}
	for _, l := range c.Lines {
		if l.Vertical {
			xs = append(xs, l.Value)
		} else {
			ys = append(ys, l.Value)
		}
	}
	p.x = scale{from: marginLeft, to: p.right, log: c.X.Log}
	if len(c.Categories) > 0 {
		p.x.lo, p.x.hi, p.x.categories = 0, float64(len(c.Categories)), len(c.Categories)
	} else {
		p.x.lo, p.x.hi = c.X.resolve(xs)
	}
	p.y = scale{from: p.bottom, to: marginTop, log: c.Y.Log}
	p.y.lo, p.y.hi = c.Y.resolve(ys)
	return p
}

// writeAxes draws the grid, the ticks and the frame, then the axis labels and the note.
func (c chart) writeAxes(b *strings.Builder, p plotArea) {
	b.WriteString(`<g class="axes" stroke="#888" stroke-width="1">`)
	for _, t := range ticks(p.y.lo, p.y.hi, p.y.log) {
		y := p.y.at(t.v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`, float64(marginLeft), y, p.right, y)
		fmt.Fprintf(b, `<text class="tick y" x="%d" y="%.1f" text-anchor="end" stroke="none" fill="#333">%s</text>`, marginLeft-6, y+4, esc(t.label))
	}
	if p.x.categories > 0 {
		for i, cat := range c.Categories {
			x := p.x.at(float64(i) + 0.5)
			fmt.Fprintf(b, `<text class="tick x" x="%.1f" y="%.1f" text-anchor="middle" stroke="none" fill="#333">%s</text>`, x, p.bottom+16, esc(cat))
		}
	} else {
		for _, t := range ticks(p.x.lo, p.x.hi, p.x.log) {
			x := p.x.at(t.v)
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#f0f0f0"/>`, x, float64(marginTop), x, p.bottom)
			fmt.Fprintf(b, `<text class="tick x" x="%.1f" y="%.1f" text-anchor="middle" stroke="none" fill="#333">%s</text>`, x, p.bottom+16, esc(t.label))
		}
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="none"/>`, marginLeft, marginTop, p.right-marginLeft, p.bottom-marginTop)
	b.WriteString("</g>")
	fmt.Fprintf(b, `<text class="axis-label x" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, (marginLeft+p.right)/2, p.bottom+36, esc(c.X.Label))
	fmt.Fprintf(b, `<text class="axis-label y" transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">%s</text>`, (marginTop+p.bottom)/2, esc(c.Y.Label))
	if c.Note != "" {
		fmt.Fprintf(b, `<text class="note" x="%d" y="%.1f" font-size="10" fill="#555">%s</text>`, marginLeft, p.h-8, esc(c.Note))
	}
}

// seriesColor is series i's colour: its own, or the palette's by position.
func seriesColor(i int, s series) string {
	if s.Color != "" {
		return s.Color
	}
	return palette[i%len(palette)]
}

// writeSeries draws each series in a group of its own; bar series share each category's
// width, side by side in their order.
func (c chart) writeSeries(b *strings.Builder, p plotArea) {
	bars := 0
	for _, s := range c.Series {
		if s.Kind == barSeries || s.Kind == labelledBars {
			bars++
		}
	}
	bar := 0
	for i, s := range c.Series {
		color := seriesColor(i, s)
		fmt.Fprintf(b, `<g class="series" data-label="%s" fill="%s" stroke="%s">`, esc(s.Label), color, color)
		switch s.Kind {
		case lineSeries, stepSeries, pointSeries:
			writeLine(b, p, s)
		case barSeries, labelledBars:
			c.writeBars(b, p, s, bar, bars)
			bar++
		case binSeries:
			writeBins(b, p, s)
		}
		b.WriteString("</g>")
	}
}

// writeLine draws a line, step or point series: a polyline (not for points) and markers (not
// for steps, nor past 200 points); non-finite values are left out.
func writeLine(b *strings.Builder, p plotArea, s series) {
	var pts []string
	for j := range s.X {
		if math.IsNaN(s.Y[j]) || math.IsInf(s.Y[j], 0) {
			continue
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", p.x.at(s.X[j]), p.y.at(s.Y[j])))
	}
	if s.Kind != pointSeries && len(pts) > 1 {
		fmt.Fprintf(b, `<polyline fill="none" stroke-width="1.5" points="%s"/>`, strings.Join(pts, " "))
	}
	if s.Kind != stepSeries && len(pts) <= 200 {
		for _, pt := range pts {
			x, y, _ := strings.Cut(pt, ",")
			r := s.Marker
			if r == 0 {
				r = 2.5
			}
			fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="%g" stroke="none"/>`, x, y, r)
		}
	}
}

// writeBars draws bar series number bar of bars: one bar per category, placed beside the bars
// of the series before it, its value printed above for labelled bars.
func (c chart) writeBars(b *strings.Builder, p plotArea, s series, bar, bars int) {
	groupW := (p.right - marginLeft) / float64(max(1, len(c.Categories)))
	bw := groupW * 0.8 / float64(bars)
	base := p.y.at(math.Pow(10, p.y.lo))
	if !p.y.log {
		base = p.y.at(0)
	}
	for j, v := range s.Y {
		if math.IsNaN(v) {
			continue
		}
		x := marginLeft + groupW*(float64(int(s.X[j]))+0.1) + bw*float64(bar)
		y := p.y.at(v)
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" stroke="none"><title>%s</title></rect>`,
			x, min(y, base), bw, math.Abs(base-y), esc(fmt.Sprintf("%s: %g", s.Label, v)))
		if s.Kind == labelledBars && s.Format != nil {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="9" stroke="none" fill="#333">%s</text>`,
				x+bw/2, min(y, base)-3, esc(s.Format(v)))
		}
	}
}

// writeBins draws a histogram: bar i spans X[i]..X[i+1]; empty bins are left out.
func writeBins(b *strings.Builder, p plotArea, s series) {
	base := p.y.at(0)
	if p.y.log {
		base = p.y.at(math.Pow(10, p.y.lo))
	}
	for j, v := range s.Y {
		if j+1 >= len(s.X) || v == 0 {
			continue
		}
		x0, x1 := p.x.at(s.X[j]), p.x.at(s.X[j+1])
		y := p.y.at(v)
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" stroke="white" stroke-width="0.5"/>`, x0, y, x1-x0, base-y)
	}
}

// writeRefLines draws the reference lines, dashed across the plot, each with its label.
func (c chart) writeRefLines(b *strings.Builder, p plotArea) {
	for _, l := range c.Lines {
		color := l.Color
		if color == "" {
			color = "#c00"
		}
		fmt.Fprintf(b, `<g class="refline" data-label="%s" stroke="%s" fill="%s">`, esc(l.Label), color, color)
		if l.Vertical {
			x := p.x.at(l.Value)
			fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke-dasharray="5 3" stroke-width="1.5"/>`, x, marginTop, x, p.bottom)
			fmt.Fprintf(b, `<text x="%.1f" y="%d" stroke="white" stroke-width="3" paint-order="stroke" font-size="10">%s</text>`, x+4, marginTop+12, esc(l.Label))
		} else {
			y := p.y.at(l.Value)
			fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke-dasharray="5 3" stroke-width="1.5"/>`, marginLeft, y, p.right, y)
			fmt.Fprintf(b, `<text x="%d" y="%.1f" stroke="white" stroke-width="3" paint-order="stroke" font-size="10">%s</text>`, marginLeft+4, y-4, esc(l.Label))
		}
		b.WriteString("</g>")
	}
}

// writeLegend lists the labelled series (those in c.Legend, or all), right of the plot.
func (c chart) writeLegend(b *strings.Builder, p plotArea) {
	if c.legendEntries() == 0 {
		return
	}
	b.WriteString(`<g class="legend">`)
	y := float64(marginTop + 8)
	listed := c.Legend
	if listed == nil {
		for i := range c.Series {
			listed = append(listed, i)
		}
	}
	for _, i := range listed {
		s := c.Series[i]
		if s.Label == "" {
			continue
		}
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="12" height="10" fill="%s"/>`, p.right+12, y-9, seriesColor(i, s))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`, p.right+30, y, esc(s.Label))
		y += 16
	}
	b.WriteString("</g>")
}

// shortNumber prints a value above a bar in few characters: 23, 1.8, 0.046, 0.006, 3.6e-05.
func shortNumber(x float64) string {
	if x != 0 && (math.Abs(x) < 1e-3 || math.Abs(x) >= 1e4) {
		return strconv.FormatFloat(x, 'e', 1, 64)
	}
	return strconv.FormatFloat(x, 'g', 2, 64)
}
