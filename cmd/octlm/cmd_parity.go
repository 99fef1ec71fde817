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

	"github.com/gomlx/compute"

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

// parityFlags are `octlm parity`'s flags.
type parityFlags struct {
	model      modelFlags
	reference  string        // --reference: "" is MODEL/reference
	out        string        // --out: the JSON lines file; "" for none
	halfDTypes []octlm.DType // --dtypes
	trace      bool
	traceTol   float64
}

// runParity is `octlm parity`: results (table and verdict) to stdout, progress to stderr.
func runParity(args []string, stdout, stderr io.Writer) error {
	pf, err := parseParityFlags(args, stderr)
	if err != nil {
		return err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }

	// The JSONL file is started first, beside its target, so a bad path fails before any
	// work; the target is replaced only when every row is written.
	var out *fileio.Output
	if pf.out != "" {
		if out, err = fileio.Create(pf.out); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		defer out.Abort()
	}
	dir, label, cleanup, err := parityCheckpoint(pf.model.model)
	if err != nil {
		return err
	}
	defer cleanup()
	ref, refLabel, err := pf.openReference(dir, label, stderr)
	if err != nil {
		return err
	}
	adapter, err := readAdapter(dir, pf.model.adapter)
	if err != nil {
		return err
	}

	// A bf16 measurement keeps the automatic choice off ONNX Runtime, which has no bfloat16.
	longest := 0
	for _, c := range ref.Cases {
		longest = max(longest, c.Positions())
	}
	jobFor := func(dtype octlm.DType) xla.Job {
		return modelJob(pf.model.backend, dir, dtype, longest, xla.Workload{}, 0, stderr)
	}
	choice := jobFor(octlm.Float32)
	if slices.Contains(pf.halfDTypes, octlm.BFloat16) {
		choice.DType = string(octlm.BFloat16)
	}
	backend, info, err := xla.Choose(choice)
	if err != nil {
		return err
	}
	defer backend.Finalize()
	if !info.ExactFloat32() {
		return fmt.Errorf("backend %s computes float32 matmuls in TF32; parity needs exact float32 (drop the tf32 option)", info.Name)
	}
	logf("backend: %s", info)

	report := &parity.Report{Run: parity.RunInfo{
		Model: label, Adapter: pf.model.adapter, Reference: refLabel, Backend: info.Name, Plugin: info.Plugin, HalfDTypes: pf.halfDTypes,
		Cases: len(ref.Cases), ReferenceMetadata: ref.Metadata, Versions: parity.Versions(),
	}}
	if report.Run.Checkpoint, err = parity.CheckpointManifest(dir, stderr); err != nil {
		return err
	}
	if report.Run.ReferenceFiles, err = parity.ReferenceManifest(ref); err != nil {
		return err
	}
	if adapter != nil {
		if report.Run.AdapterFiles, err = parity.AdapterManifest(pf.model.adapter); err != nil {
			return fmt.Errorf("--adapter: %w", err)
		}
	}
	opts := parity.Options{Log: logf}
	if isTerminal(stderr) {
		opts.Progress = newPositionsLine(stderr).update // positions done of a long case, redrawn in place
	}
	if err := pf.measure(report, jobFor, label, backend, info, adapter, ref, opts, stdout, stderr); err != nil {
		return err
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
		logf("rows written to %s", pf.out)
	}
	if err := report.Err(); err != nil {
		return checkFailure{err}
	}
	return nil
}

// parseParityFlags reads `octlm parity`'s flags (usage on -h).
func parseParityFlags(args []string, stderr io.Writer) (*parityFlags, error) {
	fs := flag.NewFlagSet("parity", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pf := &parityFlags{}
	pf.model.registerBundled(fs)
	pf.model.registerAdapter(fs)
	fs.StringVar(&pf.reference, "reference", "", "reference folder of reference-logits-N.safetensors (default: MODEL/reference; required with --adapter)")
	fs.StringVar(&pf.out, "out", "", "also write the rows as JSON lines to this file")
	dtypes := fs.String("dtypes", "", "also measure, not gated, these half-precision dtypes: bf16,f16")
	fs.BoolVar(&pf.trace, "trace", false, "also compare the hidden state after the embedding and after every layer with the reference's activation dumps (reference-activations-N.safetensors; Qwen3 and Qwen3.5) and name the first layer and position where they part")
	fs.Float64Var(&pf.traceTol, "trace-tol", parity.TraceTolerance, "with --trace: a position parts when its largest |error| exceeds this times max(1, max |reference|)")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "usage: octlm parity [--model DIR|HUB-NAME] [--adapter DIR --reference DIR] [--reference DIR] [--backend NAME] [--out FILE.jsonl] [--dtypes bf16,f16] [--trace]")
		fmt.Fprintf(w, "\nCompares every logit of the full and the cached path with float32 reference logits and fails\n"+
			"(exit status 1) when any is non-finite or off by more than %g. Bad input exits with status 2.\n"+
			"With --adapter, the reference must be of base + adapter (parity/llamacpp/adapter.sh --out DIR\n"+
			"writes llama.cpp's), so --reference is required.\n\n", parity.Tolerance)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	var err error
	if pf.halfDTypes, err = parseHalfDTypes(*dtypes); err != nil {
		return nil, err
	}
	if pf.model.adapter != "" && pf.reference == "" {
		return nil, usageError{"--adapter needs --reference DIR: the model's own reference/ holds the base model's logits, not base + adapter (parity/llamacpp/adapter.sh --out DIR writes a reference of base + adapter)"}
	}
	if !(pf.traceTol > 0) {
		return nil, usageError{fmt.Sprintf("--trace-tol must be positive, got %v", pf.traceTol)}
	}
	return pf, nil
}

// parityCheckpoint is the checkpoint folder parity runs on and what to call it: --model's
// folder or Hub name, else the bundled tiny checkpoint extracted into a scratch folder that
// cleanup removes.
func parityCheckpoint(model string) (dir, label string, cleanup func(), err error) {
	if model != "" {
		dir, err = resolveCheckpoint(context.Background(), model)
		return dir, model, func() {}, err
	}
	tmp, err := fileio.ScratchDir("octlm-parity")
	if err != nil {
		return "", "", nil, err
	}
	cleanup = func() { fileio.RemoveTemp(tmp) }
	if dir, err = bundled.Extract(tmp); err != nil {
		cleanup()
		return "", "", nil, err
	}
	return dir, bundled.Name + " (bundled)", cleanup, nil
}

// openReference opens --reference (else dir/reference) through parity.OpenReference, refusing
// now, not after minutes of the gated run, a reference that does not fit the model or leaves no
// room for the greedy tokens of the half-precision report. It returns what to call it.
func (pf *parityFlags) openReference(dir, label string, stderr io.Writer) (*parity.Reference, string, error) {
	refLabel := pf.reference
	if refLabel == "" {
		refLabel = filepath.Join(dir, parity.ReferenceDirName)
		if pf.model.model == "" {
			refLabel = label + " reference"
		}
	}
	greedy := 0
	if len(pf.halfDTypes) > 0 {
		greedy = parity.GreedyTokens
	}
	ref, err := parity.OpenReference(dir, pf.reference, greedy)
	if err != nil {
		if pf.reference == "" && errors.Is(err, os.ErrNotExist) {
			return nil, "", fmt.Errorf("%w (give --reference DIR; parity/reference.py writes one)", err)
		}
		return nil, "", err
	}
	for _, w := range ref.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", printable(w))
	}
	return ref, refLabel, nil
}

// measure fills report: the gated float32 rows, the trace (written to stdout) when asked, and
// the half-precision rows and greedy tokens of --dtypes, each dtype loaded in turn (jobFor is
// the load of a dtype) with the adapter (nil: none).
func (pf *parityFlags) measure(report *parity.Report, jobFor func(octlm.DType) xla.Job, label string, backend compute.Backend, info xla.Info, adapter *octlm.LoRA, ref *parity.Reference, opts parity.Options, stdout, stderr io.Writer) error {
	m, err := loadModel(jobFor(octlm.Float32), label, backend, info, adapter, stderr)
	if err != nil {
		return err
	}
	defer func() {
		if m != nil {
			m.Close()
		}
	}()
	report.Rows, err = parity.Run(m, ref, opts)
	if err != nil && !errors.Is(err, parity.ErrFailed) {
		return err
	}
	if pf.trace {
		traces, err := parity.Trace(m, ref, pf.traceTol, opts)
		if err == nil {
			err = parity.WriteTrace(stdout, traces, pf.traceTol)
		}
		if err != nil {
			return err
		}
	}
	if len(pf.halfDTypes) == 0 {
		return nil
	}
	float32IDs, err := parity.Greedy(m, ref, parity.GreedyTokens, opts)
	m.Close()
	m = nil
	if err != nil {
		return err
	}
	for _, dtype := range pf.halfDTypes {
		hm, err := loadModel(jobFor(dtype), label, backend, info, adapter, stderr)
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
