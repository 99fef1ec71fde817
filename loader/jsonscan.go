package loader

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// jsonScanner reads JSON token by token so that duplicate keys (which encoding/json silently
// accepts, keeping the last) are caught, and so that unexpected nesting is refused at once
// instead of being decoded. Every error it returns is a *FormatError.
type jsonScanner struct {
	dec *json.Decoder
}

func newJSONScanner(b []byte) *jsonScanner {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return &jsonScanner{dec: dec}
}

// token returns the next token; syntax errors and a premature end become RuleJSON.
func (s *jsonScanner) token(ctx string) (json.Token, error) {
	t, err := s.dec.Token()
	if err == io.EOF {
		return nil, formatErr(ctx, RuleJSON, "unexpected end of JSON")
	}
	if err != nil {
		return nil, formatErr(ctx, RuleJSON, "%v", err)
	}
	return t, nil
}

// object reads one JSON object and calls fn for each key; fn must consume the value.
// notObject is the rule reported when the value is not an object.
func (s *jsonScanner) object(ctx string, notObject Rule, fn func(key string) error) error {
	t, err := s.token(ctx)
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return formatErr(ctx, notObject, "got %s", describeToken(t))
	}
	seen := make(map[string]struct{})
	for {
		t, err := s.token(ctx)
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); ok && d == '}' {
			return nil
		}
		key, ok := t.(string)
		if !ok { // the decoder only yields strings as keys; keep the check for safety
			return formatErr(ctx, RuleJSON, "object key is %s", describeToken(t))
		}
		if _, dup := seen[key]; dup {
			name := key
			if ctx != "" {
				name = ctx
			}
			return formatErr(name, RuleDuplicateKey, "key %q appears twice", key)
		}
		seen[key] = struct{}{}
		if err := fn(key); err != nil {
			return err
		}
	}
}

// str reads a JSON string.
func (s *jsonScanner) str(ctx string, rule Rule) (string, error) {
	t, err := s.token(ctx)
	if err != nil {
		return "", err
	}
	v, ok := t.(string)
	if !ok {
		return "", formatErr(ctx, rule, "got %s, want a string", describeToken(t))
	}
	return v, nil
}

// int64Value reads a JSON integer (no fraction, no exponent) that fits int64.
func (s *jsonScanner) int64Value(ctx string, rule Rule) (int64, error) {
	t, err := s.token(ctx)
	if err != nil {
		return 0, err
	}
	n, ok := t.(json.Number)
	if !ok {
		return 0, formatErr(ctx, rule, "got %s, want an integer", describeToken(t))
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return 0, formatErr(ctx, rule, "%s is not an integer that fits 64 bits", n)
	}
	return v, nil
}

// intList reads a JSON array of integers.
func (s *jsonScanner) intList(ctx string, rule Rule) ([]int64, error) {
	t, err := s.token(ctx)
	if err != nil {
		return nil, err
	}
	if d, ok := t.(json.Delim); !ok || d != '[' {
		return nil, formatErr(ctx, rule, "got %s, want a list", describeToken(t))
	}
	out := []int64{}
	for {
		t, err := s.token(ctx)
		if err != nil {
			return nil, err
		}
		if d, ok := t.(json.Delim); ok && d == ']' {
			return out, nil
		}
		n, ok := t.(json.Number)
		if !ok {
			return nil, formatErr(ctx, rule, "list holds %s, want integers", describeToken(t))
		}
		v, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return nil, formatErr(ctx, rule, "%s is not an integer that fits 64 bits", n)
		}
		out = append(out, v)
	}
}

// end checks that nothing but whitespace follows the top-level value.
func (s *jsonScanner) end(ctx string) error {
	t, err := s.dec.Token()
	if err == io.EOF {
		return nil
	}
	var se *json.SyntaxError
	if err != nil && !errors.As(err, &se) {
		return formatErr(ctx, RuleJSON, "%v", err)
	}
	if err != nil {
		return formatErr(ctx, RuleJSON, "data after the top-level object: %v", err)
	}
	return formatErr(ctx, RuleJSON, "data after the top-level object: %s", describeToken(t))
}

func describeToken(t json.Token) string {
	switch v := t.(type) {
	case json.Delim:
		switch v {
		case '{':
			return "an object"
		case '[':
			return "a list"
		}
		return fmt.Sprintf("%q", string(v))
	case string:
		return fmt.Sprintf("the string %q", truncate(v, 40))
	case json.Number:
		return "the number " + truncate(string(v), 40)
	case bool:
		return fmt.Sprintf("%v", v)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", t)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
