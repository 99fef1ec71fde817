package parity

import (
	"os"
	"path/filepath"

	"github.com/octlm/octlm/octlm"
)

// ReferenceDirName is the reference folder's name inside a checkpoint folder, where OpenReference
// looks when given none.
const ReferenceDirName = "reference"

// OpenReference reads the reference folder refDir ("" is dir/reference) for the checkpoint in
// dir and checks it against the checkpoint's configuration (vocabulary, context length) and,
// where refDir is the checkpoint's own reference folder and dir holds a cases.json (the fixtures'
// convention), against the prompts listed there. greedyTokens > 0 also requires every case to
// leave that many positions of the context for the greedy tokens of the half-precision report.
// The command line and the figures open references through it.
func OpenReference(dir, refDir string, greedyTokens int) (*Reference, error) {
	own := filepath.Join(dir, ReferenceDirName)
	if refDir == "" {
		refDir = own
	}
	ref, err := ReadReference(refDir)
	if err != nil {
		return nil, err
	}
	if filepath.Clean(refDir) == own {
		cases := filepath.Join(dir, CasesFileName)
		if _, err := os.Stat(cases); err == nil {
			ids, err := ReadCases(cases)
			if err != nil {
				return nil, err
			}
			if err := ref.CheckCases(ids); err != nil {
				return nil, err
			}
		}
	}
	shape, err := octlm.ReadShape(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	if err := ref.Check(shape); err != nil {
		return nil, err
	}
	if greedyTokens > 0 {
		if err := ref.CheckGreedy(shape, greedyTokens); err != nil {
			return nil, err
		}
	}
	return ref, nil
}
