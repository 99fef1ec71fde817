package eval

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/octlm/octlm/octlm/chat"
)

// pyFloatRepr is Python's repr of a float: the shortest text that reads back, fixed notation
// for exponents from -4 to 15, else scientific with a two-digit exponent at least.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expText, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expText)
	if exp >= -4 && exp < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.ContainsAny(s, ".") {
			s += ".0"
		}
		return s
	}
	sign := "+"
	if exp < 0 {
		sign, exp = "-", -exp
	}
	es := strconv.Itoa(exp)
	if len(es) < 2 {
		es = "0" + es
	}
	return mant + "e" + sign + es
}

// pyJSONDumps is Python's json.dumps(v, indent=2, ensure_ascii=False) of a document value (what
// lm-eval hashes for doc_hash).
func pyJSONDumps(v any) string {
	var b strings.Builder
	writePyJSON(&b, v, 0)
	return b.String()
}

func writePyJSON(b *strings.Builder, v any, depth int) {
	nl := func(d int) {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat("  ", d))
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(map[bool]string{true: "true", false: "false"}[x])
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString("NaN")
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(pyFloatRepr(x))
		}
	case string:
		b.WriteString(chat.QuoteJSON(x))
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			nl(depth + 1)
			writePyJSON(b, e, depth+1)
		}
		nl(depth)
		b.WriteByte(']')
	case *Object:
		if len(x.Keys) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteByte('{')
		for i, k := range x.Keys {
			if i > 0 {
				b.WriteByte(',')
			}
			nl(depth + 1)
			b.WriteString(chat.QuoteJSON(k))
			b.WriteString(": ")
			writePyJSON(b, x.Values[k], depth+1)
		}
		nl(depth)
		b.WriteByte('}')
	}
}

// jsonText is JSON of a document value or of plain Go values, HTML characters unescaped.
func jsonText(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
