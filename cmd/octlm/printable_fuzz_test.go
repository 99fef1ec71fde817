package main

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzPrintable: whatever a file holds, the escaped form is valid UTF-8 with no control or
// bidirectional-override character left (printableText keeps only newline and tab), and text
// with nothing to escape passes unchanged.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"model.layers.0.mlp.up_proj.weight", "w\x1b]0;x\x07\x1b[2J", "\u009b\u202e\xff\xfe", "東京 🚀\n\t", "\ufffd ok \xc3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, keep := range []bool{false, true} {
			got := escapeControls(s, keep)
			if !utf8.ValidString(got) {
				t.Fatalf("escapeControls(%q, %v) = %q: not UTF-8", s, keep, got)
			}
			for _, r := range got {
				if keep && (r == '\n' || r == '\t') {
					continue
				}
				if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
					t.Fatalf("escapeControls(%q, %v) = %q keeps %U", s, keep, got, r)
				}
			}
			clean := utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool {
				return (unicode.IsControl(r) && !(keep && (r == '\n' || r == '\t'))) || unicode.Is(unicode.Bidi_Control, r)
			})
			if clean && got != s {
				t.Fatalf("escapeControls(%q, %v) = %q changed clean text", s, keep, got)
			}
		}
	})
}
