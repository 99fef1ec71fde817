// Package eval is octlm's evaluation harness: it reads lm-evaluation-harness task YAMLs and
// their local data (JSON, JSON Lines, Parquet), builds the requests lm-eval builds (contexts,
// continuations, rolling windows, generations), answers them as lm-eval's Hugging Face backend
// does on an octlm model, and aggregates and writes the metrics, results and samples files as
// lm-eval writes them.
//
// It owns the task format, the request rules, the metrics and the results layout. It does not
// know about flags, terminals or exit codes (cmd/octlm), nor how a model is loaded or run
// (octlm): it calls the model's public forward and generation API.
package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// A document value is what Python's json module gives lm-eval: nil, bool, int64, float64,
// string, []any or *Object (a dict that keeps its keys in file order).

// Object is a JSON object with its keys in file order, as a Python dict keeps them.
type Object struct {
	Keys   []string
	Values map[string]any
}

// NewObject returns an empty object.
func NewObject() *Object { return &Object{Values: map[string]any{}} }

// Set adds or replaces key, keeping the first position of a key seen twice (as json.loads does
// with the last value).
func (o *Object) Set(key string, v any) {
	if _, ok := o.Values[key]; !ok {
		o.Keys = append(o.Keys, key)
	}
	o.Values[key] = v
}

// Get returns the value of key.
func (o *Object) Get(key string) (any, bool) {
	v, ok := o.Values[key]
	return v, ok
}

// MarshalJSON writes the object with its keys in order.
func (o *Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.Keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(jsonText(k))
		b.WriteByte(':')
		vb, err := marshalValue(o.Values[k])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshalValue writes a document value as JSON, floats as Python writes them; NaN and
// infinities (which Python's json writes as NaN and Infinity, not JSON) become null.
func marshalValue(v any) ([]byte, error) {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return []byte("null"), nil
		}
		return []byte(pyFloatRepr(x)), nil // 0.0 stays a float, as Python writes it
	case []any:
		var b bytes.Buffer
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			eb, err := marshalValue(e)
			if err != nil {
				return nil, err
			}
			b.Write(eb)
		}
		b.WriteByte(']')
		return b.Bytes(), nil
	case string:
		return jsonText(x), nil
	}
	return json.Marshal(v)
}

// maxDepth bounds the nesting of a document (a deeply nested file would otherwise recurse
// without bound).
const maxDepth = 200

// decodeValue reads one JSON value from dec into a document value: integers as int64 (float64
// beyond its range), other numbers as float64, objects in key order.
func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := NewObject()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key %v is not a string", kt)
				}
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				o.Set(key, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return list, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		return numberValue(string(t))
	default:
		return t, nil // string, bool or nil
	}
}

// numberValue reads a JSON number as Python's json does: an integer when it has no fraction or
// exponent, else a float.
func numberValue(s string) (any, error) {
	if !strings.ContainsAny(s, ".eE") {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !isRangeErr(err) {
		return nil, fmt.Errorf("number %s: %w", s, err)
	}
	return f, nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// parseJSONValue reads data as exactly one JSON value.
func parseJSONValue(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("text after the JSON value")
	}
	return v, nil
}
