package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestCellProgress: nbconvert's DEBUG log, in whatever pieces it arrives, gives one progress
// line per executed cell with the time since the notebook began; the per-message DEBUG lines
// stay out of the log file and everything else goes in.
func TestCellProgress(t *testing.T) {
	logText := "[NbConvertApp] Converting notebook 01-loading.ipynb to notebook\n" +
		"[NbConvertApp] Skipping non-executing cell 0\n" +
		"[NbConvertApp] Executing cell:\n%%\nfmt.Println(1)\n" +
		"[NbConvertApp] msg_type: stream\n" +
		"[NbConvertApp] content: {'name': 'stdout', 'text': '" + strings.Repeat("x", 5000) + "'}\n" +
		"[NbConvertApp] Executing cell:\n%%\nfmt.Println(2)\n" +
		"[NbConvertApp] Writing 1234 bytes to out/01-loading.ipynb"
	for _, size := range []int{1, 7, 4096} {
		var log, progress bytes.Buffer
		c := newCellProgress(&log, &progress, "01-loading", 2)
		clock := c.begin
		c.now = func() time.Time { clock = clock.Add(65 * time.Second); return clock }
		for i := 0; i < len(logText); i += size {
			c.Write([]byte(logText[i:min(i+size, len(logText))]))
		}
		c.Close()
		want := "nbcheck:      01-loading: cell 1 of 2, 1:05 in\nnbcheck:      01-loading: cell 2 of 2, 2:10 in\n"
		if progress.String() != want {
			t.Errorf("pieces of %d: progress\n%q\nwant\n%q", size, progress.String(), want)
		}
		if strings.Contains(log.String(), "msg_type") || strings.Contains(log.String(), "xxxxx") ||
			!strings.Contains(log.String(), "fmt.Println(2)\n") || !strings.HasSuffix(log.String(), "01-loading.ipynb") {
			t.Errorf("pieces of %d: log\n%s", size, log.String())
		}
	}
}

// TestCodeCells counts what nbconvert executes: code cells with source, not tagged skip-execution.
func TestCodeCells(t *testing.T) {
	nb := &notebook{Cells: []cell{{CellType: "markdown", Source: "# x"}, {CellType: "code", Source: "%%\nx"}, {CellType: "code", Source: " \n"}, {CellType: "code", Source: "y"}}}
	nb.Cells[3].Metadata.Tags = []string{"skip-execution"}
	if n := codeCells(nb); n != 1 {
		t.Errorf("%d code cells, want 1", n)
	}
}
