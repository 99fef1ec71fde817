package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/octlm/octlm/eval"
	"github.com/octlm/octlm/internal/buildinfo"
	"github.com/octlm/octlm/internal/fileio"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/tokenizer"
	"github.com/octlm/octlm/xla"
)

func init() {
	register("eval", "score a model on lm-evaluation-harness tasks (YAML + local data), writing lm-eval's results files", func(args []string) error {
		return interruptible(func(ctx context.Context) error { return runEval(ctx, args, os.Stdout, os.Stderr) })
	})
}

// maxEvalBatch bounds --batch (each sequence of a batch holds its own KV cache).
const maxEvalBatch = 1024

// evalArgs is what eval's flags ask for, checked.
type evalArgs struct {
	model      modelFlags // model.adapter: --adapter
	tasks      []string
	output     string
	logSamples bool
	limit      float64
	numFewshot *int
	batch      int
	maxLength  int

	klBase    string // --kl-divergence-base
	klCompare bool   // --kl-divergence
	klText    string // --kl-text
	klCtx     int
	klChunks  int
}

func parseEvalArgs(args []string, stderr io.Writer) (evalArgs, error) {
	var a evalArgs
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	a.model.register(fs, "")
	a.model.registerAdapter(fs)
	tasks := fs.String("tasks", "", "task `YAML|DIR[,...]`: lm-eval task or group files, or folders of them")
	fs.StringVar(&a.output, "output", "", "write results_<date>.json (and samples) under `DIR`/<model>, as lm-eval's --output_path")
	fs.BoolVar(&a.logSamples, "log-samples", false, "also write samples_<task>_<date>.jsonl: every document's requests, responses and metrics")
	fs.Float64Var(&a.limit, "limit", 0, "evaluate only the first `N` documents of each task (below 1: that fraction)")
	shots := fs.Int("num-fewshot", -1, "few-shot examples per document (default: each task's num_fewshot)")
	fs.IntVar(&a.batch, "batch", 1, "sequences per model call: B requests' prefixes (or continuations) at a time, B generations decoded together")
	fs.IntVar(&a.maxLength, "max-length", 0, "lm-eval's max_length: inputs are left-truncated to it (default: the model's max_position_embeddings)")
	fs.StringVar(&a.klBase, "kl-divergence-base", "", "llama-perplexity's KL-divergence base `FILE`: written from --kl-text (or, with --kl-divergence, compared against)")
	fs.BoolVar(&a.klCompare, "kl-divergence", false, "compare the model with --kl-divergence-base's logits instead of writing them")
	fs.StringVar(&a.klText, "kl-text", "", "the text `FILE` whose tokens the base is computed on (llama-perplexity's -f)")
	fs.IntVar(&a.klCtx, "kl-ctx", 512, "tokens per chunk when writing the base (llama-perplexity's -c); the second half of each is scored")
	fs.IntVar(&a.klChunks, "kl-chunks", 0, "at most `N` chunks when writing the base (0: all)")
	alias(fs, "m", "model")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: octlm eval --model DIR --tasks YAML|DIR[,...] [--output DIR] [flags]\n"+
			"       octlm eval --model DIR --kl-divergence-base FILE (--kl-text TEXT [--kl-ctx N] | --kl-divergence)\n\n"+
			"Runs lm-evaluation-harness tasks (multiple_choice, loglikelihood, loglikelihood_rolling,\n"+
			"generate_until) read from their YAML files and local JSON, JSON Lines or Parquet data, answering\n"+
			"the requests as lm-eval's Hugging Face backend does, and prints lm-eval's results table.\n"+
			"With --output, writes lm-eval's results file (and with --log-samples its samples files).\n"+
			"Ctrl-C keeps the results of the tasks already finished. docs/eval.md has the details.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return a, err
	}
	for _, t := range strings.Split(*tasks, ",") {
		if t = strings.TrimSpace(t); t != "" {
			a.tasks = append(a.tasks, t)
		}
	}
	switch {
	case a.klBase != "" && len(a.tasks) > 0:
		return a, usageError{"--kl-divergence-base runs alone: give it without --tasks"}
	case a.klBase != "" && a.klCompare == (a.klText != ""):
		return a, usageError{"--kl-divergence-base FILE: give --kl-text TEXT to write the base, or --kl-divergence to compare against it"}
	case a.klBase == "" && (a.klCompare || a.klText != ""):
		return a, usageError{"--kl-divergence and --kl-text need --kl-divergence-base FILE"}
	case a.klBase != "" && a.klCtx < 4:
		return a, usageError{"--kl-ctx must be ≥ 4"}
	case len(a.tasks) == 0 && a.klBase == "":
		return a, usageError{"--tasks is required (a task YAML or a folder of them)"}
	case a.batch < 1 || a.batch > maxEvalBatch:
		return a, usageError{fmt.Sprintf("--batch must be from 1 to %d", maxEvalBatch)}
	case a.maxLength < 0:
		return a, usageError{"--max-length must be ≥ 1"}
	case a.limit < 0:
		return a, usageError{"--limit must be ≥ 0"}
	case a.logSamples && a.output == "":
		return a, usageError{"--log-samples needs --output (where the samples files go)"}
	}
	if flagSet(fs, "num-fewshot") {
		if *shots < 0 {
			return a, usageError{"--num-fewshot must be ≥ 0"}
		}
		a.numFewshot = shots
	}
	return a, nil
}

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	begin := time.Now()
	a, err := parseEvalArgs(args, stderr)
	if err != nil {
		return err
	}
	if a.klBase != "" {
		return runKLDivergence(ctx, a, stdout, stderr)
	}
	// Every task and its data are read before the model: bad input fails at once.
	var all []*eval.Instances
	suite, err := eval.LoadSuite(a.tasks...)
	if err != nil {
		return err
	}
	for _, t := range suite.Tasks {
		in, err := t.Build(eval.BuildOptions{NumFewshot: a.numFewshot, Limit: a.limit})
		if err != nil {
			return err
		}
		all = append(all, in)
	}
	dir, err := a.model.resolve(ctx)
	if err != nil {
		return err
	}
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		return fmt.Errorf("%s: eval needs the tokenizer: %w", dir, err)
	}
	stops, err := octlm.ReadStopIDs(dir, tok)
	if err != nil {
		return err
	}
	window, err := contextLength(dir)
	if err != nil {
		return err
	}
	maxLength := a.maxLength
	switch {
	case maxLength == 0:
		maxLength = window
	case maxLength > window:
		return usageError{fmt.Sprintf("--max-length %d is more than the model's context of %d positions", maxLength, window)}
	}
	runner, err := eval.NewRunner(nil, tok, maxLength, stops)
	if err != nil {
		return err
	}
	positions := 1
	for _, in := range all {
		positions = max(positions, runner.Longest(in))
	}
	var outDir, dateID string
	if a.output != "" {
		outDir = filepath.Join(a.output, eval.SanitizeModelName(a.model.model))
		if err := fileio.CheckWritableDir(outDir); err != nil {
			return fmt.Errorf("--output: %w", err)
		}
		dateID = strings.ReplaceAll(begin.Format("2006-01-02T15:04:05.000000"), ":", "-")
	}
	// --batch B holds B caches at once: the memory check plans for B times the positions.
	m, err := a.model.openDir(dir, positions*a.batch, xla.Workload{Sequences: a.batch, Longest: positions}, stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	runner.Model, runner.Batch = m, a.batch
	cfg := eval.RunConfig{
		Model: a.model.model, Adapter: a.model.adapter, DType: string(m.DType), Backend: shortBackend(m.Backend),
		OctlmVersion: octlmVersion(), MaxLength: maxLength, BatchSize: a.batch, Limit: a.limit,
		NumFewshot: a.numFewshot, Date: float64(begin.UnixNano()) / 1e9,
	}
	var done []eval.TaskResult
	for _, in := range all {
		tr, err := evalTask(ctx, runner, in, outDir, dateID, a.logSamples, stderr)
		if err != nil {
			if ctx.Err() != nil {
				fmt.Fprintf(stderr, "interrupted during %s; the results of %d finished task(s) are kept\n", printable(in.Task.Name), len(done))
				return interruptedBy(ctx)
			}
			return err
		}
		done = append(done, tr)
		fmt.Fprintf(stderr, "%s: %d documents scored\n", printable(in.Task.Name), len(in.Docs))
		if outDir != "" {
			cfg.TotalSeconds = time.Since(begin).Seconds()
			if err := writeResults(outDir, dateID, done, suite.Groups, cfg); err != nil {
				return err
			}
		}
	}
	out := &errWriter{fileio.ErrWriter{W: stdout}}
	fmt.Fprintf(out, "octlm (%s), limit: %s, num_fewshot: %s, batch_size: %d\n", printable(cfg.ModelArgs()), limitText(a.limit), shotsText(a.numFewshot), a.batch)
	if err := eval.Table(out, done); err != nil {
		return err
	}
	var groups strings.Builder
	if err := eval.GroupTable(&groups, done, suite.Groups); err != nil {
		return err
	}
	if groups.Len() > 0 {
		fmt.Fprintf(out, "\n%s", groups.String())
	}
	if outDir != "" {
		fmt.Fprintf(stderr, "results: %s\n", printable(filepath.Join(outDir, "results_"+dateID+".json")))
	}
	return out.check()
}

// shotsText and limitText write the line above lm-eval's table as lm-eval
// does (None for what was not given).
func shotsText(n *int) string {
	if n == nil {
		return "None"
	}
	return fmt.Sprint(*n)
}

func limitText(l float64) string {
	if l == 0 {
		return "None"
	}
	return fmt.Sprint(l)
}

// evalTask runs one task, streaming its samples file when asked, and aggregates its metrics.
func evalTask(ctx context.Context, r *eval.Runner, in *eval.Instances, outDir, dateID string, logSamples bool, stderr io.Writer) (eval.TaskResult, error) {
	var samples *fileio.Output
	if logSamples {
		var err error
		samples, err = fileio.Create(filepath.Join(outDir, "samples_"+in.Task.Name+"_"+dateID+".jsonl"))
		if err != nil {
			return eval.TaskResult{}, err
		}
		defer samples.Abort()
	}
	line := newRequestsLine(stderr, in.Task.Name)
	r.Progress = line.update
	err := r.Run(ctx, in, func(d *eval.Document) error {
		if samples == nil {
			return nil
		}
		for _, f := range in.FilterNames() {
			b, err := in.SampleLine(d, f)
			if err != nil {
				return err
			}
			if _, err := samples.Write(b); err != nil {
				return fmt.Errorf("writing %s: %w", samples.Target(), err)
			}
		}
		return nil
	})
	line.finish()
	if err != nil {
		return eval.TaskResult{}, err
	}
	if samples != nil {
		if err := samples.Commit(); err != nil {
			return eval.TaskResult{}, err
		}
	}
	return eval.TaskResult{Instances: in, Result: in.Aggregate()}, nil
}

func writeResults(outDir, dateID string, done []eval.TaskResult, groups []*eval.Group, cfg eval.RunConfig) error {
	b, err := eval.ResultsJSON(done, groups, cfg)
	if err != nil {
		return err
	}
	return fileio.WriteFile(filepath.Join(outDir, "results_"+dateID+".json"), b)
}

// contextLength is the checkpoint's max_position_embeddings, lm-eval's default max_length.
func contextLength(dir string) (int, error) {
	shape, err := octlm.ReadShape(filepath.Join(dir, "config.json"))
	if err != nil {
		return 0, err
	}
	return shape.Context, nil
}

// octlmVersion is octlm's module version and VCS revision, as `octlm version` prints them.
func octlmVersion() string {
	info := buildinfo.Read()
	if info == nil {
		return "(unknown)"
	}
	v := info.Main.Version
	if rev, modified := buildinfo.Revision(info); rev != "" {
		v += " " + rev
		if modified {
			v += "+modified"
		}
	}
	return v
}

// requestsLine shows a task's requests done, their rate and the time left on stderr when it is
// a terminal, redrawn in place and erased at the end.
type requestsLine struct {
	w     io.Writer
	task  string
	on    bool
	begin time.Time
	last  time.Time
	drawn bool
}

func newRequestsLine(w io.Writer, task string) *requestsLine {
	return &requestsLine{w: w, task: printable(task), on: isTerminal(w), begin: time.Now()}
}

func (p *requestsLine) update(done, total int) {
	if !p.on {
		return
	}
	now := time.Now()
	if now.Sub(p.last) < 200*time.Millisecond && done < total {
		return
	}
	p.last = now
	fmt.Fprintf(p.w, "\r\x1b[K%s", progressText(p.task, "requests", "%.1f", done, total, done, now.Sub(p.begin)))
	p.drawn = true
}

func (p *requestsLine) finish() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}
