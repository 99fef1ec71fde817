package main

import (
	"fmt"
	"io"
	"time"

	"github.com/octlm/octlm/parity"
	"github.com/octlm/octlm/units"
)

// positionsLine shows how far a long parity case has run, redrawn in place on a terminal:
// "case 0, full path: 12,288 / 40,960 positions, 310 positions/s, about 1m32s left". The line
// is erased when the path is done, so the log above it stays as it was.
type positionsLine struct {
	w     io.Writer
	now   func() time.Time
	key   string    // the case and path being drawn
	begin time.Time // when its first slice ended
	base  int       // the positions done then
	last  time.Time // the last redraw
	drawn bool
}

// newPositionsLine draws on w, a terminal.
func newPositionsLine(w io.Writer) *positionsLine { return &positionsLine{w: w, now: time.Now} }

// update is parity.Options.Progress. Cases of one slice draw nothing.
func (p *positionsLine) update(c parity.Case, path string, done, total int) {
	now := p.now()
	key := fmt.Sprintf("case %d, %s path", c.Index, path)
	if key != p.key {
		p.key, p.begin, p.base, p.last = key, now, done, time.Time{}
	}
	if total <= parity.ProgressStep {
		return
	}
	if done >= total {
		p.key = "" // the next path starts afresh
		if p.drawn {
			fmt.Fprint(p.w, "\r\x1b[K")
			p.drawn = false
		}
		return
	}
	if now.Sub(p.last) < 200*time.Millisecond {
		return
	}
	p.last = now
	fmt.Fprintf(p.w, "\r\x1b[K%s", positionsText(key, done, total, done-p.base, now.Sub(p.begin)))
	p.drawn = true
}

// positionsText is the line's text for done of total positions, of which ran ran in elapsed
// (the rate; the time left assumes it holds, though later positions attend over more).
func positionsText(key string, done, total, ran int, elapsed time.Duration) string {
	return progressText(key, "positions", "%.0f", done, total, ran, elapsed)
}

// progressText is "key: done / total unit", then the rate (in rateFormat) and the time left
// when ran of them took elapsed (the time left assumes the rate holds).
func progressText(key, unit, rateFormat string, done, total, ran int, elapsed time.Duration) string {
	line := fmt.Sprintf("%s: %s / %s %s", key, units.Commas(int64(done)), units.Commas(int64(total)), unit)
	if elapsed <= 0 || ran <= 0 {
		return line
	}
	rate := float64(ran) / elapsed.Seconds()
	left := time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second)
	return line + fmt.Sprintf(", "+rateFormat+" %s/s, about %s left", rate, unit, left)
}
