package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// notebook is the part of a Jupyter notebook (nbformat 4) that nbcheck reads.
type notebook struct {
	Cells    []cell `json:"cells"`
	Metadata struct {
		Kernelspec struct {
			Name string `json:"name"`
		} `json:"kernelspec"`
	} `json:"metadata"`
	NBFormat int `json:"nbformat"`
}

// cell is one notebook cell.
type cell struct {
	CellType string `json:"cell_type"`
	Metadata struct {
		Tags []string `json:"tags"`
	} `json:"metadata"`
	Source         multiText `json:"source"`
	ExecutionCount *int      `json:"execution_count"`
	Outputs        []output  `json:"outputs"`
}

// output is one output of a code cell: a stream (stdout/stderr), rich data (display_data,
// execute_result) or an error.
type output struct {
	OutputType string               `json:"output_type"`
	Name       string               `json:"name"`
	Text       multiText            `json:"text"`
	Data       map[string]multiText `json:"data"`
	EName      string               `json:"ename"`
	EValue     string               `json:"evalue"`
}

// multiText is a notebook string field, which nbformat stores either as one string or as a list of
// lines. A JSON object or number (application/json data) is kept as its JSON text.
type multiText string

// UnmarshalJSON implements json.Unmarshaler.
func (t *multiText) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		*t = ""
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = multiText(s)
	case b[0] == '[':
		var lines []string
		if err := json.Unmarshal(b, &lines); err != nil {
			// A list that is not a list of strings is data, not text lines.
			*t = multiText(b)
			return nil
		}
		*t = multiText(strings.Join(lines, ""))
	default:
		*t = multiText(b)
	}
	return nil
}

// readNotebook reads and parses a notebook file.
func readNotebook(path string) (*notebook, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseNotebook(path, b)
}

// parseNotebook parses notebook JSON; path only names it in errors.
func parseNotebook(path string, b []byte) (*notebook, error) {
	var nb notebook
	if err := json.Unmarshal(b, &nb); err != nil {
		return nil, fmt.Errorf("%s: not a notebook: %w", path, err)
	}
	if nb.NBFormat != 4 {
		return nil, fmt.Errorf("%s: nbformat %d, want 4", path, nb.NBFormat)
	}
	return &nb, nil
}

// problem is one thing wrong with a notebook. Cell is the 1-based position of the cell in the
// notebook (markdown cells count), or 0 for the notebook as a whole.
type problem struct {
	Cell    int
	Msg     string
	Excerpt string
}

func (p problem) String() string {
	var b strings.Builder
	if p.Cell > 0 {
		fmt.Fprintf(&b, "cell %d: ", p.Cell)
	}
	b.WriteString(p.Msg)
	if p.Excerpt != "" {
		for _, line := range strings.Split(strings.TrimRight(p.Excerpt, "\n"), "\n") {
			b.WriteString("\n    | ")
			b.WriteString(line)
		}
	}
	return b.String()
}

// setupLine is the first code cell of every notebook: it makes gonb compile cells against this
// checkout of octlm (see notebooks/gonb_setup.sh).
const setupLine = `!*bash "$GONB_DIR/gonb_setup.sh"`

// checkCommitted reports what is wrong with a notebook as committed: it must use the gonb kernel,
// start with the setup cell, and carry no outputs (executed copies are never committed).
func checkCommitted(nb *notebook) []problem {
	var probs []problem
	if nb.Metadata.Kernelspec.Name != "gonb" {
		probs = append(probs, problem{Msg: fmt.Sprintf("kernelspec name is %q, want \"gonb\"", nb.Metadata.Kernelspec.Name)})
	}
	first := true
	for i, c := range nb.Cells {
		if c.CellType != "code" {
			continue
		}
		if first && !strings.Contains(string(c.Source), setupLine) {
			probs = append(probs, problem{Cell: i + 1, Msg: "the first code cell must run the setup line " + setupLine,
				Excerpt: head(string(c.Source), 3)})
		}
		first = false
		if len(c.Outputs) > 0 || c.ExecutionCount != nil {
			probs = append(probs, problem{Cell: i + 1, Msg: fmt.Sprintf("has %d outputs (execution count %s): committed notebooks carry no outputs; run: go run ./notebooks/nbcheck strip FILE",
				len(c.Outputs), countString(c.ExecutionCount))})
		}
	}
	if first {
		probs = append(probs, problem{Msg: "no code cells"})
	}
	return probs
}

var (
	// gonb prints "exit status N" on stderr when a cell's program exits non-zero, and Go prints
	// "panic: " / "fatal error: " for a crash.
	exitStatusRE = regexp.MustCompile(`(?m)^exit status (\d+)\s*$`)
	crashRE      = regexp.MustCompile(`(?m)^(panic: |fatal error: |signal: )`)
	// gonb shows compile and `go get` errors as HTML with these markers.
	gonbErrorHTML = []string{`class="gonb-err-location"`, `data-mime-type="application/vnd.jupyter.stderr"`}
)

// skipTag marks a cell headless execution skips (nbclient's skip_cells_with_tag): one that needs a
// notebook open in a browser, such as gonb widgets.
const skipTag = "skip-execution"

// checkExecuted reports failures visible in an executed notebook: error outputs, a cell program
// that crashed or exited non-zero (gonb says so on stderr only), gonb's HTML error reports, and
// code cells that never ran (except those tagged skip-execution).
func checkExecuted(nb *notebook) []problem {
	var probs []problem
	for i, c := range nb.Cells {
		if c.CellType != "code" {
			continue
		}
		where := head(string(c.Source), 2)
		if c.ExecutionCount == nil && strings.TrimSpace(string(c.Source)) != "" && !slices.Contains(c.Metadata.Tags, skipTag) {
			probs = append(probs, problem{Cell: i + 1, Msg: "was not executed", Excerpt: where})
		}
		for _, o := range c.Outputs {
			switch o.OutputType {
			case "error":
				probs = append(probs, problem{Cell: i + 1, Msg: fmt.Sprintf("error output: %s: %s", o.EName, o.EValue), Excerpt: where})
			case "stream":
				if o.Name != "stderr" {
					continue
				}
				text := string(o.Text)
				if m := exitStatusRE.FindStringSubmatch(text); m != nil {
					probs = append(probs, problem{Cell: i + 1, Msg: "the cell's program exited with status " + m[1], Excerpt: where + "\n--- stderr:\n" + tail(text, 15)})
				} else if crashRE.MatchString(text) {
					probs = append(probs, problem{Cell: i + 1, Msg: "the cell's program crashed", Excerpt: where + "\n--- stderr:\n" + tail(text, 15)})
				}
			case "display_data", "execute_result":
				html := string(o.Data["text/html"])
				for _, marker := range gonbErrorHTML {
					if strings.Contains(html, marker) {
						probs = append(probs, problem{Cell: i + 1, Msg: "gonb reported an error (HTML output)", Excerpt: where + "\n--- " + tail(stripTags(html), 10)})
						break
					}
				}
			}
		}
	}
	return probs
}

// outputStats counts the rich outputs of an executed notebook, for the summary line.
type outputStats struct{ cells, outputs, tables, svgs, figures, pngs int }

func stats(nb *notebook) outputStats {
	var s outputStats
	for _, c := range nb.Cells {
		if c.CellType != "code" {
			continue
		}
		s.cells++
		for _, o := range c.Outputs {
			s.outputs++
			if isTable(o) {
				s.tables++
			}
			if isSVG(o) {
				s.svgs++
			}
			if isFigure(o) {
				s.figures++
			}
			if isPNG(o) {
				s.pngs++
			}
		}
	}
	return s
}

func (s outputStats) String() string {
	return fmt.Sprintf("%d code cells, %d outputs: %d tables, %d SVG (%d as exportable figures), %d PNG", s.cells, s.outputs, s.tables, s.svgs, s.figures, s.pngs)
}

// isTable reports whether o is an HTML table.
func isTable(o output) bool {
	return strings.Contains(strings.ToLower(string(o.Data["text/html"])), "<table")
}

// isSVG reports whether o is an SVG figure: image/svg+xml data, or HTML holding an <svg> element
// (gonbui.DisplaySVG sends SVG wrapped in HTML) outside a script.
func isSVG(o output) bool {
	if _, ok := o.Data["image/svg+xml"]; ok {
		return true
	}
	return strings.Contains(strings.ToLower(string(scriptRE.ReplaceAll([]byte(o.Data["text/html"]), nil))), "<svg")
}

// isPNG reports whether o is a PNG image: image/png data, or HTML with an embedded PNG.
func isPNG(o output) bool {
	if _, ok := o.Data["image/png"]; ok {
		return true
	}
	return strings.Contains(string(o.Data["text/html"]), "data:image/png")
}

// texts returns the searchable text of an output: stream text, and every textual MIME type's data
// (text/*, image/svg+xml, application/json); image/png is not text.
func texts(o output) []string {
	var ts []string
	if o.OutputType == "stream" {
		ts = append(ts, string(o.Text))
	}
	if o.OutputType == "error" {
		ts = append(ts, o.EName+": "+o.EValue)
	}
	for mime, d := range o.Data {
		if strings.HasPrefix(mime, "text/") || mime == "image/svg+xml" || strings.HasSuffix(mime, "json") {
			ts = append(ts, string(d))
		}
	}
	return ts
}

func countString(n *int) string {
	if n == nil {
		return "null"
	}
	return fmt.Sprint(*n)
}

// head returns the first n lines of s.
func head(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n")
}

// tail returns the last n non-empty lines of s.
func tail(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

var tagRE = regexp.MustCompile(`(?s)<style.*?</style>|<[^>]*>`)

// stripTags reduces gonb's HTML error report to its text.
func stripTags(html string) string {
	return tagRE.ReplaceAllString(html, "")
}
