package eval

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Field is one of a task's doc_to_text, doc_to_target, doc_to_choice or description: a
// feature's name or a Jinja template (a string), a number, a list or (doc_to_choice) a
// mapping, as lm-eval reads them.
type Field struct {
	Name string // the task field, for errors
	Line int

	str   string
	tmpl  *template // when str is not only a feature name (compiled lazily for feature names)
	num   *int64
	list  []any
	isStr bool
}

func parseField(path, name string, n *yaml.Node) (*Field, error) {
	f := &Field{Name: name, Line: n.Line}
	v, err := yamlValue(path, n, name, 0)
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case string:
		f.str, f.isStr = x, true
		t, err := compileTemplate(x)
		if err != nil {
			return nil, taskError(path, n, name, "template error: %v", err)
		}
		f.tmpl = t
	case int64:
		if name == "description" {
			return nil, taskError(path, n, name, "must be a string")
		}
		f.num = &x
	case bool, float64:
		return nil, taskError(path, n, name, "must be a feature name, a template, a number or a list")
	case []any:
		if name == "doc_to_text" || name == "description" {
			return nil, taskError(path, n, name, "must be a feature name or a template")
		}
		f.list = x
	case *Object:
		if name != "doc_to_choice" {
			return nil, taskError(path, n, name, "a mapping is only read for doc_to_choice")
		}
		for _, k := range x.Keys {
			f.list = append(f.list, x.Values[k]) // lm-eval: list(doc_to_choice.values())
		}
	}
	return f, nil
}

// feature returns the document's feature named by a string field, when the field is one of
// the features (lm-eval: `if doc_to_text in self.features`).
func (f *Field) feature(doc *Object, features map[string]bool) (any, bool) {
	if !f.isStr || !features[f.str] {
		return nil, false
	}
	v, ok := doc.Get(f.str)
	return v, ok
}

func (f *Field) render(doc *Object) (string, error) {
	s, err := f.tmpl.render(doc)
	if err != nil {
		return "", fmt.Errorf("%s (line %d): template %q: %w", f.Name, f.Line, short(f.str), err)
	}
	return s, nil
}

func short(s string) string {
	if r := []rune(s); len(r) > 60 {
		return string(r[:59]) + "…"
	}
	return s
}

// isDigits is Python's str.isdigit for the ASCII digits lm-eval's targets use (and the other
// Unicode decimal digits, which ast.literal_eval would then refuse).
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// text is lm-eval's doc_to_text: a feature's value, or the rendered template, read as a
// number when it is all digits and the task has choices (multiple inputs).
func (f *Field) text(doc *Object, features map[string]bool, hasChoices bool) (any, error) {
	if f.num != nil {
		return *f.num, nil
	}
	if v, ok := f.feature(doc, features); ok {
		return v, nil
	}
	s, err := f.render(doc)
	if err != nil {
		return nil, err
	}
	if hasChoices && isDigits(s) {
		return literalEval(s)
	}
	return s, nil
}

// target is lm-eval's doc_to_target: a number stays one; a feature's value; a rendered
// template read as an index when it is all digits and the task has choices, as a list when it
// looks like one and reads as one.
func (f *Field) target(doc *Object, features map[string]bool, hasChoices bool) (any, error) {
	switch {
	case f.num != nil:
		return *f.num, nil
	case f.list != nil:
		return f.list, nil
	}
	if v, ok := f.feature(doc, features); ok {
		return v, nil
	}
	s, err := f.render(doc)
	if err != nil {
		return nil, err
	}
	if hasChoices && isDigits(s) {
		return literalEval(s)
	}
	if len(s) >= 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if v, err := literalEval(s); err == nil {
			return v, nil
		}
	}
	return s, nil
}

// choices is lm-eval's doc_to_choice: a feature's value, a list, or a template whose text is
// read as ast.literal_eval reads it. Every choice must be a string.
func (f *Field) choices(doc *Object, features map[string]bool) ([]string, error) {
	var v any
	switch {
	case f.list != nil:
		v = f.list
	case f.num != nil:
		return nil, fmt.Errorf("%s (line %d): a number is not a list of choices", f.Name, f.Line)
	default:
		var ok bool
		if v, ok = f.feature(doc, features); !ok {
			s, err := f.render(doc)
			if err != nil {
				return nil, err
			}
			v, err = literalEval(s)
			if err != nil {
				return nil, fmt.Errorf("%s (line %d): the template rendered %q, which ast.literal_eval cannot read: %w", f.Name, f.Line, short(s), err)
			}
		}
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s (line %d): the choices are %s, not a list", f.Name, f.Line, pyTypeName(v))
	}
	out := make([]string, len(list))
	for i, c := range list {
		s, ok := c.(string)
		if !ok {
			return nil, fmt.Errorf("%s (line %d): choice %d is %s, not a string", f.Name, f.Line, i, pyTypeName(c))
		}
		out[i] = s
	}
	return out, nil
}

// pyTypeName names a document value's type as Python would.
func pyTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "None"
	case bool:
		return "a bool"
	case int64:
		return "an int"
	case float64:
		return "a float"
	case string:
		return "a string"
	case []any:
		return "a list"
	case *Object:
		return "a dict"
	}
	return fmt.Sprintf("%T", v)
}

// pyStr is Python's str() of a document value (for a target that is not a string).
func pyStr(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return strings.TrimSpace(jinjaValue(v).String())
}
