package parity

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/octlm/octlm/internal/fileio"
)

// TraceHeader names the columns of CaseTrace.Rows.
func TraceHeader() []string {
	return []string{"hidden state", "type", "max |Δ|", "at position", "scaled", "first position past the tolerance"}
}

// Rows is the trace as a table, one row per hidden state (the embedding first): its name, type,
// largest |error| and its position, the largest scaled error, and the first position whose
// scaled error passes the tolerance ("—" for none). `octlm parity --trace` prints it and the
// figures draw it (figures.TraceTable).
func (ct CaseTrace) Rows() [][]string {
	rows := make([][]string, 0, len(ct.Layers))
	for _, l := range ct.Layers {
		name := "embedding"
		if l.Layer >= 0 {
			name = "after layer " + strconv.Itoa(l.Layer)
		}
		first := "—"
		if l.FirstParted >= 0 {
			first = strconv.Itoa(l.FirstParted)
		}
		rows = append(rows, []string{name, l.Type, sci(l.MaxAbsoluteError), strconv.Itoa(l.MaxPosition), sci(l.Scaled), first})
	}
	return rows
}

// Verdict says where the numbers part first, or that every hidden state agrees.
func (ct CaseTrace) Verdict() string {
	if ct.Parted < 0 || ct.Parted >= len(ct.Layers) {
		return fmt.Sprintf("case %d: every hidden state agrees within the tolerance", ct.Case)
	}
	lt := ct.Layers[ct.Parted]
	where := "the embedding"
	if lt.Layer >= 0 {
		where = fmt.Sprintf("layer %d (%s)", lt.Layer, lt.Type)
	}
	return fmt.Sprintf("case %d: the numbers part first after %s, at position %d", ct.Case, where, lt.FirstParted)
}

// WriteTrace writes each traced case as an aligned table (TraceHeader, Rows) and its verdict; tol
// is the tolerance the trace ran with.
func WriteTrace(w io.Writer, traces []CaseTrace, tol float64) error {
	ew := &fileio.ErrWriter{W: w}
	for _, ct := range traces {
		fmt.Fprintf(ew, "trace, case %d: hidden states against the reference activations (parting: |error| > %g · max(1, max|reference|) at a position)\n", ct.Case, tol)
		writeAligned(ew, append([][]string{TraceHeader()}, ct.Rows()...))
		fmt.Fprintf(ew, "%s\n\n", ct.Verdict())
	}
	return ew.Err
}

// writeAligned writes rows as columns two spaces apart, each as wide as its widest cell.
func writeAligned(w io.Writer, rows [][]string) {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(cell)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell)))
			}
		}
		fmt.Fprintln(w, b.String())
	}
}
