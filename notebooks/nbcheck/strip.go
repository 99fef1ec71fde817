package main

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// strip returns the notebook b with every code cell's outputs removed and its execution count
// reset, keeping every other field. changed reports whether anything was removed. The JSON is
// written as Jupyter writes it: keys sorted, one-space indent, no HTML escaping, final newline.
func strip(path string, b []byte) (out []byte, changed bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var nb map[string]any
	if err := dec.Decode(&nb); err != nil {
		return nil, false, fmt.Errorf("%s: not a notebook: %w", path, err)
	}
	cells, ok := nb["cells"].([]any)
	if !ok {
		return nil, false, fmt.Errorf("%s: not a notebook: no cells list", path)
	}
	for i, c := range cells {
		cm, ok := c.(map[string]any)
		if !ok {
			return nil, false, fmt.Errorf("%s: cell %d is not an object", path, i+1)
		}
		if cm["cell_type"] != "code" {
			continue
		}
		if outs, ok := cm["outputs"].([]any); !ok || len(outs) > 0 {
			changed = true
		}
		if cm["execution_count"] != nil {
			changed = true
		}
		cm["outputs"] = []any{}
		cm["execution_count"] = nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(nb); err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	return buf.Bytes(), changed, nil
}
