package main

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// cellProgress reads nbconvert's log (run at DEBUG level) as it is written: it says on progress
// when each code cell starts ("01-loading: cell 3 of 12, 0:14 in"), and passes the log on to log
// without the DEBUG lines of every kernel message ("msg_type:", "content:"), which would copy
// each figure into it.
type cellProgress struct {
	log      io.Writer
	progress io.Writer
	name     string
	cells    int // code cells the notebook has
	begin    time.Time
	now      func() time.Time
	started  int
	partial  []byte
}

func newCellProgress(log, progress io.Writer, name string, cells int) *cellProgress {
	return &cellProgress{log: log, progress: progress, name: name, cells: cells, begin: time.Now(), now: time.Now}
}

// Write takes the log in any pieces; whole lines are handled as they complete.
func (c *cellProgress) Write(p []byte) (int, error) {
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			break
		}
		c.line(c.partial[:i+1])
		c.partial = c.partial[i+1:]
	}
	return len(p), nil
}

// Close handles a last line without a newline.
func (c *cellProgress) Close() error {
	if len(c.partial) > 0 {
		c.line(c.partial)
		c.partial = nil
	}
	return nil
}

func (c *cellProgress) line(l []byte) {
	s := string(l)
	if strings.HasPrefix(s, "[NbConvertApp] msg_type: ") || strings.HasPrefix(s, "[NbConvertApp] content: ") {
		return
	}
	c.log.Write(l)
	if strings.HasPrefix(s, "[NbConvertApp] Executing cell:") {
		c.started++
		took := c.now().Sub(c.begin).Round(time.Second)
		fmt.Fprintf(c.progress, "nbcheck:      %s: cell %d of %d, %d:%02d in\n", c.name, c.started, c.cells, int(took.Minutes()), int(took.Seconds())%60)
	}
}

// codeCells counts the cells nbconvert executes: code cells with some source and without
// nbclient's skip-execution tag.
func codeCells(nb *notebook) int {
	n := 0
	for _, c := range nb.Cells {
		if c.CellType == "code" && strings.TrimSpace(string(c.Source)) != "" && !slices.Contains(c.Metadata.Tags, "skip-execution") {
			n++
		}
	}
	return n
}
