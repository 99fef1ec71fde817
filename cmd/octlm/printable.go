package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// printable escapes what a terminal would act on instead of showing: control characters (C0,
// DEL, C1, among them ESC and CSI), bidirectional overrides and bytes that are not UTF-8, as
// \xNN or \uNNNN. Names read from files (tensor names, metadata, file names) pass through it
// before they are printed, so a crafted header cannot retitle, clear or recolour the terminal.
func printable(s string) string { return escapeControls(s, false) }

// printableText is printable for multi-line messages: newlines and tabs are kept.
func printableText(s string) string { return escapeControls(s, true) }

func escapeControls(s string, keepLayout bool) string {
	escaped := func(r rune) bool {
		if keepLayout && (r == '\n' || r == '\t') {
			return false
		}
		return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
	}
	if utf8.ValidString(s) && strings.IndexFunc(s, escaped) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !escaped(r):
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
