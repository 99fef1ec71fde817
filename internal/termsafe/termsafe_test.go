package termsafe

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	cases := []struct{ in, name, text string }{
		{"model.layers.0.weight", "model.layers.0.weight", "model.layers.0.weight"},
		{"東京 🚀", "東京 🚀", "東京 🚀"},
		{"a\nb\tc", `a\x0ab\x09c`, "a\nb\tc"},
		{"\x1b]0;PWNED\x07", `\x1b]0;PWNED\x07`, `\x1b]0;PWNED\x07`},
		{"\x1b]52;c;aGk=\x07", `\x1b]52;c;aGk=\x07`, `\x1b]52;c;aGk=\x07`},
		{"\x1b[31mRED\x1b[0m\nFAKE", `\x1b[31mRED\x1b[0m\x0aFAKE`, "\\x1b[31mRED\\x1b[0m\nFAKE"},
		{"cr\rdel\x7f", `cr\x0ddel\x7f`, `cr\x0ddel\x7f`},
		{"csi\u009b2J", `csi\x9b2J`, `csi\x9b2J`},
		{"rlo\u202etxt.exe", `rlo\u202etxt.exe`, `rlo\u202etxt.exe`},
		{"iso\u2066x\u2069", `iso\u2066x\u2069`, `iso\u2066x\u2069`},
		{"bad\xff\xc3", `bad\xff\xc3`, `bad\xff\xc3`},
	}
	for _, c := range cases {
		if got := Name(c.in); got != c.name {
			t.Errorf("Name(%q) = %q, want %q", c.in, got, c.name)
		}
		if got := Text(c.in); got != c.text {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.text)
		}
	}
}

// TestWriterSplits: a character split across writes comes out whole; one never completed comes
// out escaped on Flush; an escape sequence split across writes is escaped all the same.
func TestWriterSplits(t *testing.T) {
	cases := []struct {
		writes []string
		want   string
	}{
		{[]string{"東", "京"}, "東京"},
		{[]string{"\xe6", "\x9d\xb1", "!"}, "東!"},
		{[]string{"\xf0\x9f", "\x9a", "\x80"}, "🚀"},
		{[]string{"\x1b", "]0;x", "\x07"}, `\x1b]0;x\x07`},
		{[]string{"\xc2", "\x9b", "2J"}, `\x9b2J`},
		{[]string{"ok\xe6\x9d"}, `ok\xe6\x9d`},   // never completed: escaped at Flush
		{[]string{"\xe6\x9d", "x"}, `\xe6\x9dx`}, // interrupted by ASCII
		{[]string{"a\n", "\tb"}, "a\n\tb"},       // layout kept
		{[]string{"\u202e", "abc"}, `\u202eabc`}, // bidi override
		{[]string{"\xe2\x80", "\xae"}, `\u202e`}, // ... split in the middle
		{[]string{"\x80\x80\x80\x80"}, `\x80\x80\x80\x80`},
	}
	for _, c := range cases {
		var b bytes.Buffer
		w := NewWriter(&b)
		for _, s := range c.writes {
			if n, err := w.WriteString(s); err != nil || n != len(s) {
				t.Fatalf("%q: Write = %d, %v", c.writes, n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if b.String() != c.want {
			t.Errorf("%q: wrote %q, want %q", c.writes, b.String(), c.want)
		}
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriterError(t *testing.T) {
	w := NewWriter(failWriter{})
	if _, err := w.Write([]byte("text")); err == nil {
		t.Error("a failed write was not reported")
	}
}

// checkSafe fails when s holds anything a terminal would act on.
func checkSafe(t *testing.T, what, s string, keepLayout bool) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("%s = %q: not UTF-8", what, s)
	}
	for _, r := range s {
		if keepLayout && (r == '\n' || r == '\t') {
			continue
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			t.Fatalf("%s = %q keeps %U", what, s, r)
		}
	}
}

// FuzzEscape: whatever the input, the escaped form is valid UTF-8 with no control or
// bidirectional character left (Text and Writer keep only newline and tab); clean text passes
// unchanged; and the Writer, fed the input in pieces cut anywhere, writes exactly Text of the
// whole.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"model.layers.0.mlp.up_proj.weight", "w\x1b]0;x\x07\x1b[2J", "\u009b\u202e\xff\xfe", "東京 🚀\n\t", "\ufffd ok \xc3", "\xf0\x9f\x9a"} {
		f.Add(s, uint8(1), uint8(2))
	}
	f.Fuzz(func(t *testing.T, s string, cut1, cut2 uint8) {
		for _, keep := range []bool{false, true} {
			got := escape(s, keep)
			checkSafe(t, "escape", got, keep)
			clean := utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return unsafe(r, keep) })
			if clean && got != s {
				t.Fatalf("escape(%q, %v) = %q changed clean text", s, keep, got)
			}
		}
		a := min(int(cut1), len(s))
		b := min(a+int(cut2), len(s))
		var out bytes.Buffer
		w := NewWriter(&out)
		for _, piece := range []string{s[:a], s[a:b], s[b:]} {
			w.WriteString(piece)
		}
		w.Flush()
		if out.String() != Text(s) {
			t.Fatalf("Writer fed %q in pieces at %d, %d wrote %q; Text gives %q", s, a, b, out.String(), Text(s))
		}
	})
}
