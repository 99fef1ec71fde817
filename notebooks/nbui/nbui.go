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
	"fmt"
	"html"
	"strconv"
	"strings"

	"github.com/janpfeifer/gonb/gonbui"
	"github.com/janpfeifer/gonb/gonbui/protocol"
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

// SVG shows an SVG document as image/svg+xml.
func SVG(svg string) {
	if !gonbui.IsNotebook {
		return
	}
	gonbui.SendData(&protocol.DisplayData{Data: map[protocol.MIMEType]any{protocol.MIMEImageSVG: svg}})
	sync()
}

// PNG shows a PNG image given as the bytes of a PNG file.
func PNG(png []byte) { gonbui.DisplayPNG(png); sync() }

// Table shows an HTML table; see TableHTML.
func Table(caption string, header []string, rows [][]string) { HTML(TableHTML(caption, header, rows)) }

// TableHTML returns an HTML table with an optional caption, one header row and the given rows.
// Every cell is HTML-escaped; cells that parse as numbers are right-aligned. A row shorter than the
// header is padded with empty cells; a longer one keeps its extra cells.
func TableHTML(caption string, header []string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("<table>")
	if caption != "" {
		fmt.Fprintf(&b, "<caption>%s</caption>", html.EscapeString(caption))
	}
	if len(header) > 0 {
		b.WriteString("<thead><tr>")
		for _, h := range header {
			fmt.Fprintf(&b, "<th>%s</th>", html.EscapeString(h))
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
			if isNumber(cell) {
				fmt.Fprintf(&b, `<td style="text-align:right">%s</td>`, html.EscapeString(cell))
			} else {
				fmt.Fprintf(&b, "<td>%s</td>", html.EscapeString(cell))
			}
		}
		b.WriteString("</tr>")
	}
	b.WriteString("</tbody></table>")
	return b.String()
}

// isNumber reports whether s is a number as strconv reads one (3, -0.5, 3.6e-05, NaN, +Inf), or
// a percentage such as 99.5%.
func isNumber(s string) bool {
	s = strings.TrimSuffix(strings.TrimSpace(s), "%")
	if s == "" {
		return false
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}
