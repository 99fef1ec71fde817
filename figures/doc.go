// Package figures computes the figures and tables of octlm's notebooks from the project's own
// packages: the bundled checkpoint's bytes per tensor (00-setup), the safetensors header
// anatomy and its strict checks (01-loading), RoPE's channel pairing and what the wrong one costs
// (02-rope), tokens, chat prompts, generation speed and half-precision tokens (03-generation),
// the logit parity protocol's error statistics (04-parity), and Qwen3.5's hybrid stack, its cache
// growth against Qwen3's and the layer-by-layer trace (05-qwen35), a fine-tuning run's loss curve
// and the LoRA training arithmetic against PyTorch's (06-finetune), lm-eval task results, their
// agreement with lm-eval's own numbers and the half-precision KL-divergence drift (07-eval).
//
// Every figure is a function returning a Figure (SVG bytes, drawn by hand: no plotting library,
// no font files) and/or a Table (caption, header, rows of text). The notebooks call these
// functions and show the results; `octlm figures` calls All and writes the same figures as files,
// so a blog's figures are reproducible from one command without Jupyter.
//
// It knows nothing of Jupyter or gonb (the notebooks show the results through package nbui), and
// it draws only what the packages loader, octlm, parity and tokenizer compute: no number in a
// figure is typed in by hand.
package figures

import (
	"fmt"
	"strings"
)

// Figure is one SVG figure.
type Figure struct {
	Name  string // file name without extension, e.g. "01-header"
	Title string
	SVG   []byte // a complete image/svg+xml document
}

// Table is one table of text cells.
type Table struct {
	Name    string // file name without extension, e.g. "01-corruptions"
	Caption string
	Header  []string
	Rows    [][]string
}

// Markdown writes the table as a GitHub-flavoured Markdown table, caption first.
func (t Table) Markdown() string {
	var b strings.Builder
	if t.Caption != "" {
		fmt.Fprintf(&b, "%s\n\n", t.Caption)
	}
	cell := func(s string) string {
		s = strings.ReplaceAll(s, "|", `\|`)
		return strings.ReplaceAll(s, "\n", " ")
	}
	row := func(cells []string) {
		b.WriteString("|")
		for i := range max(len(cells), len(t.Header)) {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			fmt.Fprintf(&b, " %s |", cell(c))
		}
		b.WriteString("\n")
	}
	row(t.Header)
	b.WriteString("|")
	for range t.Header {
		b.WriteString(" --- |")
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		row(r)
	}
	return b.String()
}

// Snippet is an HTML fragment that is neither a table nor a figure: text with coloured tokens.
type Snippet struct {
	Name  string // file name without extension, e.g. "03-tokens"
	Title string
	HTML  string
}

// Page returns the snippet as a standalone HTML page.
func (s Snippet) Page() string {
	return fmt.Sprintf("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title></head>\n<body style=\"font-family:sans-serif\">\n<h3>%s</h3>\n%s\n</body></html>\n",
		esc(s.Title), esc(s.Title), s.HTML)
}
