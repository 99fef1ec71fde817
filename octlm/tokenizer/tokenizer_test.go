package tokenizer

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

func TestRoundTripCorpus(t *testing.T) {
	tok := qwen(t)
	texts, _ := corpus(t)
	for i, s := range texts {
		ids := tok.Encode(s)
		got, err := tok.Decode(ids)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if want := nfc(lossy(s)); got != want {
			t.Errorf("line %d: Decode(Encode(s)) differs from NFC(s) at byte %d", i+1, firstByteDiff(got, want))
		}
	}
}

func firstByteDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestSpecialTokens(t *testing.T) {
	tok := qwen(t)
	for _, c := range []struct {
		token   string
		id      int
		special bool
	}{
		{"<|endoftext|>", 151643, true},
		{"<|im_start|>", 151644, true},
		{"<|im_end|>", 151645, true},
		{"<tool_call>", 151657, false},
		{"</tool_call>", 151658, false},
		{"<think>", 151667, false},
		{"</think>", 151668, false},
	} {
		id, ok := tok.TokenID(c.token)
		if !ok || id != c.id {
			t.Errorf("TokenID(%q) = %d, %v; want %d", c.token, id, ok, c.id)
		}
		if got := tok.IsSpecial(c.id); got != c.special {
			t.Errorf("IsSpecial(%d) = %v, want %v", c.id, got, c.special)
		}
		if got := tok.Encode(c.token); len(got) != 1 || got[0] != c.id {
			t.Errorf("Encode(%q) = %v, want [%d]", c.token, got, c.id)
		}
		if got, err := tok.Decode([]int{c.id}); err != nil || got != c.token {
			t.Errorf("Decode([%d]) = %q, %v", c.id, got, err)
		}
	}
	// Special-token strings inside text split it; pieces around them are encoded on their own.
	got := tok.Encode("<|im_start|>user\nhi<|im_end|>\n")
	want := append(append([]int{151644}, tok.Encode("user\nhi")...), 151645)
	want = append(want, tok.Encode("\n")...)
	if firstDiff(got, want) >= 0 {
		t.Errorf("chat turn: got %v, want %v", got, want)
	}
	// A partial special token is ordinary text.
	for _, s := range []string{"<|im_end|", "<|im_end", "|im_end|>", "<|IM_END|>"} {
		for _, id := range tok.Encode(s) {
			if id >= 151643 {
				t.Errorf("Encode(%q) holds added token %d", s, id)
			}
		}
	}
	if tok.IsSpecial(0) || tok.IsSpecial(-1) || tok.IsSpecial(1<<30) {
		t.Error("IsSpecial true for an ordinary or unknown ID")
	}
	// Vocabulary tokens by their byte-level spelling.
	for s, want := range map[string]int{"!": 0, "Ġthe": 279, "ĊĊ": 271} {
		if id, ok := tok.TokenID(s); !ok || id != want {
			t.Errorf("TokenID(%q) = %d, %v; want %d", s, id, ok, want)
		}
	}
	for _, s := range []string{"", "<|nope|>", " the", "\x00"} {
		if id, ok := tok.TokenID(s); ok {
			t.Errorf("TokenID(%q) = %d, want none", s, id)
		}
	}
	if got := tok.VocabSize(); got != 151669 {
		t.Errorf("VocabSize() = %d, want 151669", got)
	}
	// From tokenizer_config.json.
	for name, want := range map[string]int{"eos_token": 151645, "pad_token": 151643} {
		if id, ok := tok.SpecialToken(name); !ok || id != want {
			t.Errorf("SpecialToken(%q) = %d, %v; want %d", name, id, ok, want)
		}
	}
	if id, ok := tok.SpecialToken("bos_token"); ok {
		t.Errorf("SpecialToken(bos_token) = %d, want none (null in the config)", id)
	}
}

func TestUnknownIDs(t *testing.T) {
	tok := qwen(t)
	for _, id := range []int{-1, 151669, 151935, 1 << 40} {
		if _, err := tok.Decode([]int{1, id, 2}); !errors.Is(err, ErrUnknownID) {
			t.Errorf("Decode with ID %d: error %v, want ErrUnknownID", id, err)
		}
		if _, err := tok.DecodeToken(id); !errors.Is(err, ErrUnknownID) {
			t.Errorf("DecodeToken(%d): error %v, want ErrUnknownID", id, err)
		}
		sd := NewStreamDecoder(tok)
		if _, err := sd.Add(id); !errors.Is(err, ErrUnknownID) {
			t.Errorf("StreamDecoder.Add(%d): error %v, want ErrUnknownID", id, err)
		}
	}
	if b, err := tok.DecodeToken(151668); err != nil || string(b) != "</think>" {
		t.Errorf("DecodeToken(151668) = %q, %v", b, err)
	}
	if b, err := tok.DecodeToken(220); err != nil || string(b) != " " {
		t.Errorf("DecodeToken(220) = %q, %v", b, err)
	}
}

// TestPartialUTF8 checks tokens that hold part of a UTF-8 sequence and the U+FFFD rule for
// bytes that never complete one (maximal subparts, as Rust's from_utf8_lossy).
func TestPartialUTF8(t *testing.T) {
	tok := qwen(t)
	byteID := func(b byte) int { return int(tok.byteIDs[b]) }
	for _, c := range []struct {
		bytes []byte
		want  string
	}{
		{[]byte{0xE2, 0x82, 0xAC}, "€"},
		{[]byte{0xE2, 0x82}, "\uFFFD"},
		{[]byte{0xE2, 0x82, 'a'}, "\uFFFDa"},
		{[]byte{0xF0, 0x80, 0x80}, "\uFFFD\uFFFD\uFFFD"},
		{[]byte{0xED, 0xA0, 0x80}, "\uFFFD\uFFFD\uFFFD"},
		{[]byte{0xF4, 0x8F, 0xBF, 0xBF}, "\U0010FFFF"},
		{[]byte{0xF4, 0x90}, "\uFFFD\uFFFD"},
		{[]byte{0xC0, 0xAF}, "\uFFFD\uFFFD"},
		{[]byte{0xFF, 'x', 0xF0, 0x9F, 0x98}, "\uFFFDx\uFFFD"},
	} {
		ids := make([]int, len(c.bytes))
		for i, b := range c.bytes {
			ids[i] = byteID(b)
		}
		got, err := tok.Decode(ids)
		if err != nil || got != c.want {
			t.Errorf("Decode(% X) = %+q, %v; want %+q", c.bytes, got, err, c.want)
		}
		if got := streamDecode(t, tok, ids); got != c.want {
			t.Errorf("stream of % X = %+q, want %+q", c.bytes, got, c.want)
		}
		if got := lossy(string(c.bytes)); got != c.want {
			t.Errorf("lossy(% X) = %+q, want %+q", c.bytes, got, c.want)
		}
	}
	// Invalid UTF-8 given to Encode is read as U+FFFD.
	if got, want := tok.Encode("a\xE2\x82b"), tok.Encode("a\uFFFDb"); firstDiff(got, want) >= 0 {
		t.Errorf("Encode of invalid UTF-8 = %v, want %v", got, want)
	}
}

func TestStreamDecoderCorpus(t *testing.T) {
	tok := qwen(t)
	_, want := corpus(t)
	for i, ids := range want {
		got := streamDecode(t, tok, ids)
		dec, err := tok.Decode(ids)
		if err != nil {
			t.Fatal(err)
		}
		if got != dec {
			t.Errorf("line %d: streamed text differs from Decode at byte %d", i+1, firstByteDiff(got, dec))
		}
	}
}

// streamDecode decodes ids one at a time with a StreamDecoder, checking that every piece is
// valid UTF-8, and returns the text of all pieces and the final Flush.
func streamDecode(t *testing.T, tok *Tokenizer, ids []int) string {
	t.Helper()
	sd := NewStreamDecoder(tok)
	var sb strings.Builder
	for _, id := range ids {
		s, err := sd.Add(id)
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(s) {
			t.Fatalf("Add(%d) of %v returned invalid UTF-8 %+q", id, ids, s)
		}
		sb.WriteString(s)
	}
	return sb.String() + sd.Flush()
}

// TestNFCGolden holds the reference normalizer's answers (tokenizers 0.23.2) for cases that
// exercise composition, reordering, Hangul, exclusions and the marks that its Unicode 9.0 tables
// lack (U+07FD, U+0D3B, U+11930) where golang.org/x/text answers differently.
func TestNFCGolden(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"e\u0301", "\u00e9"},
		{"\u212b", "\u00c5"},
		{"\u1100\u1161\u11a8", "\uac01"},
		{"\uac00\u11a8", "\uac01"},
		{"\u1100\u1161", "\uac00"},
		{"a\u0323\u0302", "\u1ead"},
		{"a\u0302\u0323", "\u1ead"},
		{"\u0958", "\u0915\u093c"},
		{"\u0dd9\u0dcf\u0dca", "\u0ddd"},
		{"\u1e9b\u0323", "\u1e9b\u0323"},
		{"q\u0307\u0323", "q\u0323\u0307"},
		{"\u0345\u07fd", "\u0345\u07fd"},
		{"a\u07fd\u0301", "a\u07fd\u0301"},
		{"a\u0301\u07fd", "\u00e1\u07fd"},
		{"\U00011935\U00011930", "\U00011935\U00011930"},
		{"\U00011938", "\U00011938"},
		{"\u0301abc", "\u0301abc"},
		{"\u0b47\u0b3e", "\u0b4b"},
		{"\u0f73", "\u0f71\u0f72"},
		{"\u2126", "\u03a9"},
		{"\uf900", "\u8c48"},
		{"\u0344", "\u0308\u0301"},
		{"x\u0315\u0300\u05ae\u0300y", "x\u05ae\u0300\u0300\u0315y"},
		{"A\u0308\u0304", "\u01de"},
		{"\u00c4\u0304", "\u01de"},
		{"\u0300\u0300", "\u0300\u0300"},
		{"\u1161\u11a8", "\u1161\u11a8"},
		{"\u05d0\u05b7\u05bc", "\u05d0\u05b7\u05bc"},
		{"A\u0338\u0301", "\u00c1\u0338"},
		{"\U0001d15e", "\U0001d157\U0001d165"},
		{"\U0001d160", "\U0001d158\U0001d165\U0001d16e"},
		{"\U0002f800", "\u4e3d"},
		{"e\u0301\u0301\u0301", "\u00e9\u0301\u0301"},
		{"\u0308\u0301a", "\u0308\u0301a"},
		{"\u0d3b\u0301\u0d3c", "\u0d3b\u0301\u0d3c"},
	} {
		if got := nfc(c.in); got != c.want {
			t.Errorf("nfc(%+q) = %+q, want %+q", c.in, got, c.want)
		}
	}
}

// TestNFCAgainstXText compares the NFC here with golang.org/x/text's (Unicode 15.0 with Go 1.26)
// on every code point that either can act on, alone and beside marks: they must agree except where a code point is one
// that the reference's Unicode 9.0 tables do not know (108 marks, U+11938).
func TestNFCAgainstXText(t *testing.T) {
	if norm.Version != "15.0.0" {
		t.Skipf("golang.org/x/text/unicode/norm has Unicode %s; this test knows 15.0.0", norm.Version)
	}
	d := nfcTables()
	known := func(r rune) bool {
		p := norm.NFD.PropertiesString(string(r))
		if p.CCC() != d.ccc[r] {
			return false
		}
		_, has := d.decomp[r]
		return has == (p.Decomposition() != nil) || (r >= hangulSBase && r < hangulSBase+hangulSCount)
	}
	unknown := 0
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if r >= 0xD800 && r < 0xE000 {
			continue
		}
		if !known(r) {
			unknown++
			continue
		}
		// Code points that neither side can act on are left alone by both.
		if p := norm.NFC.PropertiesString(string(r)); !d.isTouchy(r) && p.BoundaryBefore() && p.CCC() == 0 &&
			p.Decomposition() == nil && (r < hangulSBase || r >= hangulSBase+hangulSCount) {
			continue
		}
		for _, s := range []string{string(r), "a" + string(r) + "\u0301", "\u0345" + string(r), string(r) + "\u0334"} {
			if got, want := nfc(s), norm.NFC.String(s); got != want {
				t.Fatalf("nfc(%+q) = %+q, x/text %+q", s, got, want)
			}
		}
	}
	if unknown != 109 {
		t.Errorf("%d code points differ from x/text's tables, want 109", unknown)
	}
}

func TestMergeHeapMatchesSmall(t *testing.T) {
	tok := qwen(t)
	texts, _ := corpus(t)
	words := 0
	for _, s := range texts {
		s = nfc(lossy(s))
		splitWords(s, 1, func(start, end int) {
			w := s[start:end]
			if len(w) < 2 || len(w) > 256 {
				return
			}
			words++
			a, b := tok.mergeSmall(w), tok.mergeHeap(w)
			if len(a) != len(b) {
				t.Fatalf("%+q: mergeSmall %v, mergeHeap %v", w, a, b)
			}
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("%+q: mergeSmall %v, mergeHeap %v", w, a, b)
				}
			}
		})
	}
	if words < 10000 {
		t.Errorf("only %d words compared", words)
	}
}

func FuzzEncode(f *testing.F) {
	tok := qwen(f)
	texts, _ := corpus(f)
	for _, s := range texts {
		if len(s) < 2000 {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		got, err := tok.Decode(ids)
		if err != nil {
			t.Fatal(err)
		}
		if utf8.ValidString(s) {
			if want := nfc(s); got != want {
				t.Fatalf("Decode(Encode(%+q)) = %+q, want %+q", s, got, want)
			}
		} else if !utf8.ValidString(got) {
			t.Fatalf("Decode gave invalid UTF-8 for %+q", s)
		}
	})
}

func TestNFCTablesInRange(t *testing.T) {
	for _, e := range nfcCCC {
		if e.r >= quickLimit {
			t.Errorf("U+%04X has a combining class but is beyond quickLimit", e.r)
		}
	}
	for _, e := range nfcDecomp {
		if e.r >= quickLimit {
			t.Errorf("U+%04X decomposes but is beyond quickLimit", e.r)
		}
	}
	for _, e := range nfcComp {
		if e.b >= quickLimit {
			t.Errorf("U+%04X composes but is beyond quickLimit", e.b)
		}
	}
}
