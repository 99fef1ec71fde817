package tokenizer

import "unicode/utf8"

// byteRune maps each byte to the printable code point that stands for it in byte-level BPE
// vocabularies (GPT-2's bytes_to_unicode): printable Latin-1 bytes stand for themselves, the
// others for U+0100 onwards in byte order. runeByte is the inverse, -1 where there is none.
var (
	byteRune [256]rune
	runeByte [0x144]int16
)

func init() {
	for i := range runeByte {
		runeByte[i] = -1
	}
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteRune[b] = rune(b)
		} else {
			byteRune[b] = 0x100 + n
			n++
		}
		runeByte[byteRune[b]] = int16(b)
	}
}

// unByteLevel turns a token written in byte-level code points back into its bytes. ok is false
// when s holds a code point outside the byte-level alphabet.
func unByteLevel(s string) (b []byte, ok bool) {
	return appendUnByteLevel(make([]byte, 0, len(s)), []byte(s))
}

// appendUnByteLevel appends the bytes that the byte-level code points in s stand for to dst.
func appendUnByteLevel(dst, s []byte) ([]byte, bool) {
	for len(s) > 0 {
		r, n := rune(s[0]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRune(s)
		}
		if int(r) >= len(runeByte) || runeByte[r] < 0 {
			return dst, false
		}
		dst = append(dst, byte(runeByte[r]))
		s = s[n:]
	}
	return dst, true
}

// byteLevel writes b in byte-level code points.
func byteLevel(b []byte) string {
	out := make([]rune, len(b))
	for i, c := range b {
		out[i] = byteRune[c]
	}
	return string(out)
}

// invalidPrefix returns the length of the next maximal subpart of b that is not valid UTF-8
// (WHATWG and Rust's String::from_utf8_lossy replace each such subpart with one U+FFFD) and
// whether that subpart could still become valid if more bytes followed it.
// b must start with a byte that does not begin a valid complete sequence.
func invalidPrefix(b []byte) (n int, incomplete bool) {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c >= 0xE0 && c <= 0xEF:
		need = 2
		if c == 0xE0 {
			lo = 0xA0
		} else if c == 0xED {
			hi = 0x9F
		}
	case c >= 0xF0 && c <= 0xF4:
		need = 3
		if c == 0xF0 {
			lo = 0x90
		} else if c == 0xF4 {
			hi = 0x8F
		}
	default:
		return 1, false
	}
	i := 1
	for ; i <= need && i < len(b); i++ {
		if b[i] < lo || b[i] > hi {
			return i, false
		}
		lo, hi = 0x80, 0xBF
	}
	return i, i <= need
}

// appendComplete appends b to dst with each maximal invalid subpart replaced by U+FFFD, as
// Rust's String::from_utf8_lossy does, but stops before an incomplete sequence at the end of b
// that more bytes could still complete, and returns it as rest (empty when there is none).
func appendComplete(dst, b []byte) (out, rest []byte) {
	for len(b) > 0 {
		if b[0] < utf8.RuneSelf {
			dst = append(dst, b[0])
			b = b[1:]
			continue
		}
		if r, n := utf8.DecodeRune(b); r != utf8.RuneError || n > 1 {
			dst = append(dst, b[:n]...)
			b = b[n:]
			continue
		}
		n, incomplete := invalidPrefix(b)
		if incomplete && n == len(b) {
			break
		}
		dst = append(dst, "\uFFFD"...)
		b = b[n:]
	}
	return dst, b
}

// appendLossy appends b to dst with each maximal invalid subpart replaced by U+FFFD, as Rust's
// String::from_utf8_lossy does: appendComplete, and one U+FFFD for an incomplete sequence at the
// end, itself a maximal invalid subpart.
func appendLossy(dst, b []byte) []byte {
	dst, rest := appendComplete(dst, b)
	if len(rest) > 0 {
		dst = append(dst, "\uFFFD"...)
	}
	return dst
}

// lossy returns s with each maximal invalid UTF-8 subpart replaced by U+FFFD.
func lossy(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string(appendLossy(make([]byte, 0, len(s)+8), []byte(s)))
}
