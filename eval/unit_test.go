package eval

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestPyRandom compares the Mersenne Twister with CPython's random.Random (values printed by
// /usr/bin/python3: random.Random(seed).random()).
func TestPyRandom(t *testing.T) {
	for _, c := range []struct {
		seed uint32
		want []float64
	}{
		{0, []float64{0.8444218515250481, 0.7579544029403025, 0.420571580830845}},
		{7, []float64{0.32383276483316237, 0.15084917392450192}},
	} {
		r := newPyRandom(c.seed)
		for i, w := range c.want {
			if g := r.random(); g != w {
				t.Errorf("Random(%d) draw %d = %v, want %v", c.seed, i, g, w)
			}
		}
	}
}

// TestBootstrapStderr compares perplexity's bootstrap standard error with lm-eval's
// bootstrap_stderr(perplexity, xs, 100000) run in /usr/bin/python3 (2.3959464106811006).
func TestBootstrapStderr(t *testing.T) {
	xs := []float64{-1.5, -0.25, -3.0, -2.2, -0.7}
	got := bootstrapStderr(perplexity, xs, BootstrapIters)
	if want := 2.3959464106811006; math.Abs(got-want) > 1e-12*want {
		t.Errorf("bootstrap stderr %v, want %v", got, want)
	}
	if got, want := perplexity(xs), 4.618176822299781; math.Abs(got-want) > 1e-15*want {
		t.Errorf("perplexity %v, want %v", got, want)
	}
}

func TestLiteralEval(t *testing.T) {
	obj := NewObject()
	obj.Set("a", int64(1))
	obj.Set("b", []any{"x"})
	for _, c := range []struct {
		in   string
		want any
		err  bool
	}{
		{`['green', "it's", 'a"b']`, []any{"green", "it's", `a"b`}, false},
		{`[1, -2, 3.5, 1e3, True, None,]`, []any{int64(1), int64(-2), 3.5, 1000.0, true, nil}, false},
		{`('a', 'b')`, []any{"a", "b"}, false},
		{`{'a': 1, 'b': ['x']}`, obj, false},
		{`'\n\x41\u00e9' 'z'`, "\nA\u00e9z", false},
		{`  [1]  `, []any{int64(1)}, false},
		{`42`, int64(42), false},
		{`[1, 2`, nil, true},
		{`{1, 2}`, nil, true},
		{`os.system('x')`, nil, true},
		{`[1] + [2]`, nil, true},
		{`'''x'''`, nil, true},
		{``, nil, true},
	} {
		got, err := literalEval(c.in)
		if (err != nil) != c.err {
			t.Errorf("literalEval(%q): error %v, want error %v", c.in, err, c.err)
			continue
		}
		if !c.err && !reflect.DeepEqual(got, c.want) {
			t.Errorf("literalEval(%q) = %#v, want %#v", c.in, got, c.want)
		}
	}
}

func TestFreeNames(t *testing.T) {
	for _, c := range []struct {
		src  string
		want []string
	}{
		{"Q: {{q}}\nA:", []string{"q"}},
		{"{{ question.strip() }} {{ choices['text'][label] | upper }}", []string{"choices", "label", "question"}},
		{"{% for c in options %}{{ loop.index }}. {{ c }}{% endfor %}", []string{"options"}},
		{"{% set x = a %}{{ x ~ 'lit {{ b }}' }}", []string{"a"}},
		{"{{ x if x is defined else y }}", []string{"x", "y"}},
		{"{{ f(key=value) }}", []string{"f", "value"}},
		{"{# {{ hidden }} #}{{ shown }}", []string{"shown"}},
		{"no tags", nil},
	} {
		if got := freeNames(c.src); !reflect.DeepEqual(got, c.want) {
			t.Errorf("freeNames(%q) = %q, want %q", c.src, got, c.want)
		}
	}
}

func TestRender(t *testing.T) {
	doc := NewObject()
	doc.Set("q", "it's")
	doc.Set("options", []any{"a", "it's", nil, int64(1), 1.0})
	doc.Set("n", int64(3))
	for _, c := range []struct {
		src, want, err string
	}{
		{"{{options}}", `['a', "it's", None, 1, 1.0]`, ""},
		{"{{q}}\n", "it's\n", ""}, // keep_trailing_newline
		{"{{ n + 1 }}", "4", ""},
		{"{{ missing }}", "", "'missing' is undefined"},
		{"{% for i in range(3) %}{{ i }}{% endfor %}", "012", ""},
		{"{% for i in range(10**12) %}{{ i }}{% endfor %}", "", "more than the 1000000 allowed"},
		{"{{ 'ab' * 600000 }}", "", "more than the 1048576 allowed"},
	} {
		tm, err := compileTemplate(c.src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tm.render(doc)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("render(%q): error %v, want one containing %q", c.src, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("render(%q) = %q, %v; want %q", c.src, got, err, c.want)
		}
	}
}

// TestRollingWindows checks lm-eval's documented example (loglikelihood_rolling's docstring:
// tokens 0..9, max length 4, prefix EOT) after make_disjoint_window.
func TestRollingWindows(t *testing.T) {
	const eot = 99
	got := RollingWindows([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, eot, 4, 1)
	want := []Window{
		{Context: []int{eot}, Predict: []int{0, 1, 2, 3}},
		{Context: []int{3}, Predict: []int{4, 5, 6, 7}},
		{Context: []int{5, 6, 7}, Predict: []int{8, 9}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("windows %v, want %v", got, want)
	}
	if w := RollingWindows(nil, eot, 4, 1); w != nil {
		t.Errorf("no tokens: %v, want none", w)
	}
}

func TestCountWords(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"a b  c", 3}, {" a", 2}, {"a ", 2}, {"", 1}, {"a\u00a0b\u2003c\x1fd", 4},
	} {
		if got := countWords(c.in); got != c.want {
			t.Errorf("countWords(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestPyFloatRepr(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0.0", 1: "1.0", -13.046048398409772: "-13.046048398409772", 1e-5: "1e-05",
		1e16: "1e+16", 1.5e15: "1500000000000000.0", 0.0001: "0.0001", 123456789.5: "123456789.5",
	} {
		if got := pyFloatRepr(f); got != want {
			t.Errorf("pyFloatRepr(%v) = %q, want %q", f, got, want)
		}
	}
}

func TestGoldIndices(t *testing.T) {
	choices := []string{"a", "b", "c"}
	for _, c := range []struct {
		target any
		want   []int
		err    string
	}{
		{int64(1), []int{1}, ""},
		{"c", []int{2}, ""},
		{[]any{int64(0), int64(2)}, []int{0, 2}, ""},
		{int64(3), nil, "out of range"},
		{int64(-1), nil, "out of range"},
		{"d", nil, "not one of the choices"},
		{1.5, nil, "neither an index"},
	} {
		got, err := goldIndices(c.target, choices)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("goldIndices(%v): %v, want error %q", c.target, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("goldIndices(%v) = %v, %v; want %v", c.target, got, err, c.want)
		}
	}
}

func TestExactMatchAndRegex(t *testing.T) {
	mc := MetricConfig{Metric: "exact_match", IgnoreCase: true, IgnorePunctuation: true, RegexesToIgnore: []string{",", `\$`}}
	if !exactMatch(mc, "The Answer: $1,000!", "the answer 1000") {
		t.Error("exact_match with ignore_case, ignore_punctuation and regexes should match")
	}
	if exactMatch(MetricConfig{}, "A", "a") {
		t.Error("exact_match without ignore_case matched different case")
	}
	re, _ := compilePythonRegex(`#### (\-?[0-9\.\,]+)`)
	step := FilterStep{Function: "regex", Fallback: "[invalid]"}
	if got := regexExtract(re, step, "so #### 42 and #### 7"); got != "42" {
		t.Errorf("regex filter: %q, want 42", got)
	}
	if got := regexExtract(re, step, "no number"); got != "[invalid]" {
		t.Errorf("regex filter fallback: %q", got)
	}
	if _, err := compilePythonRegex(`(?<=a)b`); err == nil {
		t.Error("a lookbehind should be refused")
	}
}

// TestDocHash compares doc_hash (SHA-256 of json.dumps(doc, indent=2, ensure_ascii=False)) with
// the values /usr/bin/python3 printed for the same documents.
func TestDocHash(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{`{"q": "What color is the sky on a clear day?", "options": ["green", "blue", "red"], "gold": 1}`, "2d3bed49696e8b28ef2ec69a00143f1c6db5ab9a6cc82c8735616e43f6cda48c"},
		{`{"a": 1.5, "b": [null, true, "x\u00e9\n"], "c": {}, "d": [], "e": 1e-07}`, "e11b3aa6ac933cf47ffa1c1751dda26bffef4443acf3ae6356ecaa10626f988b"},
	} {
		v, err := parseJSONValue([]byte(c.json))
		if err != nil {
			t.Fatal(err)
		}
		if got := hashString(pyJSONDumps(v)); got != c.want {
			t.Errorf("doc_hash of %s = %s, want %s\n%s", c.json, got, c.want, pyJSONDumps(v))
		}
	}
}
