package main

import (
	"io"

	"github.com/octlm/octlm/internal/termsafe"
)

// modelText is where a model's generated text goes (generate's stream, chat's replies and its
// "[tool call]" lines). On a terminal it passes through termsafe: control characters (C0 but
// newline and tab, DEL, C1) and bidirectional controls are shown escaped (\x1b, \u202e), so a
// reply cannot retitle the window, write the clipboard (OSC 52) or recolour the screen; octlm's
// own dimming of the think block is written around it, unescaped. Piped or redirected, the text
// is data for another program and passes byte for byte, as generated (--json escapes it as
// JSON strings do).
func modelText(out io.Writer, terminal bool) io.Writer {
	if terminal {
		return termsafe.NewWriter(out)
	}
	return out
}

// flushText writes out what a modelText writer still holds (the start of a UTF-8 sequence
// whose end never came): call it before writing to the writer beneath, and when the text ends.
func flushText(w io.Writer) {
	if f, ok := w.(*termsafe.Writer); ok {
		f.Flush()
	}
}
