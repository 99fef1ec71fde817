package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

// progress draws a progress bar: redrawn in place a few times a second on a terminal, one
// line every few seconds in a log.
type progress struct {
	w        io.Writer
	label    string
	begin    time.Time
	last     time.Time
	drawn    bool
	terminal bool
}

func newProgress(w io.Writer, label string) *progress {
	p := &progress{w: w, label: label, begin: time.Now()}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.terminal = true
		}
	}
	return p
}

// update redraws the bar for done of total bytes.
func (p *progress) update(done, total int64) {
	now := time.Now()
	every := 200 * time.Millisecond
	if !p.terminal {
		every = 3 * time.Second
	}
	if now.Sub(p.last) < every && done < total {
		return
	}
	p.last = now
	const width = 30
	fill := 0
	if total > 0 {
		fill = int(int64(width) * done / total)
	}
	rate := float64(done) / max(now.Sub(p.begin).Seconds(), 1e-9) / (1 << 20)
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = ' '
		if i < fill {
			bar[i] = '='
		}
	}
	start, end := "\r", ""
	if !p.terminal {
		start, end = "", "\n"
	}
	fmt.Fprintf(p.w, "%s%s [%s] %s / %s  %.0f MiB/s%s", start, p.label, bar, byteSize(done), byteSize(total), rate, end)
	p.drawn = true
}

// finish ends the bar's line with the time taken.
func (p *progress) finish() {
	switch {
	case p.terminal && p.drawn:
		fmt.Fprintf(p.w, "  %.1fs\n", time.Since(p.begin).Seconds())
	case p.drawn:
		fmt.Fprintf(p.w, "%s: done in %.1fs\n", p.label, time.Since(p.begin).Seconds())
	}
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
