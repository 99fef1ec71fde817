package chat

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

// The wants are Python 3.11's json.dumps(json.loads(in), ensure_ascii=False).
func TestToJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"b":1,"a":[true,false,null]}`, `{"b": 1, "a": [true, false, null]}`},
		{`{"a":1,"a":2,"b":3}`, `{"a": 2, "b": 3}`},
		{`{"x":{"k":1,"j":2,"k":3}}`, `{"x": {"k": 3, "j": 2}}`},
		{`{"2":1,"1":2,"b":3}`, `{"2": 1, "1": 2, "b": 3}`},
		{`[]`, `[]`},
		{`{}`, `{}`},
		{`[[],{},[{}]]`, `[[], {}, [{}]]`},
		{`"é<>&/\u2028\u0000\u001f\u007f\t\\\""`, "\"é<>&/\u2028\\u0000\\u001f\u007f\\t\\\\\\\"\""},
		{`"\b\f\n\r"`, `"\b\f\n\r"`},
		{`"\ud83d\ude00 中"`, `"😀 中"`},
		{"  [ 1 , 2 ]  ", `[1, 2]`},
		{`-0`, `0`},
		{`0`, `0`},
		{`12345678901234567890123`, `12345678901234567890123`},
		{`1E400`, `Infinity`},
		{`-1e400`, `-Infinity`},
		{`1e-400`, `0.0`},
		{`5e-324`, `5e-324`},
		{`1.7976931348623157e308`, `1.7976931348623157e+308`},
		{`9007199254740993.0`, `9007199254740992.0`},
		{`0.30000000000000004`, `0.30000000000000004`},
		{`1e22`, `1e+22`},
		{`123.456`, `123.456`},
		{`-2.5E-3`, `-0.0025`},
		{`-0.0`, `-0.0`},
		{`1.0`, `1.0`},
		{`1e5`, `100000.0`},
		{`1e15`, `1000000000000000.0`},
		{`1e16`, `1e+16`},
		{`0.0001`, `0.0001`},
		{`0.00001`, `1e-05`},
		{`1.5e-7`, `1.5e-07`},
		{`123456789012345678.0`, `1.2345678901234568e+17`},
	} {
		got, err := ToJSON([]byte(tc.in))
		if err != nil {
			t.Errorf("ToJSON(%s): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ToJSON(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestToJSONErrors(t *testing.T) {
	for _, in := range []string{``, `{`, `[1,]`, `{"a" 1}`, `1 2`, `{"a":1}x`, `NaN`, `'a'`, `{1:2}`} {
		if got, err := ToJSON([]byte(in)); err == nil {
			t.Errorf("ToJSON(%q) = %q, want an error", in, got)
		} else if !strings.HasPrefix(err.Error(), "tojson: ") {
			t.Errorf("ToJSON(%q) error %q lacks the tojson: prefix", in, err)
		}
	}
}

// The wants are Python's repr(float(x)).
func TestPythonFloatRepr(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{1, "1.0"},
		{-1.5, "-1.5"},
		{0.1, "0.1"},
		{1e-4, "0.0001"},
		{1.234e-4, "0.0001234"},
		{1e-5, "1e-05"},
		{-1.25e-5, "-1.25e-05"},
		{9999999999999998, "9999999999999998.0"},
		{1e16, "1e+16"},
		{1.5e300, "1.5e+300"},
		{1e100, "1e+100"},
		{math.Inf(1), "Infinity"},
		{math.NaN(), "NaN"},
	} {
		if got := pythonFloatRepr(tc.f); got != tc.want {
			t.Errorf("pythonFloatRepr(%v) = %s, want %s", tc.f, got, tc.want)
		}
	}
}

// FuzzToJSON checks that ToJSON's output of any valid JSON is valid JSON that means the same
// value (numbers compared as float64, where Python's Infinity is out of JSON's reach).
func FuzzToJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,{"b":null}],"c":"\u00e9\n"}`, `[1e5,-0,0.0001]`, `"x"`, `{"a":1,"a":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := ToJSON([]byte(in))
		if !json.Valid([]byte(in)) {
			if err == nil {
				t.Fatalf("ToJSON(%q) = %q for invalid JSON", in, out)
			}
			return
		}
		if err != nil {
			t.Fatalf("ToJSON(%q): %v", in, err)
		}
		if strings.Contains(out, "Infinity") || strings.Contains(out, "NaN") {
			return // overflowing literals: Python's non-JSON output, checked in TestToJSON
		}
		var a, b any
		if err := json.Unmarshal([]byte(in), &a); err != nil {
			return
		}
		if err := json.Unmarshal([]byte(out), &b); err != nil {
			t.Fatalf("ToJSON(%q) = %q, not JSON: %v", in, out, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("ToJSON(%q) = %q changes the value", in, out)
		}
		// Idempotent: its own output re-serializes unchanged.
		if again, err := ToJSON([]byte(out)); err != nil || again != out {
			t.Fatalf("ToJSON(%q) = %q, but ToJSON of that = %q, %v", in, out, again, err)
		}
	})
}

func TestPythonNumberIntegers(t *testing.T) {
	for _, lit := range []string{"7", "-12", "18446744073709551617"} {
		if got := pythonNumber(lit); got != lit {
			t.Errorf("pythonNumber(%s) = %s", lit, got)
		}
	}
}
