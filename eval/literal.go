package eval

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// literalEval reads s as Python's ast.literal_eval reads the text a template rendered: strings
// (single or double quoted, with Python's escapes, adjacent ones joined), integers, floats,
// True, False, None, lists, tuples (read as lists) and dicts with string keys. Sets, bytes and
// expressions are refused.
func literalEval(s string) (any, error) {
	p := &litParser{s: strings.TrimLeft(s, " \t")}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i < len(p.s) {
		return nil, fmt.Errorf("unexpected %q at offset %d", p.rest(), p.i)
	}
	return v, nil
}

type litParser struct {
	s string
	i int
}

func (p *litParser) rest() string {
	r := p.s[p.i:]
	if len(r) > 20 {
		r = r[:20] + "…"
	}
	return r
}

func (p *litParser) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n\f\v", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *litParser) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	p.space()
	if p.i >= len(p.s) {
		return nil, fmt.Errorf("unexpected end of text")
	}
	switch c := p.s[p.i]; {
	case c == '[':
		p.i++
		return p.sequence(']', depth)
	case c == '(':
		p.i++
		return p.sequence(')', depth)
	case c == '{':
		p.i++
		return p.dict(depth)
	case c == '\'' || c == '"':
		var b strings.Builder
		for {
			str, err := p.str()
			if err != nil {
				return nil, err
			}
			b.WriteString(str)
			p.space()
			if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
				return b.String(), nil
			}
		}
	case c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9'):
		return p.number()
	}
	for _, kw := range []struct {
		word string
		v    any
	}{{"True", true}, {"False", false}, {"None", nil}} {
		if strings.HasPrefix(p.s[p.i:], kw.word) && !isIdentByte(p.s, p.i+len(kw.word)) {
			p.i += len(kw.word)
			return kw.v, nil
		}
	}
	return nil, fmt.Errorf("not a Python literal at %q", p.rest())
}

func isIdentByte(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	c := s[i]
	return c == '_' || c >= 0x80 || (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

func (p *litParser) sequence(end byte, depth int) (any, error) {
	list := []any{}
	for {
		p.space()
		if p.i < len(p.s) && p.s[p.i] == end {
			p.i++
			return list, nil
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		list = append(list, v)
		p.space()
		if p.i >= len(p.s) {
			return nil, fmt.Errorf("unclosed %q", map[byte]string{']': "[", ')': "("}[end])
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case end:
		default:
			return nil, fmt.Errorf("expected ',' or %q at %q", end, p.rest())
		}
	}
}

func (p *litParser) dict(depth int) (any, error) {
	o := NewObject()
	for {
		p.space()
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return o, nil
		}
		k, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		key, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("dict key %v is not a string (only string keys are read)", k)
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, fmt.Errorf("expected ':' at %q (sets are not read)", p.rest())
		}
		p.i++
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		o.Set(key, v)
		p.space()
		if p.i >= len(p.s) {
			return nil, fmt.Errorf("unclosed {")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case '}':
		default:
			return nil, fmt.Errorf("expected ',' or '}' at %q", p.rest())
		}
	}
}

func (p *litParser) number() (any, error) {
	start := p.i
	neg := false
	for p.i < len(p.s) && (p.s[p.i] == '-' || p.s[p.i] == '+') {
		if p.s[p.i] == '-' {
			neg = !neg
		}
		p.i++
		p.space()
	}
	numStart := p.i
	for p.i < len(p.s) && (isIdentByte(p.s, p.i) || p.s[p.i] == '.' ||
		((p.s[p.i] == '-' || p.s[p.i] == '+') && (p.s[p.i-1]|0x20) == 'e')) {
		p.i++
	}
	text := strings.ReplaceAll(p.s[numStart:p.i], "_", "")
	if text == "" {
		return nil, fmt.Errorf("not a number at %q", p.s[start:])
	}
	if n, err := strconv.ParseInt(text, 0, 64); err == nil && (text == "0" || text[0] != '0' || len(text) > 1 && text[1]|0x20 >= 'a') {
		if neg {
			n = -n
		}
		return n, nil
	}
	if strings.ContainsAny(text, "xXoObBjJ") {
		return nil, fmt.Errorf("number %q is not read", text)
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !isRangeErr(err) {
		return nil, fmt.Errorf("not a number: %q", text)
	}
	if neg {
		f = -f
	}
	return f, nil
}

// str reads one quoted string with Python's escapes (no prefixes, no triple quotes).
func (p *litParser) str() (string, error) {
	q := p.s[p.i]
	if strings.HasPrefix(p.s[p.i:], strings.Repeat(string(q), 3)) {
		return "", fmt.Errorf("triple-quoted strings are not read")
	}
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == q:
			p.i++
			return b.String(), nil
		case c == '\n':
			return "", fmt.Errorf("newline inside a string")
		case c == '\\':
			if p.i+1 >= len(p.s) {
				return "", fmt.Errorf("unfinished escape")
			}
			e := p.s[p.i+1]
			p.i += 2
			switch e {
			case '\n':
			case '\\', '\'', '"':
				b.WriteByte(e)
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'v':
				b.WriteByte('\v')
			case 'x', 'u', 'U':
				n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
				if p.i+n > len(p.s) {
					return "", fmt.Errorf("short \\%c escape", e)
				}
				r, err := strconv.ParseUint(p.s[p.i:p.i+n], 16, 32)
				if err != nil || r > utf8.MaxRune {
					return "", fmt.Errorf("bad \\%c escape %q", e, p.s[p.i:p.i+n])
				}
				b.WriteRune(rune(r))
				p.i += n
			case '0', '1', '2', '3', '4', '5', '6', '7':
				j := p.i - 1
				for p.i < len(p.s) && p.i-j < 3 && p.s[p.i] >= '0' && p.s[p.i] <= '7' {
					p.i++
				}
				r, _ := strconv.ParseUint(p.s[j:p.i], 8, 32)
				b.WriteRune(rune(r))
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	return "", fmt.Errorf("unclosed string")
}
