package eval

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// Templates are rendered with github.com/ardanlabs/jinja (v1.12.0): among the pure-Go Jinja
// engines it prints values as Python's Jinja2 does (str() of lists and dicts with repr of
// strings, True, None, 1.0, dicts in key order), keeps the trailing newline (lm-eval's
// keep_trailing_newline=True) and has no include, import or extends, so a template cannot read
// files. github.com/nikolalohinski/gonja/v2 (v2.9.1) has StrictUndefined, but prints
// ['it's'] for ["it's"] and an empty string for None inside a list, which ast.literal_eval then
// misreads, and drops the trailing newline.
//
// What ardanlabs/jinja lacks is supplied here: Jinja2's StrictUndefined (lm-eval's setting) for
// the names a template reads from the document (checked before rendering: a name that the
// template neither binds nor finds among the document's fields is an error; an attribute or key
// missing inside a field still renders as empty, unlike Jinja2), and bounds on the time and the
// size of one rendering (renderTimeout, maxRenderBytes). lm-eval's custom regex_replace filter
// is not available: a template using it fails with the engine's error.

// renderTimeout bounds one rendering: lm-eval's templates render in microseconds, and a
// template that loops for longer (nested loops) is stopped with an error. A variable so that
// tests can shorten it.
var renderTimeout = 2 * time.Second

// maxRangeItems bounds range(): the engine builds its list whole, so range(10**12) would
// exhaust memory before any timeout.
const maxRangeItems = 1_000_000

// maxRenderBytes bounds what one rendering may produce (1 MiB).
const maxRenderBytes = 1 << 20

// template is a compiled Jinja template and the document names it reads.
type template struct {
	src   string
	tmpl  *jinja.Template
	names []string // free names: read from the document, checked as StrictUndefined does
}

func compileTemplate(src string) (*template, error) {
	t, err := jinja.Compile(src)
	if err != nil {
		return nil, err
	}
	return &template{src: src, tmpl: t, names: freeNames(src)}, nil
}

// render renders the template on doc with lm-eval's settings.
func (t *template) render(doc *Object) (string, error) {
	for _, n := range t.names {
		if _, ok := doc.Get(n); !ok {
			return "", fmt.Errorf("'%s' is undefined (the document's fields: %s)", n, strings.Join(doc.Keys, ", "))
		}
	}
	data := make(map[string]jinja.Value, len(doc.Keys)+1)
	data["range"] = boundedRange
	for _, k := range doc.Keys {
		data[k] = jinjaValue(doc.Values[k])
	}
	type result struct {
		s   string
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{err: fmt.Errorf("template engine failed: %v", r)}
			}
		}()
		s, err := t.tmpl.RenderValues(data)
		done <- result{s, err}
	}()
	timer := time.NewTimer(renderTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		if r.err == nil && len(r.s) > maxRenderBytes {
			return "", fmt.Errorf("rendered %d bytes, more than the %d allowed", len(r.s), maxRenderBytes)
		}
		if r.err == nil && !utf8.ValidString(r.s) {
			return "", fmt.Errorf("rendered text is not UTF-8")
		}
		return r.s, r.err
	case <-timer.C:
		// The engine cannot be stopped: its goroutine is left to finish; the command ends on
		// this error.
		return "", fmt.Errorf("rendering took longer than %s (a loop without bound?)", renderTimeout)
	}
}

// boundedRange is Python's range(stop), range(start, stop[, step]) as a list, refusing more
// than maxRangeItems items. It shadows the engine's own; a document field named range
// wins over it, as a context variable does in Jinja2.
var boundedRange = jinja.NewCallable("range", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	var n [3]int64
	for i, a := range args {
		if i >= 3 || !a.IsInt() {
			return jinja.Undefined(), fmt.Errorf("range takes 1 to 3 integers")
		}
		n[i] = a.AsInt()
	}
	start, stop, step := int64(0), n[0], int64(1)
	switch len(args) {
	case 0:
		return jinja.Undefined(), fmt.Errorf("range takes 1 to 3 integers")
	case 2:
		start, stop = n[0], n[1]
	case 3:
		start, stop, step = n[0], n[1], n[2]
	}
	if step == 0 {
		return jinja.Undefined(), fmt.Errorf("range() arg 3 must not be zero")
	}
	count := 0.0
	if (step > 0 && stop > start) || (step < 0 && stop < start) {
		count = math.Ceil((float64(stop) - float64(start)) / float64(step))
	}
	if count > maxRangeItems {
		return jinja.Undefined(), fmt.Errorf("range of %.0f items: more than the %d allowed in a template", count, maxRangeItems)
	}
	items := make([]jinja.Value, 0, int(count))
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		items = append(items, jinja.NewInt(i))
	}
	return jinja.NewList(items), nil
})

// jinjaValue converts a document value to the engine's value.
func jinjaValue(v any) jinja.Value {
	switch x := v.(type) {
	case nil:
		return jinja.None()
	case bool:
		return jinja.NewBool(x)
	case int64:
		return jinja.NewInt(x)
	case float64:
		return jinja.NewFloat(x)
	case string:
		return jinja.NewString(x)
	case []any:
		items := make([]jinja.Value, len(x))
		for i, e := range x {
			items[i] = jinjaValue(e)
		}
		return jinja.NewList(items)
	case *Object:
		d := jinja.NewDict()
		for _, k := range x.Keys {
			d.AsDict().Set(k, jinjaValue(x.Values[k]))
		}
		return d
	}
	return jinja.FromGoValue(v)
}

// jinjaGlobals are names a template may read that no document supplies.
var jinjaGlobals = map[string]bool{
	"and": true, "or": true, "not": true, "in": true, "is": true, "if": true, "else": true,
	"true": true, "false": true, "none": true, "True": true, "False": true, "None": true,
	"loop": true, "range": true, "namespace": true, "dict": true, "lipsum": true, "cycler": true,
	"joiner": true, "recursive": true, "raise_exception": true, "caller": true, "varargs": true,
	"kwargs": true, "super": true, "self": true,
}

// freeNames lists the names a template reads that it does not bind itself (for targets, set,
// macro parameters, with): the names StrictUndefined requires the document to have. It reads
// the template's tags token by token; names after '.', after '|' (filters), after 'is'
// (tests) and before '=' (keyword arguments) are not reads.
func freeNames(src string) []string {
	bound := map[string]bool{}
	used := map[string]bool{}
	for _, tag := range templateTags(src) {
		toks := exprTokens(tag.body)
		start := 0
		if tag.statement && len(toks) > 0 {
			switch toks[0] {
			case "for":
				i := 1
				for ; i < len(toks) && toks[i] != "in"; i++ {
					bound[toks[i]] = true
				}
				start = i
			case "set", "with":
				i := 1
				for ; i < len(toks) && toks[i] != "="; i++ {
					bound[toks[i]] = true
				}
				start = i
			case "macro", "call":
				for _, t := range toks[1:] {
					if isName(t) {
						bound[t] = true
					}
				}
				start = len(toks)
			case "raw", "endraw", "filter", "block", "endblock":
				start = len(toks)
			default:
				start = 1
			}
		}
		for i := start; i < len(toks); i++ {
			t := toks[i]
			if !isName(t) || jinjaGlobals[t] {
				continue
			}
			if i > 0 && (toks[i-1] == "." || toks[i-1] == "|" || toks[i-1] == "is" || (toks[i-1] == "not" && i > 1 && toks[i-2] == "is")) {
				continue
			}
			if i+1 < len(toks) && toks[i+1] == "=" {
				continue
			}
			used[t] = true
		}
	}
	var out []string
	for n := range used {
		if !bound[n] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

type templateTag struct {
	body      string
	statement bool
}

// templateTags returns the expression and statement tags of src ({{ }}, {% %}), skipping
// comments and raw blocks.
func templateTags(src string) []templateTag {
	var tags []templateTag
	for i := 0; i < len(src); {
		j := strings.IndexByte(src[i:], '{')
		if j < 0 || i+j+1 >= len(src) {
			break
		}
		i += j
		var end string
		switch src[i+1] {
		case '{':
			end = "}}"
		case '%':
			end = "%}"
		case '#':
			k := strings.Index(src[i+2:], "#}")
			if k < 0 {
				return tags
			}
			i += 2 + k + 2
			continue
		default:
			i++
			continue
		}
		k := closingTag(src[i+2:], end)
		if k < 0 {
			return tags
		}
		body := strings.Trim(src[i+2:i+2+k], "-+ \t\r\n")
		tags = append(tags, templateTag{body: body, statement: end == "%}"})
		i += 2 + k + 2
		if end == "%}" && strings.HasPrefix(body, "raw") {
			r := strings.Index(src[i:], "endraw")
			if r < 0 {
				return tags
			}
			i += r
		}
	}
	return tags
}

// closingTag finds end in s outside string literals.
func closingTag(s, end string) int {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case strings.HasPrefix(s[i:], end):
			return i
		}
	}
	return -1
}

// exprTokens splits an expression into names, numbers, string literals (as one token) and
// one-character operators ("==" and the like stay two tokens, which is enough to tell a
// keyword argument's '=' apart).
func exprTokens(s string) []string {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			toks = append(toks, s[i:min(j+1, len(s))])
			i = j + 1
		case isIdentByte(s, i) && !(c >= '0' && c <= '9'):
			j := i
			for j < len(s) && isIdentByte(s, j) {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && (isIdentByte(s, j) || s[j] == '.') {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		case (c == '=' || c == '!' || c == '<' || c == '>') && i+1 < len(s) && s[i+1] == '=':
			toks = append(toks, s[i:i+2])
			i += 2
		default:
			toks = append(toks, s[i:i+1])
			i++
		}
	}
	return toks
}

func isName(t string) bool {
	return t != "" && isIdentByte(t, 0) && !(t[0] >= '0' && t[0] <= '9')
}
