package progress

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestBarInALog: written to a file or pipe (not a terminal), the bar is whole lines with no
// carriage return: the first update, the last (done reaches total), then "done in".
func TestBarInALog(t *testing.T) {
	var out bytes.Buffer
	b := New(&out, "loading x")
	for done := int64(0); done <= 4<<20; done += 1 << 20 {
		b.Update(done, 4<<20)
	}
	b.Finish()
	b.Finish() // a second Finish writes nothing
	text := out.String()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if strings.Contains(text, "\r") || len(lines) != 3 {
		t.Fatalf("progress in a log:\n%q", text)
	}
	for i, want := range []string{
		`^loading x \[ {30}\] 0 B / 4\.00 MiB  \d+ MiB/s$`,
		`^loading x \[={30}\] 4\.00 MiB / 4\.00 MiB  \d+ MiB/s$`,
		`^loading x: done in \d+\.\ds$`,
	} {
		if !regexp.MustCompile(want).MatchString(lines[i]) {
			t.Errorf("line %d = %q, want %s", i, lines[i], want)
		}
	}
}

// TestBarOnATerminal: on a terminal the bar is redrawn in place (\r) and its line ends with the
// time taken.
func TestBarOnATerminal(t *testing.T) {
	var out bytes.Buffer
	b := New(&out, "sha256 f")
	b.terminal = true
	b.Update(1<<20, 2<<20)
	b.Update(2<<20, 2<<20)
	b.Finish()
	want := regexp.MustCompile(`^\rsha256 f \[={15} {15}\] 1\.00 MiB / 2\.00 MiB  \d+ MiB/s\rsha256 f \[={30}\] 2\.00 MiB / 2\.00 MiB  \d+ MiB/s  \d+\.\ds\n$`)
	if !want.MatchString(out.String()) {
		t.Errorf("terminal bar %q", out.String())
	}
}

// TestAbandon: a failed transfer's bar claims no completion; on a terminal it ends its line.
func TestAbandon(t *testing.T) {
	tests := []struct {
		name     string
		terminal bool
	}{
		{"log", false},
		{"terminal", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			w := NewWriter(&out, "model.safetensors", 2<<20, 0)
			w.terminal = tt.terminal
			w.Write(make([]byte, 10))
			w.Abandon()
			w.Finish()
			text := out.String()
			if strings.Contains(text, "done") || strings.Count(text, "\n") != 1 || !strings.HasSuffix(text, "\n") {
				t.Errorf("abandoned bar %q", text)
			}
		})
	}
}

// TestWriterResumes: a resumed download's bar starts at the bytes already there and finishes by
// itself when the count reaches the total.
func TestWriterResumes(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, "blob", 3<<20, 2<<20)
	if n, err := w.Write(make([]byte, 1<<20)); n != 1<<20 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	text := out.String()
	if !strings.Contains(text, "blob [==============================] 3.00 MiB / 3.00 MiB") || !strings.Contains(text, "blob: done in") {
		t.Errorf("resumed bar %q", text)
	}
	before := out.Len()
	w.Write(make([]byte, 5))
	if out.Len() != before {
		t.Errorf("bar drew after it finished: %q", out.String()[before:])
	}
}

// TestLabelEscaped: a label holding a file name from the Hub or a checkpoint (escape
// sequences, a newline) is shown escaped, on one line, in a log and on a terminal.
func TestLabelEscaped(t *testing.T) {
	for _, terminal := range []bool{false, true} {
		var out bytes.Buffer
		b := New(&out, "\x1b[31mRED\x1b[0m\nFAKE.safetensors\u202e")
		b.terminal = terminal
		b.Update(1, 1)
		b.Finish()
		text := out.String()
		lines := 1 // the bar and its time on a terminal; the bar, then "done in" in a log
		if !terminal {
			lines = 2
		}
		if strings.ContainsAny(text, "\x1b\u202e") || strings.Count(text, "\n") != lines {
			t.Errorf("terminal=%v: raw control characters in %q", terminal, out.String())
		}
		if !strings.Contains(text, `\x1b[31mRED\x1b[0m\x0aFAKE.safetensors\u202e`) {
			t.Errorf("terminal=%v: label not shown escaped in %q", terminal, out.String())
		}
	}
}

// TestBarLines: in a log a long transfer writes a line at the start, at most one per LogEvery,
// and the last, never a carriage return; on a terminal it is redrawn in place at most every
// TerminalEvery. The clock is stepped, not slept.
func TestBarLines(t *testing.T) {
	tests := []struct {
		name     string
		terminal bool
		step     time.Duration // between updates
		updates  int
		frames   int // draws, the last one included
	}{
		{"log, 100 s of updates every second", false, time.Second, 100, 5}, // 0, 30, 60, 90, 100
		{"log, a short load", false, 100 * time.Millisecond, 10, 2},        // the first and the last
		{"terminal, 10 s of updates every 100 ms", true, 100 * time.Millisecond, 100, 51},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			b := New(&out, "loading")
			b.terminal = tt.terminal
			clock := time.Unix(0, 0)
			b.now = func() time.Time { return clock }
			b.begin = clock
			total := int64(tt.updates)
			for done := int64(0); done <= total; done++ {
				b.Update(done, total)
				clock = clock.Add(tt.step)
			}
			b.Finish()
			text := out.String()
			frames := strings.Count(text, "[")
			if frames != tt.frames {
				t.Errorf("%d frames, want %d:\n%q", frames, tt.frames, text)
			}
			if crs := strings.Count(text, "\r"); tt.terminal && crs != frames || !tt.terminal && crs != 0 {
				t.Errorf("%d carriage returns in %d frames (terminal %v)", crs, frames, tt.terminal)
			}
		})
	}
}
