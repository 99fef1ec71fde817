// Package nbui is what octlm's notebooks share for showing results in Jupyter: HTML tables, SVG and
// PNG figures and Markdown, sent through gonb's gonbui. It knows nothing of models or of what a
// table or a figure says; outside a notebook (no gonb kernel) its display functions do nothing.
//
// It also keeps github.com/janpfeifer/gonb a direct requirement of octlm's go.mod: a notebook
// cell compiles in gonb's scratch module, which takes its versions from octlm's go.mod
// (notebooks/gonb_setup.sh), and a module a cell imports that octlm's go.mod does not list sends
// gonb's `go get` to the module proxy for @latest.
package nbui

import (
	"encoding/base64"
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/janpfeifer/gonb/gonbui"
	"github.com/janpfeifer/gonb/gonbui/protocol"
	"github.com/octlm/octlm/internal/units"
)

// InNotebook reports whether the program runs as a gonb cell, so that display functions show
// something.
func InNotebook() bool { return gonbui.IsNotebook }

// HTML shows an HTML fragment.
func HTML(fragment string) { gonbui.DisplayHTML(fragment); sync() }

// Markdown shows Markdown text.
func Markdown(text string) { gonbui.DisplayMarkdown(text); sync() }

// sync waits until gonb has received what was displayed: a cell's program may exit right
// after its last display, and without it that display can be lost (seen once in four runs).
func sync() {
	if gonbui.IsNotebook {
		gonbui.Sync()
	}
}

// SVG shows an SVG document as a figure that survives export: one output holding the HTML of
// FigureHTML (an <img> with the SVG as a data URI, which Jupyter's HTML export and sanitisers
// keep), the SVG itself as image/svg+xml (which exporters to Markdown write as a file), and its
// title as text/plain.
//
// Inline SVG alone does not survive: nbconvert 6.5's HTML export sanitises an image/svg+xml output
// as if it were HTML and keeps only the <svg> tag and the bare text.
func SVG(svg string) {
	if !gonbui.IsNotebook {
		return
	}
	gonbui.SendData(&protocol.DisplayData{Data: map[protocol.MIMEType]any{
		protocol.MIMETextHTML:  FigureHTML(svg),
		protocol.MIMEImageSVG:  svg,
		protocol.MIMETextPlain: "figure: " + svgTitle(svg),
	}})
	sync()
}

// FigureClass is the class of the <img> FigureHTML writes, by which checks find the figures of an
// exported page.
const FigureClass = "octlm-figure"

// FigureHTML returns an <img> showing the SVG document svg from a base64 data URI, its <title> as
// the alt text, scaled down to the page's width when wider.
func FigureHTML(svg string) string {
	return fmt.Sprintf(`<img class="%s" alt="%s" style="max-width:100%%;height:auto" src="data:image/svg+xml;base64,%s">`,
		FigureClass, html.EscapeString(svgTitle(svg)), base64.StdEncoding.EncodeToString([]byte(svg)))
}

// svgTitle is the text of the document's first <title> element, unescaped, or "" when it has none.
func svgTitle(svg string) string {
	_, rest, ok := strings.Cut(svg, "<title>")
	if !ok {
		return ""
	}
	title, _, ok := strings.Cut(rest, "</title>")
	if !ok {
		return ""
	}
	return html.UnescapeString(title)
}

// PNG shows a PNG image given as the bytes of a PNG file.
func PNG(png []byte) { gonbui.DisplayPNG(png); sync() }

// Table shows an HTML table; see TableHTML.
func Table(caption string, header []string, rows [][]string) { HTML(TableHTML(caption, header, rows)) }

// TableHTML returns an HTML table with an optional caption, one header row and the given rows.
// Every cell is HTML-escaped. A column whose cells are all numbers (empty cells and "—" aside) is
// right-aligned, header included; every other column is left-aligned (Jupyter's style sheet
// right-aligns every cell, text included). Whole numbers of four digits or more get thousands
// separators (106,944). A row shorter than the header is padded with empty cells; a longer one
// keeps its extra cells.
func TableHTML(caption string, header []string, rows [][]string) string {
	width := len(header)
	for _, row := range rows {
		width = max(width, len(row))
	}
	numeric := make([]bool, width)
	for i := range numeric {
		seen, all := false, true
		for _, row := range rows {
			if i >= len(row) || isBlank(row[i]) {
				continue
			}
			seen = true
			all = all && isNumber(row[i])
		}
		numeric[i] = seen && all
	}
	align := func(i int) string {
		if numeric[i] {
			return "right"
		}
		return "left"
	}
	var b strings.Builder
	b.WriteString("<table>")
	if caption != "" {
		fmt.Fprintf(&b, "<caption>%s</caption>", html.EscapeString(caption))
	}
	if len(header) > 0 {
		b.WriteString("<thead><tr>")
		for i, h := range header {
			fmt.Fprintf(&b, `<th style="text-align:%s">%s</th>`, align(i), html.EscapeString(h))
		}
		b.WriteString("</tr></thead>")
	}
	b.WriteString("<tbody>")
	for _, row := range rows {
		b.WriteString("<tr>")
		for i := 0; i < max(len(row), len(header)); i++ {
			cell := ""
			if i < len(row) {
				cell = row[i]
			}
			fmt.Fprintf(&b, `<td style="text-align:%s%s">%s</td>`, align(i), wrapStyle(cell), html.EscapeString(units.GroupDigits(cell)))
		}
		b.WriteString("</tr>")
	}
	b.WriteString("</tbody></table>")
	return b.String()
}

// Cells of up to shortCell characters do not wrap; a longer run without a space (escaped bytes,
// token IDs) may break anywhere, so that it cannot widen its column beyond the page.
const (
	shortCell = 40
	longRun   = 40
)

// wrapStyle is the CSS that keeps a table readable: short cells on one line, long unbroken runs
// broken where needed.
func wrapStyle(cell string) string {
	if utf8.RuneCountInString(cell) <= shortCell {
		return ";white-space:nowrap"
	}
	for _, f := range strings.Fields(cell) {
		if utf8.RuneCountInString(f) > longRun {
			return ";word-break:break-all"
		}
	}
	return ""
}

// isBlank reports whether a cell holds no value: empty, or a dash standing for none.
func isBlank(s string) bool {
	s = strings.TrimSpace(s)
	return s == "" || s == "—" || s == "–" || s == "-"
}

// isNumber reports whether s is a number as strconv reads one (3, -0.5, 3.6e-05, NaN, +Inf), a
// whole number with thousands separators (2,649,597), or a percentage such as 99.5%.
func isNumber(s string) bool {
	s = strings.TrimSuffix(strings.TrimSpace(s), "%")
	if s == "" {
		return false
	}
	if groupedRE.MatchString(s) {
		return true
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// groupedRE matches a whole number written with thousands separators.
var groupedRE = regexp.MustCompile(`^-?[0-9]{1,3}(,[0-9]{3})+$`)
