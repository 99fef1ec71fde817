package tokenizer

import "unicode/utf8"

// qwenPattern is the Split pre-tokenizer regex of Qwen2, Qwen2.5 and Qwen3; llama3Pattern is the
// same with runs of up to three digits. splitWords reproduces either without a regex engine.
const (
	qwenPattern   = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// splitWords cuts s into the pieces that the pattern's leftmost-first, backtracking match would
// give, calling fn with each piece's byte range. The alternatives are tried in the regex's order
// at each position; every code point is matched by one of them, so the pieces cover s.
// maxDigits is 1 for qwenPattern and 3 for llama3Pattern. s must be valid UTF-8.
func splitWords(s string, maxDigits int, fn func(start, end int)) {
	bmp := bmpClasses()
	// at returns the code point at i, its size and class; at the end of s it returns size 0.
	at := func(i int) (rune, int, charClass) {
		if i >= len(s) {
			return -1, 0, classOther
		}
		if c := s[i]; c < utf8.RuneSelf {
			return rune(c), 1, bmp[c]
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		return r, n, classOf(bmp, r)
	}
	// letters returns the end of the run of letters starting at i.
	letters := func(i int) int {
		for {
			_, n, c := at(i)
			if n == 0 || c != classLetter {
				return i
			}
			i += n
		}
	}
	pos := 0
	for pos < len(s) {
		r, n, c := at(pos)
		// (?i:'s|'t|'re|'ve|'m|'ll|'d)
		if r == '\'' {
			if m := contraction(s[pos+1:]); m > 0 {
				fn(pos, pos+1+m)
				pos += 1 + m
				continue
			}
		}
		// [^\r\n\p{L}\p{N}]?\p{L}+
		if c == classLetter {
			end := letters(pos)
			fn(pos, end)
			pos = end
			continue
		}
		if r != '\r' && r != '\n' && c != classNumber {
			if _, n2, c2 := at(pos + n); n2 > 0 && c2 == classLetter {
				end := letters(pos + n)
				fn(pos, end)
				pos = end
				continue
			}
		}
		// \p{N} or \p{N}{1,3}
		if c == classNumber {
			end := pos + n
			for k := 1; k < maxDigits; k++ {
				_, n2, c2 := at(end)
				if n2 == 0 || c2 != classNumber {
					break
				}
				end += n2
			}
			fn(pos, end)
			pos = end
			continue
		}
		// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
		p := pos
		if r == ' ' {
			if _, n2, c2 := at(pos + 1); n2 > 0 && c2 == classOther {
				p = pos + 1
			}
		}
		if _, n2, c2 := at(p); n2 > 0 && c2 == classOther {
			end := p
			for {
				_, n3, c3 := at(end)
				if n3 == 0 || c3 != classOther {
					break
				}
				end += n3
			}
			for end < len(s) && (s[end] == '\r' || s[end] == '\n') {
				end++
			}
			fn(pos, end)
			pos = end
			continue
		}
		// Only whitespace is left: c == classSpace. Find the run of whitespace, the start of its
		// last code point and its last CR or LF.
		end, last, lastNL := pos, pos, -1
		for {
			r3, n3, c3 := at(end)
			if n3 == 0 || c3 != classSpace {
				break
			}
			if r3 == '\r' || r3 == '\n' {
				lastNL = end
			}
			last = end
			end += n3
		}
		switch {
		case lastNL >= 0: // \s*[\r\n]+ : \s* backs off to the last CR or LF of the run.
			end = lastNL + 1
		case end == len(s): // \s+(?!\S) at the end of the text
		case last > pos: // \s+(?!\S) gives back the last space before a non-space
			end = last
		default: // \s+ : a single space before a non-space
		}
		fn(pos, end)
		pos = end
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
