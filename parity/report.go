package parity

import (
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/octlm/octlm/internal/buildinfo"
	"github.com/octlm/octlm/internal/fileio"
	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/units"
)

// RunInfo is the first JSONL line of a run, of type "run": what was compared, on what, with what.
type RunInfo struct {
	Model string // checkpoint folder, Hub name or "tiny-qwen3 (bundled)"
	// Adapter is the PEFT LoRA folder applied unmerged on the model; "" for none.
	Adapter string
	// AdapterFiles maps the adapter folder's file names to SHA-256 hex (nil without an adapter).
	AdapterFiles map[string]string
	Reference    string // reference folder
	Backend      string // "go", "xla:cpu", "xla:cuda"
	Plugin       string // PJRT plugin path; empty for "go"
	// HalfDTypes are the ungated half-precision dtypes also measured.
	HalfDTypes []octlm.DType
	Cases      int
	// Checkpoint and ReferenceFiles map file names (relative to their folder) to SHA-256 hex.
	Checkpoint     map[string]string
	ReferenceFiles map[string]string
	// ReferenceMetadata is the reference's safetensors metadata (reference.py's versions).
	ReferenceMetadata map[string]string
	Versions          map[string]string
	// PeakRSSBytes is the process's peak resident set size over the run; 0 when unknown.
	PeakRSSBytes int64
}

// Versions reports the versions a run depends on: Go, the octlm module, and GoMLX with its
// compute and go-xla modules, as the binary's build information records them.
func Versions() map[string]string {
	v := map[string]string{"go": runtime.Version(), "octlm": "unknown", "gomlx": "unknown", "compute": "unknown", "go-xla": "unknown"}
	info := buildinfo.Read()
	if info == nil {
		return v
	}
	modules := map[string]string{
		"github.com/octlm/octlm":   "octlm",
		"github.com/gomlx/gomlx":   "gomlx",
		"github.com/gomlx/compute": "compute",
		"github.com/gomlx/go-xla":  "go-xla",
	}
	for path, key := range modules {
		if m := buildinfo.Module(info, path); m != nil && m.Version != "" {
			v[key] = buildinfo.Version(m)
		}
	}
	if info.Main.Path == "github.com/octlm/octlm" {
		// A build inside the repository: add the commit when the toolchain recorded it.
		revision, modified := buildinfo.Revision(info)
		if short := revision[:min(12, len(revision))]; short != "" && !strings.Contains(v["octlm"], short) {
			v["octlm"] += " " + short
			if modified {
				v["octlm"] += "+dirty"
			}
		}
	}
	return v
}

// CheckpointManifest validates the checkpoint in dir (every safetensors header, and the shard
// index when sharded) and hashes every file of the folder with loader.BuildManifest: file name
// (slash-separated, relative to dir) → SHA-256 hex. Progress lines for large files go to
// progress when it is not nil. An unreadable checkpoint is ErrBadInput.
func CheckpointManifest(dir string, progress io.Writer) (map[string]string, error) {
	ckpt, err := loader.OpenCheckpoint(dir)
	if err != nil {
		return nil, badInput("parity: checkpoint: %w", err)
	}
	if err := ckpt.Close(); err != nil {
		return nil, fmt.Errorf("parity: checkpoint %s: %w", dir, err)
	}
	return manifest(dir, progress)
}

// ReferenceManifest hashes every file of the reference folder: file name → SHA-256 hex.
func ReferenceManifest(ref *Reference) (map[string]string, error) { return manifest(ref.Dir, nil) }

// AdapterManifest hashes every file of an adapter folder: file name → SHA-256 hex.
func AdapterManifest(dir string) (map[string]string, error) { return manifest(dir, nil) }

func manifest(dir string, progress io.Writer) (map[string]string, error) {
	m, err := loader.BuildManifest(dir, progress)
	if err != nil {
		return nil, badInput("parity: %w", err)
	}
	out := make(map[string]string, len(m.Files))
	for _, f := range m.Files {
		out[f.Name] = f.SHA256
	}
	return out, nil
}

// Report is a whole run: its description, the gated rows, and the ungated half-precision rows.
type Report struct {
	Run    RunInfo
	Rows   []Row
	Half   []HalfRow
	Greedy []GreedyRow
}

// Err is the first failing gated row as a *GateError, or nil when every row passed.
func (r *Report) Err() error {
	for _, row := range r.Rows {
		if row.Failed() {
			return &GateError{DType: octlm.Float32, Row: row}
		}
	}
	return nil
}

// WriteTable writes the readable report: a header naming what was compared, one line per gated
// row, the half-precision tables when measured, and a one-line verdict.
func (r *Report) WriteTable(w io.Writer) error {
	ew := &fileio.ErrWriter{W: w}
	p := func(format string, args ...any) { fmt.Fprintf(ew, format, args...) }
	backend := r.Run.Backend
	if r.Run.Plugin != "" {
		backend += " (" + r.Run.Plugin + ")"
	}
	p("octlm parity\n")
	p("  model      %s\n", r.Run.Model)
	if r.Run.Adapter != "" {
		p("  adapter    %s (LoRA, unmerged)\n", r.Run.Adapter)
	}
	p("  reference  %s (%d cases)\n", r.Run.Reference, r.Run.Cases)
	p("  backend    %s, float32 weights and activations\n", backend)
	p("  gate       max absolute logit error ≤ %g on every case, full and cached path\n", Tolerance)
	if r.Run.PeakRSSBytes > 0 {
		p("  peak RSS   %s (the whole process)\n", units.Bytes(r.Run.PeakRSSBytes))
	}
	p("\n")
	p("%4s  %-6s  %9s  %11s  %12s  %9s\n", "case", "path", "positions", "max abs err", "mean abs err", "argmax")
	for _, row := range r.Rows {
		verdict := "ok"
		if row.Failed() {
			verdict = "FAIL"
		}
		p("%4d  %-6s  %9d  %11s  %12s  %9s  %s\n", row.Case, row.Path, row.Stats.Positions,
			sci(row.Stats.MaxAbsoluteError), sci(row.Stats.MeanAbsoluteError), fraction(row.Stats), verdict)
	}
	if len(r.Half) > 0 {
		p("\nhalf precision, not gated: the same cases against the float32 reference\n\n")
		p("%-5s  %4s  %-6s  %9s  %11s  %12s  %9s\n", "dtype", "case", "path", "positions", "max abs err", "mean abs err", "argmax")
		for _, row := range r.Half {
			p("%-5s  %4d  %-6s  %9d  %11s  %12s  %9s\n", row.DType, row.Case, row.Path, row.Stats.Positions,
				sci(row.Stats.MaxAbsoluteError), sci(row.Stats.MeanAbsoluteError), fraction(row.Stats))
		}
	}
	if len(r.Greedy) > 0 {
		p("\ngreedy tokens against the float32 model's (same token at each step; tokens before the first difference)\n\n")
		p("%-5s  %4s  %9s  %13s\n", "dtype", "case", "same", "common prefix")
		for _, row := range r.Greedy {
			p("%-5s  %4d  %9s  %13d\n", row.DType, row.Case, fmt.Sprintf("%d/%d", row.Matches(), row.Tokens()), row.CommonPrefix())
		}
	}
	p("\n%s\n", r.Verdict())
	return ew.Err
}

// Verdict is the one-line summary: PASS with the worst error, or FAIL with the first failure.
func (r *Report) Verdict() string {
	if len(r.Rows) == 0 {
		return "FAIL: no comparisons ran"
	}
	failed, positions, matches := 0, 0, 0
	worst := r.Rows[0]
	for _, row := range r.Rows {
		if row.Failed() {
			failed++
		}
		if row.Stats.MaxAbsoluteError > worst.Stats.MaxAbsoluteError {
			worst = row
		}
		positions += row.Stats.Positions
		matches += row.Stats.ArgmaxMatches
	}
	if err := r.Err(); err != nil {
		return fmt.Sprintf("FAIL: %v (%d of %d comparisons failed the %g gate)", err, failed, len(r.Rows), Tolerance)
	}
	return fmt.Sprintf("PASS: all %d comparisons within %g (worst %s, case %d %s); top token agrees at %d of %d positions",
		len(r.Rows), Tolerance, sci(worst.Stats.MaxAbsoluteError), worst.Case, worst.Path, matches, positions)
}

// sci prints an error as 3.58e-05, or NaN/+Inf.
func sci(x float64) string { return fmt.Sprintf("%.2e", x) }

// fraction prints argmax agreement as matches/positions.
func fraction(s Stats) string { return fmt.Sprintf("%d/%d", s.ArgmaxMatches, s.Positions) }
