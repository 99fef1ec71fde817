package tokenizer

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonReader is a small strict JSON reader for the big parts of tokenizer.json (the vocabulary
// and the merges, about 11 MB for Qwen3), which encoding/json reads several times slower
// through reflection. The other fields are handed to encoding/json as raw values.
type jsonReader struct {
	data []byte
	pos  int
}

func (r *jsonReader) errorf(format string, args ...any) error {
	return fmt.Errorf("JSON at byte %d: %s", r.pos, fmt.Sprintf(format, args...))
}

func (r *jsonReader) ws() {
	for r.pos < len(r.data) {
		switch r.data[r.pos] {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return
		}
	}
}

// peek returns the next byte after whitespace, or 0 at the end.
func (r *jsonReader) peek() byte {
	r.ws()
	if r.pos >= len(r.data) {
		return 0
	}
	return r.data[r.pos]
}

func (r *jsonReader) expect(c byte) error {
	if r.peek() != c {
		if r.pos >= len(r.data) {
			return r.errorf("unexpected end, want %q", c)
		}
		return r.errorf("found %q, want %q", r.data[r.pos], c)
	}
	r.pos++
	return nil
}

// object calls fn for each key of an object; fn must read the value.
func (r *jsonReader) object(fn func(key []byte) error) error {
	if err := r.expect('{'); err != nil {
		return err
	}
	if r.peek() == '}' {
		r.pos++
		return nil
	}
	var key []byte
	for {
		var err error
		if key, err = r.str(key[:0]); err != nil {
			return err
		}
		if err := r.expect(':'); err != nil {
			return err
		}
		if err := fn(key); err != nil {
			return err
		}
		switch r.peek() {
		case ',':
			r.pos++
		case '}':
			r.pos++
			return nil
		default:
			return r.errorf("want ',' or '}' in object")
		}
	}
}

// array calls fn for each element of an array; fn must read the element.
func (r *jsonReader) array(fn func() error) error {
	if err := r.expect('['); err != nil {
		return err
	}
	if r.peek() == ']' {
		r.pos++
		return nil
	}
	for {
		if err := fn(); err != nil {
			return err
		}
		switch r.peek() {
		case ',':
			r.pos++
		case ']':
			r.pos++
			return nil
		default:
			return r.errorf("want ',' or ']' in array")
		}
	}
}

// str reads a string and appends its decoded bytes to buf. Lone surrogate escapes and invalid
// UTF-8 become U+FFFD, as with encoding/json.
func (r *jsonReader) str(buf []byte) ([]byte, error) {
	if err := r.expect('"'); err != nil {
		return buf, err
	}
	d := r.data
	for {
		start := r.pos
		for r.pos < len(d) && d[r.pos] != '"' && d[r.pos] != '\\' && d[r.pos] >= 0x20 && d[r.pos] < utf8.RuneSelf {
			r.pos++
		}
		buf = append(buf, d[start:r.pos]...)
		if r.pos >= len(d) {
			return buf, r.errorf("unterminated string")
		}
		switch c := d[r.pos]; {
		case c == '"':
			r.pos++
			return buf, nil
		case c < 0x20:
			return buf, r.errorf("control character in string")
		case c >= utf8.RuneSelf:
			ru, n := utf8.DecodeRune(d[r.pos:])
			if ru == utf8.RuneError && n == 1 {
				buf = append(buf, "\uFFFD"...)
			} else {
				buf = append(buf, d[r.pos:r.pos+n]...)
			}
			r.pos += n
		default: // backslash
			if r.pos+1 >= len(d) {
				return buf, r.errorf("unterminated escape")
			}
			e := d[r.pos+1]
			r.pos += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				u, err := r.hex4()
				if err != nil {
					return buf, err
				}
				ru := rune(u)
				if utf16.IsSurrogate(ru) {
					ru = utf8.RuneError
					if r.pos+1 < len(d) && d[r.pos] == '\\' && d[r.pos+1] == 'u' {
						save := r.pos
						r.pos += 2
						u2, err := r.hex4()
						if err != nil {
							return buf, err
						}
						if dec := utf16.DecodeRune(rune(u), rune(u2)); dec != utf8.RuneError {
							ru = dec
						} else {
							r.pos = save
						}
					}
				}
				buf = utf8.AppendRune(buf, ru)
			default:
				return buf, r.errorf("invalid escape \\%c", e)
			}
		}
	}
}

func (r *jsonReader) hex4() (uint16, error) {
	if r.pos+4 > len(r.data) {
		return 0, r.errorf("short \\u escape")
	}
	v, err := strconv.ParseUint(string(r.data[r.pos:r.pos+4]), 16, 16)
	if err != nil {
		return 0, r.errorf("invalid \\u escape %q", r.data[r.pos:r.pos+4])
	}
	r.pos += 4
	return uint16(v), nil
}

// integer reads a JSON number that must be an integer.
func (r *jsonReader) integer() (int, error) {
	r.ws()
	start := r.pos
	if r.pos < len(r.data) && r.data[r.pos] == '-' {
		r.pos++
	}
	for r.pos < len(r.data) && r.data[r.pos] >= '0' && r.data[r.pos] <= '9' {
		r.pos++
	}
	v, err := strconv.Atoi(string(r.data[start:r.pos]))
	if err != nil || (r.pos < len(r.data) && (r.data[r.pos] == '.' || r.data[r.pos] == 'e' || r.data[r.pos] == 'E')) {
		r.pos = start
		return 0, r.errorf("want an integer")
	}
	return v, nil
}

// skip reads any value and returns its raw bytes.
func (r *jsonReader) skip() ([]byte, error) {
	c := r.peek()
	start := r.pos
	var err error
	switch {
	case c == '{':
		err = r.object(func([]byte) error { _, err := r.skip(); return err })
	case c == '[':
		err = r.array(func() error { _, err := r.skip(); return err })
	case c == '"':
		_, err = r.str(nil)
	case c == '-' || (c >= '0' && c <= '9'):
		for r.pos < len(r.data) && isNumberByte(r.data[r.pos]) {
			r.pos++
		}
		_, err = strconv.ParseFloat(string(r.data[start:r.pos]), 64)
		if err != nil {
			r.pos = start
			err = r.errorf("invalid number")
		}
	default:
		err = r.literal()
	}
	return r.data[start:r.pos], err
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

func (r *jsonReader) literal() error {
	for _, lit := range []string{"null", "true", "false"} {
		if len(r.data)-r.pos >= len(lit) && string(r.data[r.pos:r.pos+len(lit)]) == lit {
			r.pos += len(lit)
			return nil
		}
	}
	return r.errorf("unexpected value")
}

// end checks that only whitespace is left.
func (r *jsonReader) end() error {
	if r.peek() != 0 {
		return r.errorf("data after the top-level value")
	}
	return nil
}
