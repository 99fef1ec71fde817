package main

// Qwen3.5 in the CLI: the commands pick the architecture from config.json and come here for a
// Qwen3.5 checkpoint. Qwen3.5's tokenizer (248,320 entries) cannot be fetched here, so
// Qwen3.5 runs on token IDs.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gomlx/compute"

	"github.com/octlm/octlm/internal/fileio"
	"github.com/octlm/octlm/internal/progress"
	"github.com/octlm/octlm/internal/sysinfo"
	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/synth"
	"github.com/octlm/octlm/parity"
	"github.com/octlm/octlm/xla"
)

// qwen35TokenizerNote is what a Qwen3.5 command says when asked for text.
const qwen35TokenizerNote = "Qwen3.5 runs on token IDs in octlm: its tokenizer (248,320 entries) is not available here; give --prompt-ids"

// isQwen35Dir reports whether dir's config.json describes Qwen3.5 (a missing or unreadable
// config is not Qwen3.5: the Qwen3 path then reports it).
func isQwen35Dir(dir string) bool {
	data, err := fileio.ReadFile(filepath.Join(dir, "config.json"), octlm.MaxConfigBytes)
	return err == nil && octlm.IsQwen35Config(data)
}

// loadQwen35 loads a Qwen3.5 checkpoint with a progress bar on stderr, once its weights fit in
// the memory available.
func loadQwen35(dir, label string, backend compute.Backend, info xla.Info, dtype octlm.DType, stderr io.Writer) (*octlm.Qwen35Model, error) {
	cfg, err := octlm.ReadQwen35Config(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	if info.Name == xla.Go || info.Name == xla.CPU {
		need := cfg.Parameters() * int64(bytesPerParam(dtype))
		if avail, err := sysinfo.ProcessAvailable(); err == nil && need > avail.Bytes {
			return nil, fmt.Errorf("%s does not fit in memory: its weights need %s bytes but %s bytes are available (%s); not loading it",
				dir, commas(need), commas(avail.Bytes), avail.Source)
		}
	}
	fmt.Fprintf(stderr, "%s\n", cfg.Summary())
	bar := progress.New(stderr, fmt.Sprintf("loading %s (%s)", label, dtype))
	m, err := octlm.LoadQwen35(dir, octlm.LoadOptions{Backend: backend, DType: dtype, Progress: func(_ string, done, total int64) {
		bar.Update(done, total)
	}, Warn: func(msg string) { fmt.Fprintf(stderr, "warning: %s\n", printable(msg)) }})
	bar.Finish()
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", label, err)
	}
	for _, s := range m.Skipped {
		if s.Count > 0 {
			fmt.Fprintf(stderr, "skipped %d %s* tensors (%s), unread: not part of the text decoder\n", s.Count, s.Prefix, loader.HumanBytes(s.Bytes))
		}
	}
	return m, nil
}

func bytesPerParam(d octlm.DType) int {
	if d == octlm.Float32 {
		return 4
	}
	return 2
}

// parityQwen35 runs the gated protocol (and with trace the hidden-state comparison) on a
// Qwen3.5 checkpoint, filling report.Rows.
func parityQwen35(dir, label string, backend compute.Backend, info xla.Info, ref *parity.Reference, report *parity.Report,
	trace bool, traceTol float64, stdout, stderr io.Writer, logf func(string, ...any)) error {
	m, err := loadQwen35(dir, label, backend, info, octlm.Float32, stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	opts := parity.Options{Log: logf}
	var runErr error
	report.Rows, runErr = parity.RunQwen35(m, ref, opts)
	if runErr != nil && !errors.Is(runErr, parity.ErrFailed) {
		return runErr
	}
	if trace {
		traces, err := parity.TraceQwen35(m, ref, traceTol, opts)
		if err != nil {
			return err
		}
		if err := writeTrace(stdout, traces, traceTol); err != nil {
			return err
		}
	}
	return nil
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

// generateQwen35 is `octlm generate` on a Qwen3.5 checkpoint: token IDs in, token IDs out.
func generateQwen35(ctx context.Context, a generateArgs, dir string, stdout, stderr io.Writer) error {
	if a.prompt.ids == nil {
		return usageError{qwen35TokenizerNote}
	}
	cfg, err := octlm.ReadQwen35Config(filepath.Join(dir, "config.json"))
	if err != nil {
		return err
	}
	for i, id := range a.prompt.ids {
		if id < 0 || id >= cfg.VocabSize {
			return usageError{fmt.Sprintf("--prompt-ids: token %d at position %d is outside the vocabulary [0, %d) of %s",
				id, i, cfg.VocabSize, filepath.Join(dir, "config.json"))}
		}
	}
	dtype, err := octlm.ParseDType(a.model.dtype)
	if err != nil {
		return usageError{err.Error()}
	}
	backend, info, err := xla.OpenForDType(a.model.backend, string(dtype))
	if err != nil {
		return err
	}
	defer backend.Finalize()
	fmt.Fprintf(stderr, "backend: %s\n", info)
	m, err := loadQwen35(dir, dir, backend, info, dtype, stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	stops, err := octlm.Qwen35StopIDs(dir)
	if err != nil {
		return err
	}
	opts := a.opts
	opts.StopIDs = stops
	opts.Context = ctx
	g, genErr := m.Generate(a.prompt.ids, opts)
	out := &errWriter{fileio.ErrWriter{W: stdout}}
	res := newGenerationResult(g, "", opts.Sampling.Seed, false, stderr)
	switch {
	case a.asJSON && genErr == nil:
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		enc.Encode(res)
	case len(g.GeneratedIDs) > 0:
		fmt.Fprintln(out, strings.Trim(fmt.Sprint(g.GeneratedIDs), "[]"))
	}
	if out.Err != nil {
		return fmt.Errorf("writing the output: %w", out.Err)
	}
	if genErr != nil {
		if errors.Is(genErr, octlm.ErrNonFinite) {
			return checkFailure{fmt.Errorf("%w (after %d generated tokens)", genErr, len(g.GeneratedIDs))}
		}
		return genErr
	}
	if !a.asJSON {
		fmt.Fprintln(stderr, generationSummary(g, opts.Sampling))
	}
	if g.StopReason == octlm.StopInterrupted {
		return errInterrupted
	}
	return nil
}

// qwen35BenchResult is what bench reports for a Qwen3.5 checkpoint.
type qwen35BenchResult struct {
	Model             string  `json:"model"`
	Architecture      string  `json:"architecture"`
	Backend           string  `json:"backend"`
	DType             string  `json:"dtype"`
	WeightBytes       int64   `json:"weight_bytes"`
	LoadSeconds       float64 `json:"load_seconds"`
	CompileSeconds    float64 `json:"compile_seconds"`
	Graphs            int     `json:"graphs"`
	PromptTokens      int     `json:"prompt_tokens"`
	DecodeTokens      int     `json:"decode_tokens"`
	Reps              int     `json:"reps"`
	PrefillTokensPerS float64 `json:"prefill_tokens_per_second"` // best of reps
	DecodeTokensPerS  float64 `json:"decode_tokens_per_second"`  // best of reps
	CacheBytes        int64   `json:"cache_bytes"`               // at prompt+decode positions
	PeakRSSBytes      int64   `json:"peak_rss_bytes"`
}

// benchQwen35 times a Qwen3.5 checkpoint: load, then per rep a prompt of random token IDs on a
// fresh cache (prefill) and greedy decoding on top, after one untimed run that compiles.
func benchQwen35(ctx context.Context, dir string, backend compute.Backend, info xla.Info, dtype octlm.DType, prompt, decode, reps int, asJSON bool, stdout, stderr io.Writer) error {
	begin := time.Now()
	m, err := loadQwen35(dir, dir, backend, info, dtype, stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	res := qwen35BenchResult{Model: dir, Architecture: "qwen3_5 (" + strings.Join(layerTypeCounts(m.Config), ", ") + ")",
		Backend: info.Name, DType: string(dtype), WeightBytes: m.WeightBytes(), LoadSeconds: time.Since(begin).Seconds(),
		PromptTokens: prompt, DecodeTokens: decode, Reps: reps}
	if prompt+decode > m.Config.ContextLength {
		return usageError{fmt.Sprintf("--prompt + --decode = %d exceeds the context length %d", prompt+decode, m.Config.ContextLength)}
	}
	r := rand.New(rand.NewPCG(1, 2))
	ids := make([]int, prompt)
	for i := range ids {
		ids[i] = r.IntN(m.Config.VocabSize)
	}
	run := func(timed bool) error {
		cache, err := m.NewCache()
		if err != nil {
			return err
		}
		defer cache.Close()
		t0 := time.Now()
		logits, err := m.Next(ids, cache)
		if err != nil {
			return err
		}
		prefill := time.Since(t0)
		steps := decode
		if !timed {
			steps = min(decode, 2)
		}
		t1 := time.Now()
		for range steps {
			if ctx.Err() != nil {
				return errInterrupted
			}
			if logits, err = m.Next([]int{octlm.Argmax(logits)}, cache); err != nil {
				return err
			}
		}
		if timed {
			res.PrefillTokensPerS = max(res.PrefillTokensPerS, float64(prompt)/prefill.Seconds())
			res.DecodeTokensPerS = max(res.DecodeTokensPerS, float64(steps)/time.Since(t1).Seconds())
			res.CacheBytes = cache.Bytes()
		}
		return nil
	}
	fmt.Fprintln(stderr, "compiling (one untimed run)")
	if err := run(false); err != nil {
		return err
	}
	for i := range reps {
		fmt.Fprintf(stderr, "run %d of %d: %d prompt tokens, %d decoded\n", i+1, reps, prompt, decode)
		if err := run(true); err != nil {
			return err
		}
	}
	cs := m.CompileStats()
	res.CompileSeconds, res.Graphs = cs.Time.Seconds(), cs.Graphs
	res.PeakRSSBytes = sysinfo.PeakRSS()
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	ew := &errWriter{fileio.ErrWriter{W: stdout}}
	fmt.Fprintf(ew, "model:          %s\n", printable(res.Model))
	fmt.Fprintf(ew, "architecture:   %s\n", res.Architecture)
	fmt.Fprintf(ew, "backend:        %s, %s\n", res.Backend, res.DType)
	fmt.Fprintf(ew, "weights:        %s (%s)\n", commas(res.WeightBytes), loader.HumanBytes(res.WeightBytes))
	fmt.Fprintf(ew, "load:           %.2fs; compile %.2fs (%d graphs)\n", res.LoadSeconds, res.CompileSeconds, res.Graphs)
	fmt.Fprintf(ew, "prefill:        %.1f tokens/s (%d tokens, best of %d)\n", res.PrefillTokensPerS, prompt, reps)
	fmt.Fprintf(ew, "decode:         %.2f tokens/s (%d tokens, best of %d)\n", res.DecodeTokensPerS, decode, reps)
	fmt.Fprintf(ew, "cache:          %s at %d positions (DeltaNet states constant, KV for the attention layers only)\n", loader.HumanBytes(res.CacheBytes), prompt+decode)
	fmt.Fprintf(ew, "peak RSS:       %s (%.2fx the weights)\n", loader.HumanBytes(res.PeakRSSBytes), float64(res.PeakRSSBytes)/float64(max(res.WeightBytes, 1)))
	return ew.Err
}

// layerTypeCounts is e.g. ["18 linear_attention", "6 full_attention"].
func layerTypeCounts(c octlm.Qwen35Config) []string {
	return []string{fmt.Sprintf("%d %s", c.CountLayers(octlm.LinearAttention), octlm.LinearAttention),
		fmt.Sprintf("%d %s", c.CountLayers(octlm.FullAttention), octlm.FullAttention)}
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
	for _, p := range octlm.Qwen35SkippedPrefixes {
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
		fmt.Fprintf(w, "skipped:        %s* %d tensors, %s (%s): not read by the text decoder\n", printable(s.Prefix), s.Count, commas(s.Bytes), loader.HumanBytes(s.Bytes))
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
		return usageError{fmt.Sprintf("the checkpoint needs about %s and %s has %s free", loader.HumanBytes(need), parent, loader.HumanBytes(free))}
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
		dir, q.NumLayers, strings.Join(layerTypeCountsOf(q.LayerTypes()), ", "), len(q.Tensors()), files, commas(need), loader.HumanBytes(need), time.Since(begin).Seconds())
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
