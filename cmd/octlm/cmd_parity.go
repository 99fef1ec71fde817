package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	bundled "github.com/octlm/octlm"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/parity"
	"github.com/octlm/octlm/xla"
)

func init() {
	register("parity", "check every logit against float32 reference logits (the bundled tiny checkpoint by default)", func(args []string) error {
		return runParity(args, os.Stdout, os.Stderr)
	})
}

// gateFailure is a failed parity gate: its message is the gate's, and it matches errCheckFailed
// (exit status 1) as well as parity.ErrFailed.
type gateFailure struct{ err error }

func (g gateFailure) Error() string   { return g.err.Error() }
func (g gateFailure) Unwrap() []error { return []error{g.err, errCheckFailed} }

// runParity is `octlm parity`: results (table and verdict) to stdout, progress to stderr.
func runParity(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("parity", flag.ContinueOnError)
	fs.SetOutput(stderr)
	modelFlag := fs.String("model", "", "checkpoint folder or Hugging Face name (default: the bundled tiny-qwen3)")
	referenceFlag := fs.String("reference", "", "reference folder of reference-logits-N.safetensors (default: MODEL/reference)")
	backendFlag := fs.String("backend", "", "compute backend: go, xla:cpu, xla:cuda, onnx, with options after a comma (default: $GOMLX_BACKEND, else a PJRT plugin if found, else onnx if ONNX Runtime is found, else go)")
	outFlag := fs.String("out", "", "also write the rows as JSON lines to this file")
	dtypesFlag := fs.String("dtypes", "", "also measure, not gated, these half-precision dtypes: bf16,f16")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: octlm parity [--model DIR|HUB-NAME] [--reference DIR] [--backend NAME] [--out FILE.jsonl] [--dtypes bf16,f16]")
		fmt.Fprintf(stderr, "\nCompares every logit of the full and the cached path with float32 reference logits and fails\n"+
			"(exit status 1) when any is non-finite or off by more than %g. Bad input exits with status 2.\n\n", parity.Tolerance)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	halfDTypes, err := parseHalfDTypes(*dtypesFlag)
	if err != nil {
		return err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }

	// The JSONL file is created first, so a bad path fails before any work.
	var out *os.File
	if *outFlag != "" {
		if out, err = os.Create(*outFlag); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		defer out.Close()
	}

	dir, label := *modelFlag, *modelFlag
	if dir == "" {
		tmp, err := os.MkdirTemp("", "octlm-parity-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if dir, err = bundled.Extract(tmp); err != nil {
			return err
		}
		label = bundled.Name + " (bundled)"
	} else if dir, err = resolveCheckpoint(context.Background(), dir); err != nil {
		return err
	}
	refDir, refLabel := *referenceFlag, *referenceFlag
	if refDir == "" {
		refDir = filepath.Join(dir, "reference")
		refLabel = label + " reference"
		if *modelFlag != "" {
			refLabel = refDir
		}
	}
	ref, err := parity.ReadReference(refDir)
	if err != nil {
		if *referenceFlag == "" && errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w (give --reference DIR; parity/reference.py writes one)", err)
		}
		return err
	}
	// The fixtures' convention: cases.json beside the checkpoint lists the reference's prompts.
	if *referenceFlag == "" {
		if _, err := os.Stat(filepath.Join(dir, parity.CasesFileName)); err == nil {
			cases, err := parity.ReadCases(filepath.Join(dir, parity.CasesFileName))
			if err != nil {
				return err
			}
			if err := ref.CheckCases(cases); err != nil {
				return err
			}
		}
	}

	// A bf16 measurement keeps the automatic choice off ONNX Runtime, which has no bfloat16.
	widest := "f32"
	if slices.Contains(halfDTypes, octlm.BFloat16) {
		widest = string(octlm.BFloat16)
	}
	backend, info, err := xla.OpenForDType(*backendFlag, widest)
	if err != nil {
		return err
	}
	defer backend.Finalize()
	if !info.ExactFloat32() {
		return fmt.Errorf("backend %s computes float32 matmuls in TF32; parity needs exact float32 (drop the tf32 option)", info.Name)
	}
	logf("backend: %s", info)

	report := &parity.Report{Run: parity.RunInfo{
		Model: label, Reference: refLabel, Backend: info.Name, Plugin: info.Plugin, HalfDTypes: halfDTypes,
		Cases: len(ref.Cases), ReferenceMetadata: ref.Metadata, Versions: parity.Versions(),
	}}
	if report.Run.Checkpoint, err = parity.CheckpointManifest(dir, stderr); err != nil {
		return err
	}
	if report.Run.ReferenceFiles, err = parity.ReferenceManifest(ref); err != nil {
		return err
	}

	m, err := loadModel(dir, label, backend, octlm.Float32, stderr)
	if err != nil {
		return err
	}
	opts := parity.Options{Log: logf}
	report.Rows, err = parity.Run(m, ref, opts)
	if err != nil && !errors.Is(err, parity.ErrFailed) {
		m.Close()
		return err
	}
	if len(halfDTypes) > 0 {
		float32IDs, err := parity.Greedy(m, ref, parity.GreedyTokens, opts)
		m.Close()
		if err != nil {
			return err
		}
		for _, dtype := range halfDTypes {
			hm, err := loadModel(dir, label, backend, dtype, stderr)
			if err != nil {
				return err
			}
			half, greedy, err := parity.RunHalf(hm, ref, float32IDs, opts)
			hm.Close()
			if err != nil {
				return err
			}
			report.Half = append(report.Half, half...)
			report.Greedy = append(report.Greedy, greedy...)
		}
	} else {
		m.Close()
	}

	if err := report.WriteTable(stdout); err != nil {
		return err
	}
	if out != nil {
		if err := report.WriteJSONL(out); err != nil {
			return err
		}
		if err := out.Close(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		logf("rows written to %s", *outFlag)
	}
	if err := report.Err(); err != nil {
		return gateFailure{err}
	}
	return nil
}

// parseHalfDTypes reads --dtypes: a comma-separated list of bf16 and f16, each at most once.
func parseHalfDTypes(s string) ([]octlm.DType, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []octlm.DType
	for _, part := range strings.Split(s, ",") {
		d, err := octlm.ParseDType(strings.TrimSpace(part))
		if err != nil || strings.TrimSpace(part) == "" {
			return nil, usageError{fmt.Sprintf("--dtypes: %q is not bf16 or f16", part)}
		}
		if d == octlm.Float32 {
			return nil, usageError{"--dtypes: float32 is the gated run itself; list only bf16 and f16"}
		}
		for _, seen := range out {
			if seen == d {
				return nil, usageError{fmt.Sprintf("--dtypes: %s given twice", d)}
			}
		}
		out = append(out, d)
	}
	return out, nil
}
