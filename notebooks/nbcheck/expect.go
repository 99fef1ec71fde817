package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// expectation is one line of a notebook's expectations file (NAME.expect beside NAME.ipynb):
//
//	# comment
//	table [N]         at least N (default 1) outputs are HTML tables
//	svg [N]           at least N outputs are SVG figures (image/svg+xml, or HTML holding <svg>)
//	figure [N]        at least N outputs are figures that survive export to HTML: an <img> with an
//	                  SVG data URI (nbui.SVG); `nbcheck run` also finds each in the exported page
//	png [N]           at least N outputs are PNG images (image/png, or HTML with a data:image/png)
//	mime TYPE [N]     at least N outputs carry data of MIME type TYPE
//	text STRING       some output's text contains STRING (the rest of the line, trimmed)
//	regex RE          some output's text matches the Go regular expression RE (multi-line mode)
//	absent STRING     no output's text contains STRING
//
// Output text is stream text (stdout and stderr) and the data of textual MIME types (text/*,
// image/svg+xml, JSON).
type expectation struct {
	file string
	line int
	kind string
	arg  string // MIME type, or the text for text and absent
	min  int
	re   *regexp.Regexp
}

func (e expectation) where() string { return fmt.Sprintf("%s:%d", e.file, e.line) }

// parseExpectations reads an expectations file; name only names it in errors.
func parseExpectations(name string, r io.Reader) ([]expectation, error) {
	var exps []expectation
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kind, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		e := expectation{file: name, line: n, kind: kind, min: 1}
		var err error
		switch kind {
		case "table", "svg", "png", "figure":
			if rest != "" {
				e.min, err = parseMin(rest)
			}
		case "mime":
			typ, count, _ := strings.Cut(rest, " ")
			if typ == "" || !strings.Contains(typ, "/") {
				err = fmt.Errorf("mime wants a MIME type such as text/html, got %q", rest)
				break
			}
			e.arg = typ
			if count = strings.TrimSpace(count); count != "" {
				e.min, err = parseMin(count)
			}
		case "text", "absent":
			if rest == "" {
				err = fmt.Errorf("%s wants a string", kind)
			}
			e.arg = rest
		case "regex":
			if rest == "" {
				err = fmt.Errorf("regex wants a regular expression")
				break
			}
			e.arg = rest
			e.re, err = regexp.Compile("(?m)" + rest)
		default:
			err = fmt.Errorf("unknown expectation %q (want table, svg, figure, png, mime, text, regex or absent)", kind)
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		exps = append(exps, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(exps) == 0 {
		return nil, fmt.Errorf("%s: no expectations: state at least what the notebook must show", name)
	}
	return exps, nil
}

func parseMin(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("count %q: want a whole number ≥ 1", s)
	}
	return n, nil
}

// checkExpectations reports every expectation the executed notebook does not meet.
func checkExpectations(nb *notebook, exps []expectation) []problem {
	var outs []output
	for _, c := range nb.Cells {
		if c.CellType == "code" {
			outs = append(outs, c.Outputs...)
		}
	}
	var probs []problem
	for _, e := range exps {
		var msg string
		switch e.kind {
		case "table", "svg", "png", "figure", "mime":
			var is func(output) bool
			what := e.kind
			switch e.kind {
			case "table":
				is, what = isTable, "HTML table"
			case "svg":
				is, what = isSVG, "SVG figure"
			case "png":
				is, what = isPNG, "PNG image"
			case "figure":
				is, what = isFigure, "figure (SVG data URI)"
			case "mime":
				is = func(o output) bool { _, ok := o.Data[e.arg]; return ok }
				what = e.arg + " output"
			}
			got := 0
			for _, o := range outs {
				if is(o) {
					got++
				}
			}
			if got < e.min {
				msg = fmt.Sprintf("want at least %d %s(s), the notebook has %d", e.min, what, got)
			}
		case "text":
			if !anyText(outs, func(s string) bool { return strings.Contains(s, e.arg) }) {
				msg = fmt.Sprintf("no output contains %q", e.arg)
			}
		case "regex":
			if !anyText(outs, e.re.MatchString) {
				msg = fmt.Sprintf("no output matches /%s/", e.arg)
			}
		case "absent":
			if anyText(outs, func(s string) bool { return strings.Contains(s, e.arg) }) {
				msg = fmt.Sprintf("an output contains %q, which must be absent", e.arg)
			}
		}
		if msg != "" {
			probs = append(probs, problem{Msg: e.where() + ": " + msg})
		}
	}
	return probs
}

func anyText(outs []output, match func(string) bool) bool {
	for _, o := range outs {
		for _, t := range texts(o) {
			if match(t) {
				return true
			}
		}
	}
	return false
}
