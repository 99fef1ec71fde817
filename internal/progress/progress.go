// Package progress draws the progress bar of long byte transfers (loading weights, hashing and
// downloading checkpoint files) on stderr: redrawn in place a few times a second on a terminal,
// one whole line every few seconds in a log or pipe.
//
// It knows nothing of what the bytes are.
package progress

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/octlm/octlm/internal/units"
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
}

// New starts a bar labelled label on w; w is a terminal when it is an *os.File on a character
// device.
func New(w io.Writer, label string) *Bar {
	b := &Bar{w: w, label: label, begin: time.Now()}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			b.terminal = true
		}
	}
	return b
}

// Update redraws the bar for done of total bytes: at most every 200 ms on a terminal, every
// 3 s in a log, and always when done reaches total.
func (b *Bar) Update(done, total int64) {
	if b.ended {
		return
	}
	now := time.Now()
	every := 200 * time.Millisecond
	if !b.terminal {
		every = 3 * time.Second
	}
	if now.Sub(b.last) < every && done < total {
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
		fmt.Fprintf(b.w, "  %.1fs\n", time.Since(b.begin).Seconds())
	case b.drawn:
		fmt.Fprintf(b.w, "%s: done in %.1fs\n", b.label, time.Since(b.begin).Seconds())
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
