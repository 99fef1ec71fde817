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
	"github.com/octlm/octlm/internal/fileio"
	"github.com/octlm/octlm/internal/sysinfo"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/parity"
	"github.com/octlm/octlm/xla"
)

func init() {
	register("parity", "check every logit against float32 reference logits (the bundled tiny checkpoint by default)", func(args []string) error {
		return runParity(args, os.Stdout, os.Stderr)
	})
}

// runParity is `octlm parity`: results (table and verdict) to stdout, progress to stderr.
func runParity(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("parity", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var mf modelFlags
	mf.registerBundled(fs)
	referenceFlag := fs.String("reference", "", "reference folder of reference-logits-N.safetensors (default: MODEL/reference)")
	outFlag := fs.String("out", "", "also write the rows as JSON lines to this file")
	dtypesFlag := fs.String("dtypes", "", "also measure, not gated, these half-precision dtypes: bf16,f16")
	traceFlag := fs.Bool("trace", false, "also compare the hidden state after the embedding and after every layer with the reference's activation dumps (reference-activations-N.safetensors; Qwen3 and Qwen3.5) and name the first layer and position where they part")
	traceTol := fs.Float64("trace-tol", parity.TraceTolerance, "with --trace: a position parts when its largest |error| exceeds this times max(1, max |reference|)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: octlm parity [--model DIR|HUB-NAME] [--reference DIR] [--backend NAME] [--out FILE.jsonl] [--dtypes bf16,f16] [--trace]")
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
	if !(*traceTol > 0) {
		return usageError{fmt.Sprintf("--trace-tol must be positive, got %v", *traceTol)}
	}
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }

	// The JSONL file is started first, beside its target, so a bad path fails before any
	// work; the target is replaced only when every row is written.
	var out *fileio.Output
	if *outFlag != "" {
		if out, err = fileio.Create(*outFlag); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		defer out.Abort()
	}

	dir, label := mf.model, mf.model
	if dir == "" {
		tmp, err := fileio.ScratchDir("octlm-parity")
		if err != nil {
			return err
		}
		defer fileio.RemoveTemp(tmp)
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
		if mf.model != "" {
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
	for _, w := range ref.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", printable(w))
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

	// A reference that does not fit the model, or leaves no room for the greedy tokens of the
	// half-precision report, is refused now, not after minutes of the gated run.
	cfg, err := octlm.ReadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return err
	}
	if err := ref.Check(cfg); err != nil {
		return err
	}
	if len(halfDTypes) > 0 {
		if err := ref.CheckGreedy(cfg, parity.GreedyTokens); err != nil {
			return fmt.Errorf("--dtypes: %w", err)
		}
	}

	// A bf16 measurement keeps the automatic choice off ONNX Runtime, which has no bfloat16.
	widest := "f32"
	if slices.Contains(halfDTypes, octlm.BFloat16) {
		widest = string(octlm.BFloat16)
	}
	longest := 0
	for _, c := range ref.Cases {
		longest = max(longest, c.Positions())
	}
	backend, info, err := xla.OpenForDType(mf.backend, widest)
	if err != nil {
		return err
	}
	backend, info = fitEngine(dir, backend, info, octlm.Float32, longest, 0)
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

	m, err := loadModel(dir, label, backend, info, octlm.Float32, longest, stderr)
	if err != nil {
		return err
	}
	opts := parity.Options{Log: logf}
	if isTerminal(stderr) {
		opts.Progress = newPositionsLine(stderr).update // positions done of a long case, redrawn in place
	}
	report.Rows, err = parity.Run(m, ref, opts)
	if err != nil && !errors.Is(err, parity.ErrFailed) {
		m.Close()
		return err
	}
	if *traceFlag {
		traces, err := parity.Trace(m, ref, *traceTol, opts)
		if err == nil {
			err = writeTrace(stdout, traces, *traceTol)
		}
		if err != nil {
			m.Close()
			return err
		}
	}
	if len(halfDTypes) > 0 {
		float32IDs, err := parity.Greedy(m, ref, parity.GreedyTokens, opts)
		m.Close()
		if err != nil {
			return err
		}
		for _, dtype := range halfDTypes {
			hm, err := loadModel(dir, label, backend, info, dtype, longest, stderr)
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

	report.Run.PeakRSSBytes = sysinfo.PeakRSS()
	if err := report.WriteTable(stdout); err != nil {
		return err
	}
	if out != nil {
		if err := report.WriteJSONL(out); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		if err := out.Commit(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		logf("rows written to %s", *outFlag)
	}
	if err := report.Err(); err != nil {
		return checkFailure{err}
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
