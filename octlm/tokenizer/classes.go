package tokenizer

import "sync"

// charClass is what the pre-tokenizer regex can tell about a code point.
type charClass uint8

const (
	classOther  charClass = iota // none of the below
	classLetter                  // \p{L}
	classNumber                  // \p{N}
	classSpace                   // \s
)

// classRange is one run of code points with the same class, as generated into tables.go.
type classRange struct {
	lo, hi rune
	class  charClass
}

// bmpClasses is the class of every code point below U+10000, built on first use.
var bmpClasses = sync.OnceValue(func() *[0x10000]charClass {
	var t [0x10000]charClass
	for _, r := range classRanges {
		if r.lo >= 0x10000 {
			break
		}
		for c := r.lo; c <= r.hi && c < 0x10000; c++ {
			t[c] = r.class
		}
	}
	return &t
})

// classOf returns the class of r as the reference's regex engine sees it (Unicode 16.0).
func classOf(bmp *[0x10000]charClass, r rune) charClass {
	if r >= 0 && r < 0x10000 {
		return bmp[r]
	}
	lo, hi := 0, len(classRanges)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch cr := &classRanges[m]; {
		case r < cr.lo:
			hi = m
		case r > cr.hi:
			lo = m + 1
		default:
			return cr.class
		}
	}
	return classOther
}
