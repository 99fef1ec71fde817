// Package termsafe shows untrusted text (model output, names from files and from the Hub) on a
// terminal as text: what a terminal would act on instead of showing is escaped, so that text
// cannot retitle the window, write the clipboard (OSC 52), clear or recolour the screen, move
// the cursor or reorder what is shown.
//
// Escaped: the C0 control characters (but newline and tab in Text and Writer), DEL, the C1
// controls U+0080..U+009F (among them CSI, U+009B), the bidirectional controls (LRM, RLM, ALM,
// the embeddings and overrides U+202A..U+202E, the isolates U+2066..U+2069) and bytes that are
// not UTF-8. Each is written as \xNN (below U+0100, and bytes that are not UTF-8) or \uNNNN.
// Everything else, backslashes included, passes unchanged: the escaped form is for reading, not
// for decoding back.
//
// It knows nothing of where the text comes from: callers decide which output is a terminal.
package termsafe

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Name escapes s for a single line: newlines and tabs are escaped too.
func Name(s string) string { return escape(s, false) }

// Text escapes s keeping its layout: newlines and tabs pass.
func Text(s string) string { return escape(s, true) }

// unsafe reports whether r is escaped; keepLayout lets newline and tab pass.
func unsafe(r rune, keepLayout bool) bool {
	if keepLayout && (r == '\n' || r == '\t') {
		return false
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}

func escape(s string, keepLayout bool) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return unsafe(r, keepLayout) }) < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !unsafe(r, keepLayout):
			b.WriteString(s[i : i+size])
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// Writer escapes what is written through it like Text, for text that arrives in pieces (a
// model's tokens): a UTF-8 sequence split across two writes is held back until its end
// arrives, so it is shown as the character it is rather than as escaped bytes. Flush writes
// what is held back (escaped: an incomplete sequence is not UTF-8).
type Writer struct {
	w       io.Writer
	pending []byte // the start of an incomplete UTF-8 sequence, at most utf8.UTFMax-1 bytes
}

// NewWriter returns a Writer escaping onto w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write escapes p and writes it on; it reports len(p) unless the underlying writer fails.
func (t *Writer) Write(p []byte) (int, error) {
	buf := append(t.pending, p...)
	t.pending = nil
	// Hold back the start of a sequence whose end has not arrived yet.
	cut := len(buf)
	for back := 1; back < utf8.UTFMax && back <= len(buf); back++ {
		c := buf[len(buf)-back]
		if c < utf8.RuneSelf {
			break // ASCII: nothing incomplete after it
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(buf[len(buf)-back:]) {
				cut = len(buf) - back
			}
			break
		}
	}
	if cut < len(buf) {
		t.pending = append([]byte(nil), buf[cut:]...)
	}
	if cut == 0 {
		return len(p), nil
	}
	if _, err := io.WriteString(t.w, Text(string(buf[:cut]))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteString is Write for a string.
func (t *Writer) WriteString(s string) (int, error) { return t.Write([]byte(s)) }

// Flush writes, escaped, the incomplete UTF-8 sequence held back, if any: call it before
// writing to the underlying writer directly and when the text ends.
func (t *Writer) Flush() error {
	if len(t.pending) == 0 {
		return nil
	}
	rest := t.pending
	t.pending = nil
	_, err := io.WriteString(t.w, Text(string(rest)))
	return err
}
