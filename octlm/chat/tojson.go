package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ToJSON re-serializes one JSON value the way the chat template's tojson filter does under
// Hugging Face transformers: Python's json.dumps(json.loads(raw), ensure_ascii=False) with its
// default separators ", " and ": ", no indent, keys in input order.
//
// Exactly, that means: object keys keep their order; a repeated key keeps its first position and
// its last value; integers are written as they are (except -0, written 0); numbers with a
// fraction or an exponent are floats, written as Python's repr (1.0, 1e-05, 1e+16,
// 100000.0, Infinity for an overflowing literal); strings escape only '"', '\\' and control
// characters (\n, \r, \t, \b, \f, else \u00XX), leaving non-ASCII, '/', '<', '>' and '&' as they
// are.
func ToJSON(raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return "", fmt.Errorf("tojson: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", fmt.Errorf("tojson: trailing data after the JSON value")
	}
	var b strings.Builder
	v.write(&b)
	return b.String(), nil
}

// jsonValue is a decoded JSON value that keeps object key order.
type jsonValue struct {
	kind    byte // 'n' null, 'b' bool, '#' number, 's' string, '[' array, '{' object
	boolean bool
	text    string // number literal or string
	items   []jsonValue
	keys    []string
	byName  map[string]int // object: key -> index in keys/items
}

// parseValue reads one value from dec's token stream.
func parseValue(dec *json.Decoder) (jsonValue, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return jsonValue{}, errors.New("unexpected end of JSON input")
		}
		return jsonValue{}, err
	}
	switch t := tok.(type) {
	case nil:
		return jsonValue{kind: 'n'}, nil
	case bool:
		return jsonValue{kind: 'b', boolean: t}, nil
	case json.Number:
		return jsonValue{kind: '#', text: string(t)}, nil
	case string:
		return jsonValue{kind: 's', text: t}, nil
	case json.Delim:
		switch t {
		case '[':
			v := jsonValue{kind: '['}
			for dec.More() {
				item, err := parseValue(dec)
				if err != nil {
					return jsonValue{}, err
				}
				v.items = append(v.items, item)
			}
			_, err := dec.Token() // ']'
			return v, err
		case '{':
			v := jsonValue{kind: '{', byName: map[string]int{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jsonValue{}, err
				}
				key, ok := kt.(string)
				if !ok {
					return jsonValue{}, fmt.Errorf("object key %v is not a string", kt)
				}
				item, err := parseValue(dec)
				if err != nil {
					return jsonValue{}, err
				}
				// Python's dict(pairs): a repeated key keeps its first position, takes the last value.
				if i, dup := v.byName[key]; dup {
					v.items[i] = item
					continue
				}
				v.byName[key] = len(v.keys)
				v.keys = append(v.keys, key)
				v.items = append(v.items, item)
			}
			_, err := dec.Token() // '}'
			return v, err
		}
	}
	return jsonValue{}, fmt.Errorf("unexpected JSON token %v", tok)
}

// write appends v as Python's json.dumps(ensure_ascii=False) writes it.
func (v *jsonValue) write(b *strings.Builder) {
	switch v.kind {
	case 'n':
		b.WriteString("null")
	case 'b':
		if v.boolean {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case '#':
		b.WriteString(pythonNumber(v.text))
	case 's':
		b.WriteString(QuoteJSON(v.text))
	case '[':
		b.WriteByte('[')
		for i := range v.items {
			if i > 0 {
				b.WriteString(", ")
			}
			v.items[i].write(b)
		}
		b.WriteByte(']')
	case '{':
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(QuoteJSON(k))
			b.WriteString(": ")
			v.items[i].write(b)
		}
		b.WriteByte('}')
	}
}

// pythonNumber converts a JSON number literal the way json.loads then json.dumps do: a literal
// without fraction or exponent is a Python int (written back unchanged, -0 as 0); any other is a
// float, written as repr(float).
func pythonNumber(lit string) string {
	if !strings.ContainsAny(lit, ".eE") {
		if lit == "-0" {
			return "0"
		}
		return lit
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		// Unreachable: encoding/json only yields well-formed literals.
		return lit
	}
	return pythonFloatRepr(f)
}

// pythonFloatRepr formats f as Python's repr(float): the shortest digits that round-trip, in
// fixed notation when the decimal exponent is in [-4, 16) and with ".0" when integral, else in
// scientific notation with a signed exponent of at least two digits.
func pythonFloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	// Shortest round-trip digits: "-d.ddddde±XX".
	e := strconv.FormatFloat(f, 'e', -1, 64)
	sign := ""
	if e[0] == '-' {
		sign, e = "-", e[1:]
	}
	mant, expText, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expText)
	digits := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1 // value = 0.digits × 10^decpt
	if decpt <= -4 || decpt > 16 {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		es := "+"
		if exp < 0 {
			es, exp = "-", -exp
		}
		return fmt.Sprintf("%s%se%s%02d", sign, m, es, exp)
	}
	switch {
	case decpt <= 0:
		return sign + "0." + strings.Repeat("0", -decpt) + digits
	case decpt >= len(digits):
		return sign + digits + strings.Repeat("0", decpt-len(digits)) + ".0"
	default:
		return sign + digits[:decpt] + "." + digits[decpt:]
	}
}

// QuoteJSON quotes s as Python's json.dumps(ensure_ascii=False) and JavaScript's JSON.stringify
// do: escapes for '"', '\\' and the C0 controls, everything else (non-ASCII, U+2028, DEL, '/',
// HTML characters) written as is. Invalid UTF-8 is written as U+FFFD.
func QuoteJSON(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			b.WriteRune(r) // RuneError for invalid bytes, as encoding/json decodes them
			i += size
			continue
		}
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
		i++
	}
	b.WriteByte('"')
	return b.String()
}
