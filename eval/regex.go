package eval

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// compilePythonRegex compiles a pattern written for Python's re with Go's regexp (RE2): the
// common syntax is the same; what RE2 lacks (lookaround, backreferences) is refused with
// RE2's error rather than matched differently. Go's \d, \w and \s match ASCII only, Python's
// match Unicode.
func compilePythonRegex(p string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("pattern %q cannot be compiled by Go's RE2 (no lookaround or backreferences): %w", p, err)
	}
	return re, nil
}

// pyIsSpace is Python's str.isspace for one character (which re's \s matches in str
// patterns): Unicode's White_Space plus the separators U+001C..U+001F.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// countWords is lm-eval's count_words: len(re.split(r"\s+", text)).
func countWords(s string) int {
	n := 1
	inSpace := false
	for _, r := range s {
		if pyIsSpace(r) {
			if !inSpace {
				n++
			}
			inSpace = true
		} else {
			inSpace = false
		}
	}
	return n
}

// rstripPy is Python's str.rstrip() with no argument.
func rstripPy(s string) string { return strings.TrimRightFunc(s, pyIsSpace) }
