// Package progress draws the progress bar of long byte transfers (loading weights, hashing and
// downloading checkpoint files) on stderr: redrawn in place a few times a second on a terminal;
// in a log, a pipe or /dev/null no carriage returns, only a whole line at the start, at most one
// every LogEvery after it, and the last.
//
// It knows nothing of what the bytes are.
package progress

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/octlm/octlm/internal/termsafe"
	"github.com/octlm/octlm/units"
)

// Bar is a progress bar for a count of bytes.
type Bar struct {
	w        io.Writer
	label    string
	begin    time.Time
	last     time.Time
	base     int64 // bytes already done when the bar began (a resumed download)
	drawn    bool
	ended    bool
	terminal bool
	now      func() time.Time // the clock (tests step their own)
}

// How often the bar is drawn: redrawn in place on a terminal, a whole line in a log (a long
// load writes a handful of lines, not one every few seconds).
const (
	TerminalEvery = 200 * time.Millisecond
	LogEvery      = 30 * time.Second
)

// New starts a bar labelled label on w; w is a terminal when it is an *os.File open on one (a
// character device such as /dev/null is not). The label is shown escaped (termsafe.Name): it often holds a file name from a
// checkpoint or the Hub, which must not drive the terminal or break the line.
func New(w io.Writer, label string) *Bar {
	b := &Bar{w: w, label: termsafe.Name(label), now: time.Now}
	b.begin = b.now()
	if f, ok := w.(*os.File); ok {
		b.terminal = term.IsTerminal(int(f.Fd()))
	}
	return b
}

// Update redraws the bar for done of total bytes: at most every TerminalEvery on a terminal,
// every LogEvery in a log, and always when done reaches total.
func (b *Bar) Update(done, total int64) {
	if b.ended {
		return
	}
	now := b.now()
	every := TerminalEvery
	if !b.terminal {
		every = LogEvery
	}
	if b.drawn && now.Sub(b.last) < every && done < total {
		return
	}
	b.last = now
	const width = 30
	fill := 0
	if total > 0 {
		fill = int(int64(width) * min(done, total) / total)
	}
	rate := float64(done-b.base) / max(now.Sub(b.begin).Seconds(), 1e-9) / (1 << 20)
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = ' '
		if i < fill {
			bar[i] = '='
		}
	}
	start, end := "\r", ""
	if !b.terminal {
		start, end = "", "\n"
	}
	fmt.Fprintf(b.w, "%s%s [%s] %s / %s  %.0f MiB/s%s", start, b.label, bar, units.Bytes(done), units.Bytes(total), rate, end)
	b.drawn = true
}

// Finish ends the bar's line with the time taken; nothing when the bar was never drawn.
func (b *Bar) Finish() {
	if b.ended {
		return
	}
	b.ended = true
	switch {
	case b.terminal && b.drawn:
		fmt.Fprintf(b.w, "  %.1fs\n", b.now().Sub(b.begin).Seconds())
	case b.drawn:
		fmt.Fprintf(b.w, "%s: done in %.1fs\n", b.label, b.now().Sub(b.begin).Seconds())
	}
}

// Abandon ends the bar without claiming it finished (the transfer failed): on a terminal it
// ends the line that was being redrawn, so that an error starts on a line of its own.
func (b *Bar) Abandon() {
	if b.ended {
		return
	}
	b.ended = true
	if b.terminal && b.drawn {
		fmt.Fprintln(b.w)
	}
}

// Writer is an io.Writer that counts the bytes written through it on a Bar.
type Writer struct {
	*Bar
	done, total int64
}

// NewWriter starts a bar for total bytes of which already are done (a resumed download: the
// rate counts only the rest). Write never fails; the bar finishes when done reaches total.
func NewWriter(w io.Writer, label string, total, already int64) *Writer {
	b := New(w, label)
	b.base = already
	return &Writer{Bar: b, done: already, total: total}
}

// Write counts len(p) bytes.
func (w *Writer) Write(p []byte) (int, error) {
	w.done += int64(len(p))
	w.Update(w.done, w.total)
	if w.done >= w.total && w.total > 0 {
		w.Finish()
	}
	return len(p), nil
}
