package main

// Qwen3.5 in the CLI: octlm.Load picks the architecture from config.json, so parity, generate
// and bench run it as they run Qwen3; here are what only Qwen3.5 needs: inspect's lines about
// its architecture and skipped tensors, synth's Qwen3.5 shapes, and parity --trace's table.
// Qwen3.5's tokenizer (248,320 entries) cannot be fetched here, so Qwen3.5 runs on token IDs.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/octlm/octlm/internal/fileio"
	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/synth"
	"github.com/octlm/octlm/parity"
	"github.com/octlm/octlm/units"
)

// tokenizerNote explains, for a Qwen3.5 folder, why it has no tokenizer.
func tokenizerNote(dir string) string {
	data, err := fileio.ReadFile(filepath.Join(dir, "config.json"), octlm.MaxConfigBytes)
	if err != nil || !octlm.IsQwen35Config(data) {
		return ""
	}
	return " (Qwen3.5's tokenizer, 248,320 entries, is not available here: Qwen3.5 runs on token IDs)"
}

// writeTrace prints each traced case: a row per hidden state, and where the numbers part.
func writeTrace(w io.Writer, traces []parity.CaseTrace, tol float64) error {
	ew := &errWriter{fileio.ErrWriter{W: w}}
	for _, ct := range traces {
		fmt.Fprintf(ew, "trace, case %d: hidden states against the reference activations (parting: |error| > %g · max(1, max|reference|) at a position)\n", ct.Case, tol)
		fmt.Fprintf(ew, "%-9s  %-16s  %11s  %8s  %10s  %s\n", "after", "type", "max |error|", "at pos", "scaled", "first parting")
		for _, lt := range ct.Layers {
			name := "embedding"
			if lt.Layer >= 0 {
				name = fmt.Sprintf("layer %d", lt.Layer)
			}
			parted := "-"
			if lt.FirstParted >= 0 {
				parted = fmt.Sprintf("position %d", lt.FirstParted)
			}
			fmt.Fprintf(ew, "%-9s  %-16s  %11.3g  %8d  %10.3g  %s\n", name, lt.Type, lt.MaxAbsoluteError, lt.MaxPosition, lt.Scaled, parted)
		}
		if ct.Parted < 0 {
			fmt.Fprintf(ew, "case %d: every hidden state agrees within the tolerance\n\n", ct.Case)
			continue
		}
		lt := ct.Layers[ct.Parted]
		where := "the embedding"
		if lt.Layer >= 0 {
			where = fmt.Sprintf("layer %d (%s)", lt.Layer, lt.Type)
		}
		fmt.Fprintf(ew, "case %d: the numbers part first after %s, at position %d\n\n", ct.Case, where, lt.FirstParted)
	}
	return ew.Err
}

// inspectQwen35 adds the architecture, its layer types and the tensors the decoder skips to an
// inspect report of a Qwen3.5 folder.
func inspectQwen35(r *inspectReport) {
	cfg, err := octlm.Qwen35ConfigFrom(r.Config)
	if err != nil {
		r.Architecture = "qwen3_5 (config refused: " + err.Error() + ")"
		return
	}
	form := "Qwen3_5ForCausalLM (text only)"
	if cfg.Multimodal {
		form = "Qwen3_5ForConditionalGeneration (multimodal; octlm runs its text decoder)"
	}
	r.Architecture = "qwen3_5: " + form
	r.LayerTypes = cfg.LayerTypes
	r.DecoderSummary = cfg.Summary()
	for _, p := range octlm.Qwen35SkippedPrefixes() {
		s := octlm.SkippedTensors{Prefix: p}
		for _, t := range r.Tensors {
			if strings.HasPrefix(t.Name, p) {
				s.Count++
				s.Bytes += t.Bytes
			}
		}
		r.Skipped = append(r.Skipped, s)
	}
}

// printQwen35Summary prints inspectQwen35's lines.
func printQwen35Summary(w io.Writer, r *inspectReport) {
	if r.Architecture == "" {
		return
	}
	fmt.Fprintf(w, "architecture:   %s\n", printable(r.Architecture))
	if r.DecoderSummary != "" {
		fmt.Fprintf(w, "decoder:        %s\n", printable(r.DecoderSummary))
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped:        %s* %d tensors, %s (%s): not read by the text decoder\n", printable(s.Prefix), s.Count, units.Commas(s.Bytes), units.Bytes(s.Bytes))
	}
}

// synthQwen35 is `octlm synth --like qwen3.5-…`: the checkpoint is built beside dir and moved
// into place when complete, as for Qwen3.
func synthQwen35(ctx context.Context, q synth.Qwen35Like, dir string, force bool, seed int64, manifest bool, stdout, stderr io.Writer) error {
	replace, err := checkSynthTarget(dir, force)
	if err != nil {
		return err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	var need int64
	for _, t := range q.Tensors() {
		need += t.Bytes()
	}
	if free := freeDiskBytes(parent); free >= 0 && need > free {
		return usageError{fmt.Sprintf("the checkpoint needs about %s and %s has %s free", units.Bytes(need), parent, units.Bytes(free))}
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".synth-*")
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	begin := time.Now()
	err = synth.WriteQwen35(tmp, q, synth.Options{Seed: seed, Progress: stderr, Manifest: manifest, Context: ctx})
	if ctx.Err() != nil {
		return fmt.Errorf("%w; %s left as it was", errInterrupted, dir)
	}
	if err != nil {
		return err
	}
	if err := moveIntoPlace(tmp, dir, replace); err != nil {
		return err
	}
	files := loader.SingleFileName
	if n := len(q.Shards(0)); n > 1 {
		files = fmt.Sprintf("%d shards", n)
	}
	_, err = fmt.Fprintf(stdout, "wrote %s: Qwen3.5 (%d layers: %s), %d entries, %s of %s tensor bytes (%s) in %.1fs; no tokenizer: run it with token IDs\n",
		dir, q.NumLayers, strings.Join(layerTypeCountsOf(q.LayerTypes()), ", "), len(q.Tensors()), files, units.Commas(need), units.Bytes(need), time.Since(begin).Seconds())
	return err
}

func layerTypeCountsOf(types []string) []string {
	counts := map[string]int{}
	for _, t := range types {
		counts[t]++
	}
	return []string{fmt.Sprintf("%d %s", counts[octlm.LinearAttention], octlm.LinearAttention),
		fmt.Sprintf("%d %s", counts[octlm.FullAttention], octlm.FullAttention)}
}
