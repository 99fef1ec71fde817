package tokenizer

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// The reference normalizes with the Rust crate unicode-normalization-alignments, whose tables
// are Unicode 9.0's; golang.org/x/text/unicode/norm has newer ones (Unicode 15.0 with Go 1.26,
// 17.0 from Go 1.27), which compose and reorder some later characters that the reference leaves
// alone. So this file carries its own NFC over tables generated from the reference's answers
// (tables.go, gen/mktables.go) and is the same whatever the Go version.

type cccEntry struct {
	r   rune
	ccc uint8
}

type decompEntry struct {
	r rune
	d string
}

type compEntry struct{ a, b, c rune }

const (
	hangulSBase  = 0xAC00
	hangulLBase  = 0x1100
	hangulVBase  = 0x1161
	hangulTBase  = 0x11A7
	hangulLCount = 19
	hangulVCount = 21
	hangulTCount = 28
	hangulNCount = hangulVCount * hangulTCount
	hangulSCount = hangulLCount * hangulNCount

	// quickLimit bounds the code points that NFC can change or that can change their neighbours.
	quickLimit = 0x30000
)

type nfcData struct {
	// touchy marks the code points NFC may act on: nonzero combining class, a decomposition, or
	// a second place in a composition. Text without them is already in NFC.
	touchy [quickLimit / 64]uint64
	ccc    map[rune]uint8
	decomp map[rune]string
	comp   map[uint64]rune
}

func (d *nfcData) mark(r rune) { d.touchy[r>>6] |= 1 << (r & 63) }

func (d *nfcData) isTouchy(r rune) bool {
	return r < quickLimit && d.touchy[r>>6]&(1<<(r&63)) != 0
}

var nfcTables = sync.OnceValue(func() *nfcData {
	d := &nfcData{
		ccc:    make(map[rune]uint8, len(nfcCCC)),
		decomp: make(map[rune]string, len(nfcDecomp)),
		comp:   make(map[uint64]rune, len(nfcComp)),
	}
	for _, e := range nfcCCC {
		d.ccc[e.r] = e.ccc
		d.mark(e.r)
	}
	for _, e := range nfcDecomp {
		d.decomp[e.r] = e.d
		d.mark(e.r)
	}
	for _, e := range nfcComp {
		d.comp[uint64(e.a)<<32|uint64(e.b)] = e.c
		d.mark(e.b)
	}
	for r := rune(hangulVBase); r < hangulVBase+hangulVCount; r++ {
		d.mark(r)
	}
	for r := rune(hangulTBase + 1); r < hangulTBase+hangulTCount; r++ {
		d.mark(r)
	}
	return d
})

// nfc returns the canonical composition of s as the reference computes it. s must be valid UTF-8.
//
// Only the stretches around code points that NFC may act on are normalized: such a stretch
// starts at the code point before the first of them (a starter that may compose with it) and
// ends before the next code point that NFC leaves alone and that nothing composes with.
func nfc(s string) string {
	d := nfcTables()
	var b []byte // the result, nil while it is s[:i]
	done := 0    // s[:done] has been appended to b
	prev := 0    // start of the code point before i
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			prev = i
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if !d.isTouchy(r) {
			prev = i
			i += n
			continue
		}
		start := i
		if i > 0 {
			start = prev // not touchy, or it would be in the stretch
		}
		end := i + n
		for end < len(s) {
			r2, n2 := utf8.DecodeRuneInString(s[end:])
			if r2 < utf8.RuneSelf || !d.isTouchy(r2) {
				break
			}
			end += n2
		}
		if seg := d.normalize(s[start:end]); b != nil || seg != s[start:end] {
			if b == nil {
				b = make([]byte, 0, len(s)+8)
			}
			b = append(b, s[done:start]...)
			b = append(b, seg...)
			done = end
		}
		i = end
	}
	if b == nil {
		return s
	}
	return string(append(b, s[done:]...))
}

// normalize decomposes, reorders and recomposes all of s.
func (d *nfcData) normalize(s string) string {
	buf := make([]rune, 0, len(s))
	for _, r := range s {
		switch {
		case r >= hangulSBase && r < hangulSBase+hangulSCount:
			si := r - hangulSBase
			buf = append(buf, hangulLBase+si/hangulNCount, hangulVBase+(si%hangulNCount)/hangulTCount)
			if t := si % hangulTCount; t != 0 {
				buf = append(buf, hangulTBase+t)
			}
		case d.isTouchy(r):
			if dec, ok := d.decomp[r]; ok {
				for _, x := range dec {
					buf = append(buf, x)
				}
				continue
			}
			buf = append(buf, r)
		default:
			buf = append(buf, r)
		}
	}
	// Canonical ordering: a stable sort of each run of non-starters by class.
	for i := 1; i < len(buf); i++ {
		c := d.cccOf(buf[i])
		if c == 0 {
			continue
		}
		for j := i; j > 0; j-- {
			pc := d.cccOf(buf[j-1])
			if pc <= c {
				break
			}
			buf[j-1], buf[j] = buf[j], buf[j-1]
		}
	}
	// Canonical composition.
	if len(buf) > 0 {
		starter := 0
		lastClass := d.cccOf(buf[0])
		if lastClass != 0 {
			lastClass = 255 // no starter yet: block everything
		}
		out := 1
		for i := 1; i < len(buf); i++ {
			r := buf[i]
			c := d.cccOf(r)
			if (lastClass < c || lastClass == 0) && d.isTouchy(r) {
				if comp, ok := d.compose(buf[starter], r); ok {
					buf[starter] = comp
					continue
				}
			}
			if c == 0 {
				starter = out
			}
			lastClass = c
			buf[out] = r
			out++
		}
		buf = buf[:out]
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range buf {
		b.WriteRune(r)
	}
	return b.String()
}

// cccOf returns the canonical combining class of r.
func (d *nfcData) cccOf(r rune) uint8 {
	if !d.isTouchy(r) {
		return 0
	}
	return d.ccc[r]
}

// compose returns the primary composite of a and b, if any.
func (d *nfcData) compose(a, b rune) (rune, bool) {
	if a >= hangulLBase && a < hangulLBase+hangulLCount && b >= hangulVBase && b < hangulVBase+hangulVCount {
		return hangulSBase + ((a-hangulLBase)*hangulVCount+(b-hangulVBase))*hangulTCount, true
	}
	if a >= hangulSBase && a < hangulSBase+hangulSCount && (a-hangulSBase)%hangulTCount == 0 &&
		b > hangulTBase && b < hangulTBase+hangulTCount {
		return a + (b - hangulTBase), true
	}
	c, ok := d.comp[uint64(a)<<32|uint64(b)]
	return c, ok
}
