package parity

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
)

// ErrBadInput is matched (errors.Is) by every error about the inputs of a run rather than its
// result: a missing or malformed reference folder, or a reference that does not fit the model
// (vocabulary size, token IDs, context length). The command exits with status 2 on it.
var ErrBadInput = errors.New("bad input")

// inputError is an error about a run's inputs: its text is the message alone, and it matches
// ErrBadInput as well as whatever the message wraps.
type inputError struct {
	err   error
	cause error // matched by errors.Is without showing in the message; may be nil
}

func (e inputError) Error() string        { return e.err.Error() }
func (e inputError) Unwrap() []error      { return []error{e.err, e.cause} }
func (e inputError) Is(target error) bool { return target == ErrBadInput }

// badInput formats an error (with %w as in fmt.Errorf) that matches ErrBadInput.
func badInput(format string, args ...any) error { return inputError{err: fmt.Errorf(format, args...)} }

// Reference file and tensor names.
const (
	IDsTensor    = "ids"    // I64 [T]: the case's token IDs
	LogitsTensor = "logits" // F32 [T, vocab]: float32 logits at every position
)

// referenceName matches reference-logits-N.safetensors; N is a plain decimal without leading zeros.
var referenceName = regexp.MustCompile(`^reference-logits-(0|[1-9][0-9]*)\.safetensors$`)

// ReferenceFileName is the name of case n's file in a reference folder.
func ReferenceFileName(n int) string { return fmt.Sprintf("reference-logits-%d.safetensors", n) }

// Reference is a reference folder whose headers have been read and checked. Logits are read one
// case at a time, when the run needs them (a real model's logits run to hundreds of megabytes).
type Reference struct {
	Dir   string
	Cases []Case
	Vocab int
	// Metadata is the safetensors __metadata__ of case 0 (reference.py records its versions there).
	Metadata map[string]string
	// Warnings name files that look like reference files but are not read (a misnamed
	// reference-logits-x), for the caller to show.
	Warnings []string
}

// Case is one reference case: its token IDs and where its logits are.
type Case struct {
	Index int
	Path  string // the reference-logits-N.safetensors file
	IDs   []int
	Vocab int
}

// Positions is the number of positions of the case.
func (c Case) Positions() int { return len(c.IDs) }

// ReadReference reads the headers and token IDs of every reference-logits-N.safetensors file in
// dir. The files must be numbered 0, 1, … with no gap; each must hold exactly the tensors ids
// (I64 [T], T ≥ 1) and logits (F32 [T, vocab]), with one vocabulary size across the folder.
// Other files in dir are ignored; those whose names start like a reference file's are listed
// in Warnings. Every error matches ErrBadInput.
func ReadReference(dir string) (*Reference, error) {
	st, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, inputError{fmt.Errorf("parity: no reference folder %s", dir), os.ErrNotExist}
	}
	if err != nil {
		return nil, badInput("parity: reference folder: %w", err)
	}
	if !st.IsDir() {
		return nil, badInput("parity: reference folder %s: not a folder", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, badInput("parity: reference folder: %w", err)
	}
	var numbers []int
	var warnings []string
	for _, e := range entries {
		m := referenceName.FindStringSubmatch(e.Name())
		if m == nil {
			if strings.HasPrefix(e.Name(), "reference-logits") {
				warnings = append(warnings, fmt.Sprintf("%s: ignored: not named reference-logits-N.safetensors (N a case number without leading zeros)", filepath.Join(dir, e.Name())))
			}
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, badInput("parity: %s: case number out of range", filepath.Join(dir, e.Name()))
		}
		numbers = append(numbers, n)
	}
	if len(numbers) == 0 {
		return nil, badInput("parity: reference folder %s holds no %s files", dir, "reference-logits-N.safetensors")
	}
	sort.Ints(numbers)
	for i, n := range numbers {
		if n != i {
			return nil, badInput("parity: reference folder %s: %s is missing (cases must be numbered 0 to %d)",
				dir, ReferenceFileName(i), len(numbers)-1)
		}
	}
	ref := &Reference{Dir: dir, Warnings: warnings}
	for n := range numbers {
		c, metadata, err := readCaseHeader(filepath.Join(dir, ReferenceFileName(n)), n)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			ref.Vocab, ref.Metadata = c.Vocab, metadata
		} else if c.Vocab != ref.Vocab {
			return nil, badInput("parity: %s: tensor %q: vocabulary %d differs from case 0's %d",
				c.Path, LogitsTensor, c.Vocab, ref.Vocab)
		}
		ref.Cases = append(ref.Cases, c)
	}
	return ref, nil
}

// readCaseHeader opens one reference file, checks its two tensors and reads the token IDs.
func readCaseHeader(path string, n int) (Case, map[string]string, error) {
	f, err := loader.Open(path)
	if err != nil {
		return Case{}, nil, badInput("parity: reference case %d: %w", n, err)
	}
	defer f.Close()
	ids, logits, err := caseTensors(f)
	if err != nil {
		return Case{}, nil, err
	}
	raw := make([]int64, ids.NumElements())
	if err := f.ReadInt64(ids, raw); err != nil {
		return Case{}, nil, badInput("parity: reference case %d: %w", n, err)
	}
	c := Case{Index: n, Path: path, IDs: make([]int, len(raw)), Vocab: logits.Shape[1]}
	for i, id := range raw {
		if id < 0 || id > math.MaxInt32 {
			return Case{}, nil, badInput("parity: %s: tensor %q: token %d at position %d is not a token ID",
				path, IDsTensor, id, i)
		}
		c.IDs[i] = int(id)
	}
	return c, f.Metadata(), nil
}

// caseTensors checks that f holds exactly ids I64 [T] and logits F32 [T, vocab] with T, vocab ≥ 1.
func caseTensors(f *loader.File) (ids, logits loader.TensorInfo, err error) {
	bad := func(format string, args ...any) error {
		return badInput("parity: %s: %s", f.Path(), fmt.Sprintf(format, args...))
	}
	ids, okIDs := f.Lookup(IDsTensor)
	logits, okLogits := f.Lookup(LogitsTensor)
	switch {
	case !okIDs:
		return ids, logits, bad("no tensor %q", IDsTensor)
	case !okLogits:
		return ids, logits, bad("no tensor %q", LogitsTensor)
	case len(f.Tensors()) != 2:
		return ids, logits, bad("%d tensors, want exactly %q and %q", len(f.Tensors()), IDsTensor, LogitsTensor)
	case ids.DType != loader.I64 || len(ids.Shape) != 1 || ids.Shape[0] < 1:
		return ids, logits, bad("tensor %q: %s %v, want I64 [T] with T ≥ 1", IDsTensor, ids.DType, ids.Shape)
	case logits.DType != loader.F32 || len(logits.Shape) != 2 || logits.Shape[1] < 1:
		return ids, logits, bad("tensor %q: %s %v, want F32 [T, vocab]", LogitsTensor, logits.DType, logits.Shape)
	case logits.Shape[0] != ids.Shape[0]:
		return ids, logits, bad("tensor %q has %d positions but %q has %d", LogitsTensor, logits.Shape[0], IDsTensor, ids.Shape[0])
	}
	return ids, logits, nil
}

// Logits reads the case's reference logits. A non-finite reference logit is bad input: the
// reference itself is broken.
func (c Case) Logits() (octlm.Logits, error) {
	f, err := loader.Open(c.Path)
	if err != nil {
		return octlm.Logits{}, badInput("parity: reference case %d: %w", c.Index, err)
	}
	defer f.Close()
	_, info, err := caseTensors(f)
	if err != nil {
		return octlm.Logits{}, err
	}
	if info.Shape[0] != len(c.IDs) || info.Shape[1] != c.Vocab {
		return octlm.Logits{}, badInput("parity: %s: tensor %q changed since the folder was read", c.Path, LogitsTensor)
	}
	l := octlm.Logits{Rows: info.Shape[0], Vocab: info.Shape[1], Data: make([]float32, info.NumElements())}
	if err := f.ReadFloat32(info, l.Data); err != nil {
		return octlm.Logits{}, badInput("parity: reference case %d: %w", c.Index, err)
	}
	for i, v := range l.Data {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return octlm.Logits{}, badInput("parity: %s: tensor %q: non-finite reference logit %v at position %d, entry %d",
				c.Path, LogitsTensor, v, i/l.Vocab, i%l.Vocab)
		}
	}
	return l, nil
}

// Check reports, as ErrBadInput, a reference that does not fit a model of this shape: a different vocabulary size,
// a token ID outside the vocabulary, or a case longer than the context.
func (r *Reference) Check(shape octlm.Shape) error {
	if r.Vocab != shape.Vocab {
		return badInput("parity: reference %s has logits over %d vocabulary entries, the model has %d",
			r.Dir, r.Vocab, shape.Vocab)
	}
	for _, c := range r.Cases {
		for i, id := range c.IDs {
			if id >= shape.Vocab {
				return badInput("parity: %s: token %d at position %d is outside the model's vocabulary [0, %d)",
					c.Path, id, i, shape.Vocab)
			}
		}
		if len(c.IDs) > shape.Context {
			return badInput("parity: %s: %d positions exceed the model's context length %d",
				c.Path, len(c.IDs), shape.Context)
		}
	}
	return nil
}
