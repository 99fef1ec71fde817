package parity

import (
	"encoding/json"
	"slices"

	"github.com/octlm/octlm/internal/fileio"
)

// CasesFileName is the file listing a checkpoint's parity cases: a JSON list of lists of token
// IDs, which reference.py reads and whose order the reference files follow.
const CasesFileName = "cases.json"

// maxCasesBytes bounds cases.json.
const maxCasesBytes = 64 << 20

// ReadCases reads a cases.json file. Every case must be a non-empty list of non-negative integers.
func ReadCases(path string) ([][]int, error) {
	data, err := fileio.ReadFile(path, maxCasesBytes)
	if err != nil {
		return nil, badInput("parity: %w", err)
	}
	var cases [][]int
	if err := json.Unmarshal(data, &cases); err != nil {
		return nil, badInput("parity: %s: want a JSON list of lists of token IDs: %w", path, err)
	}
	if len(cases) == 0 {
		return nil, badInput("parity: %s: no cases", path)
	}
	for n, c := range cases {
		if len(c) == 0 {
			return nil, badInput("parity: %s: case %d is empty", path, n)
		}
		for i, id := range c {
			if id < 0 {
				return nil, badInput("parity: %s: case %d: token %d at position %d is negative", path, n, id, i)
			}
		}
	}
	return cases, nil
}

// CheckCases reports, as ErrBadInput, a reference whose token IDs are not exactly cases: a
// reference computed for other prompts, or from another cases.json.
func (r *Reference) CheckCases(cases [][]int) error {
	if len(cases) != len(r.Cases) {
		return badInput("parity: reference %s has %d cases, %s lists %d", r.Dir, len(r.Cases), CasesFileName, len(cases))
	}
	for n, c := range r.Cases {
		if !slices.Equal(c.IDs, cases[n]) {
			return badInput("parity: %s: token IDs differ from case %d of %s", c.Path, n, CasesFileName)
		}
	}
	return nil
}
