package tokenizer

import "unicode/utf8"

// qwenPattern is the Split pre-tokenizer regex of Qwen2, Qwen2.5 and Qwen3; llama3Pattern is the
// same with runs of up to three digits. splitWords reproduces either without a regex engine.
const (
	qwenPattern   = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// splitWords cuts s into the pieces that the pattern's leftmost-first, backtracking match would
// give, calling fn with each piece's byte range. maxDigits is 1 for qwenPattern and 3 for
// llama3Pattern. s must be valid UTF-8.
func splitWords(s string, maxDigits int, fn func(start, end int)) {
	w := wordScanner{s: s, bmp: bmpClasses(), maxDigits: maxDigits}
	for pos := 0; pos < len(s); {
		// The alternatives in the regex's order. Every code point is matched by one of them, so
		// the pieces cover s.
		r, n, c := w.at(pos)
		end := pos
		if r == '\'' { // (?i:'s|'t|'re|'ve|'m|'ll|'d)
			if m := contraction(s[pos+1:]); m > 0 {
				end = pos + 1 + m
			}
		}
		switch {
		case end > pos: // a contraction
		case c == classLetter: // [^\r\n\p{L}\p{N}]?\p{L}+ without the optional code point
			end = w.run(pos, classLetter)
		case c == classNumber: // \p{N} or \p{N}{1,3}
			end = w.digits(pos + n)
		default:
			end = w.prefixedLetters(pos, r, n)
			if end == pos {
				end = w.punctuation(pos, r)
			}
			if end == pos {
				end = w.whitespace(pos)
			}
		}
		fn(pos, end)
		pos = end
	}
}

// wordScanner matches the pattern's alternatives in s.
type wordScanner struct {
	s         string
	bmp       *[0x10000]charClass
	maxDigits int
}

// at returns the code point at i, its size and class; at the end of s it returns size 0.
func (w *wordScanner) at(i int) (rune, int, charClass) {
	if i >= len(w.s) {
		return -1, 0, classOther
	}
	if c := w.s[i]; c < utf8.RuneSelf {
		return rune(c), 1, w.bmp[c]
	}
	r, n := utf8.DecodeRuneInString(w.s[i:])
	return r, n, classOf(w.bmp, r)
}

// run returns the end of the run of code points of class c starting at i.
func (w *wordScanner) run(i int, c charClass) int {
	for i < len(w.s) {
		if b := w.s[i]; b < utf8.RuneSelf { // ASCII without a call
			if w.bmp[b] != c {
				return i
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(w.s[i:])
		if classOf(w.bmp, r) != c {
			return i
		}
		i += n
	}
	return i
}

// prefixedLetters matches [^\r\n\p{L}\p{N}]\p{L}+ at pos, whose code point is r, of size n and
// neither a letter nor a number, and returns the end of the match, or pos if there is none.
func (w *wordScanner) prefixedLetters(pos int, r rune, n int) int {
	if r == '\r' || r == '\n' {
		return pos
	}
	if _, n2, c2 := w.at(pos + n); n2 == 0 || c2 != classLetter {
		return pos
	}
	return w.run(pos+n, classLetter)
}

// digits completes \p{N} or \p{N}{1,3} after the first digit, which ends at end: it takes up to
// maxDigits-1 more digits and returns the end of the match.
func (w *wordScanner) digits(end int) int {
	for k := 1; k < w.maxDigits; k++ {
		_, n, c := w.at(end)
		if n == 0 || c != classNumber {
			break
		}
		end += n
	}
	return end
}

// punctuation matches ' ?[^\s\p{L}\p{N}]+[\r\n]*' at pos, whose code point is r, and returns the
// end of the match, or pos if there is none.
func (w *wordScanner) punctuation(pos int, r rune) int {
	p := pos
	if r == ' ' {
		if _, n, c := w.at(pos + 1); n > 0 && c == classOther {
			p = pos + 1
		}
	}
	if _, n, c := w.at(p); n == 0 || c != classOther {
		return pos
	}
	end := w.run(p, classOther)
	for end < len(w.s) && (w.s[end] == '\r' || w.s[end] == '\n') {
		end++
	}
	return end
}

// whitespace matches the last three alternatives, \s*[\r\n]+|\s+(?!\S)|\s+, at pos, where only
// whitespace can start a match, and returns the end of the match.
func (w *wordScanner) whitespace(pos int) int {
	// Find the run of whitespace, the start of its last code point and its last CR or LF.
	end, last, lastNL := pos, pos, -1
	for {
		r, n, c := w.at(end)
		if n == 0 || c != classSpace {
			break
		}
		if r == '\r' || r == '\n' {
			lastNL = end
		}
		last = end
		end += n
	}
	switch {
	case lastNL >= 0: // \s*[\r\n]+ : \s* backs off to the last CR or LF of the run.
		return lastNL + 1
	case end == len(w.s): // \s+(?!\S) at the end of the text
		return end
	case last > pos: // \s+(?!\S) gives back the last space before a non-space
		return last
	default: // \s+ : a single space before a non-space
		return end
	}
}

// contraction returns the length of the contraction suffix (s, t, re, ve, m, ll or d, ASCII case
// insensitively, plus U+017F LATIN SMALL LETTER LONG S, which Oniguruma folds to s) at the start
// of s, or 0.
func contraction(s string) int {
	if len(s) == 0 {
		return 0
	}
	switch s[0] | 0x20 {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if len(s) > 1 && s[1]|0x20 == 'e' {
			return 2
		}
	case 'l':
		if len(s) > 1 && s[1]|0x20 == 'l' {
			return 2
		}
	}
	if len(s) > 1 && s[0] == 0xC5 && s[1] == 0xBF { // U+017F ſ
		return 2
	}
	return 0
}
