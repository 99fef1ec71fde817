package main

import (
	"fmt"
	"io"
	"time"
)

// progress draws a one-line progress bar on a terminal or log, at most a few times a second.
type progress struct {
	w     io.Writer
	label string
	begin time.Time
	last  time.Time
	drawn bool
}

func newProgress(w io.Writer, label string) *progress {
	return &progress{w: w, label: label, begin: time.Now()}
}

// update redraws the bar for done of total bytes.
func (p *progress) update(done, total int64) {
	now := time.Now()
	if now.Sub(p.last) < 200*time.Millisecond && done < total {
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
	fmt.Fprintf(p.w, "\r%s [%s] %s / %s  %.0f MiB/s", p.label, bar, byteSize(done), byteSize(total), rate)
	p.drawn = true
}

// finish ends the bar's line.
func (p *progress) finish() {
	if p.drawn {
		fmt.Fprintf(p.w, "  %.1fs\n", time.Since(p.begin).Seconds())
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
