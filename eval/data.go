package eval

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/parquet-go/parquet-go"

	"github.com/octlm/octlm/internal/fileio"
)

// maxLineBytes bounds one JSON Lines record (64 MiB), maxDataBytes a JSON document read whole
// (1 GiB).
const (
	maxLineBytes = 64 << 20
	maxDataBytes = 1 << 30
)

// Split is a split's documents and its features (the columns, in first-seen order).
type Split struct {
	Name     string
	Docs     []*Object
	Features []string
}

// featureSet returns the split's features as a set.
func (s *Split) featureSet() map[string]bool {
	m := make(map[string]bool, len(s.Features))
	for _, f := range s.Features {
		m[f] = true
	}
	return m
}

// LoadSplit reads the documents of one split of the task's data files. As Hugging Face
// datasets does, a document without one of the split's features gets None for it.
func (t *Task) LoadSplit(split string) (*Split, error) {
	files, ok := t.DataFiles[split]
	if !ok {
		var have []string
		for k := range t.DataFiles {
			have = append(have, k)
		}
		sort.Strings(have)
		return nil, fmt.Errorf("%s: split %q is not among dataset_kwargs.data_files' splits (%v): %w", t.Path, split, have, ErrBadTask)
	}
	var docs []*Object
	for _, f := range files {
		var part []*Object
		var err error
		if t.DatasetPath == "parquet" {
			part, err = readParquet(f)
		} else {
			part, err = readJSONDocs(f)
		}
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", t.Name, err)
		}
		docs = append(docs, part...)
	}
	s := newSplit(split, docs)
	if len(s.Docs) == 0 {
		return nil, fmt.Errorf("%s: split %q has no documents (%v): %w", t.Path, split, relNames(t.Dir, files), ErrBadTask)
	}
	return s, nil
}

// newSplit gathers documents into a split: its features are every document's keys in first-seen
// order, and a document without one gets None for it.
func newSplit(name string, docs []*Object) *Split {
	s := &Split{Name: name, Docs: docs}
	seen := map[string]bool{}
	for _, d := range docs {
		for _, k := range d.Keys {
			if !seen[k] {
				seen[k] = true
				s.Features = append(s.Features, k)
			}
		}
	}
	for _, d := range docs {
		if len(d.Keys) == len(s.Features) {
			continue
		}
		full := NewObject()
		for _, k := range s.Features {
			v, _ := d.Get(k)
			full.Set(k, v)
		}
		*d = *full
	}
	return s
}

func relNames(dir string, files []string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		if r, err := filepath.Rel(dir, f); err == nil {
			out[i] = r
		} else {
			out[i] = f
		}
	}
	return out
}

// readJSONDocs reads a JSON Lines file (one object a line, blank lines skipped) or a file
// holding one JSON array of objects, as Hugging Face's json loader does.
func readJSONDocs(path string) ([]*Object, error) {
	f, err := fileio.OpenRead(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return decodeJSONDocs(f, path)
}

// decodeJSONDocs is readJSONDocs of what r holds; path names it in errors.
func decodeJSONDocs(r io.Reader, path string) ([]*Object, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	first, err := firstNonSpace(br)
	if err == io.EOF {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if first == '[' {
		data, err := io.ReadAll(io.LimitReader(br, maxDataBytes+1))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(data) > maxDataBytes {
			return nil, fmt.Errorf("%s: larger than %d bytes: %w", path, maxDataBytes, ErrBadTask)
		}
		v, err := parseJSONValue(data)
		if err != nil {
			return nil, fmt.Errorf("%s: malformed JSON: %v: %w", path, err, ErrBadTask)
		}
		list := v.([]any)
		docs := make([]*Object, len(list))
		for i, e := range list {
			o, ok := e.(*Object)
			if !ok {
				return nil, fmt.Errorf("%s: item %d is %s, not an object: %w", path, i, pyTypeName(e), ErrBadTask)
			}
			docs[i] = o
		}
		return docs, nil
	}
	var docs []*Object
	line := 0
	for {
		b, err := readLine(br)
		if len(b) > 0 || err == nil {
			line++
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("%s:%d: %v: %w", path, line+1, err, ErrBadTask)
		}
		if t := bytes.TrimSpace(b); len(t) > 0 {
			v, perr := parseJSONValue(t)
			if perr != nil {
				return nil, fmt.Errorf("%s:%d: malformed JSON: %v: %w", path, line, perr, ErrBadTask)
			}
			o, ok := v.(*Object)
			if !ok {
				return nil, fmt.Errorf("%s:%d: the line is %s, not a JSON object: %w", path, line, pyTypeName(v), ErrBadTask)
			}
			docs = append(docs, o)
		}
		if err == io.EOF {
			return docs, nil
		}
	}
}

func firstNonSpace(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.Peek(1)
		if err != nil {
			return 0, err
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			br.ReadByte()
		default:
			return b[0], nil
		}
	}
}

// readLine reads one line (without its newline), refusing one longer than maxLineBytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := br.ReadSlice('\n')
		out = append(out, chunk...)
		if len(out) > maxLineBytes {
			return nil, fmt.Errorf("line longer than %d bytes", maxLineBytes)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		out = bytes.TrimSuffix(out, []byte("\n"))
		return out, err
	}
}

// readParquet reads a Parquet file's rows as documents, columns in the schema's order (nested
// groups' keys sorted: the reader gives them as Go maps).
func readParquet(path string) ([]*Object, error) {
	f, err := fileio.OpenRead(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: not a readable Parquet file: %v: %w", path, err, ErrBadTask)
	}
	var order []string
	for _, fl := range pf.Schema().Fields() {
		order = append(order, fl.Name())
	}
	rows, err := readParquetRows(f, pf.Schema())
	if err != nil {
		return nil, fmt.Errorf("%s: reading rows: %v: %w", path, err, ErrBadTask)
	}
	docs := make([]*Object, len(rows))
	for i, r := range rows {
		o := NewObject()
		for _, k := range order {
			v, err := parquetValue(r[k], 0)
			if err != nil {
				return nil, fmt.Errorf("%s: row %d, column %s: %v: %w", path, i, k, err, ErrBadTask)
			}
			o.Set(k, v)
		}
		docs[i] = o
	}
	return docs, nil
}

// readParquetRows reads every row as a map, through the file's own schema.
func readParquetRows(f *os.File, schema *parquet.Schema) (rows []map[string]any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the Parquet reader failed: %v", r)
		}
	}()
	r := parquet.NewReader(f, schema)
	defer r.Close()
	for {
		m := map[string]any{}
		if err := r.Read(&m); err != nil {
			if err == io.EOF {
				return rows, nil
			}
			return nil, err
		}
		rows = append(rows, m)
	}
}

// parquetValue converts what the Parquet reader gives to a document value.
func parquetValue(v any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	switch x := v.(type) {
	case nil, bool, string, int64, float64:
		return x, nil
	case int32:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return float64(x), nil
		}
		return int64(x), nil
	case float32:
		return float64(x), nil
	case []byte:
		return string(x), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := parquetValue(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		o := NewObject()
		for _, k := range keys {
			c, err := parquetValue(x[k], depth+1)
			if err != nil {
				return nil, err
			}
			o.Set(k, c)
		}
		return o, nil
	}
	return nil, fmt.Errorf("a %T value is not read", v)
}
