package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/octlm/octlm/bench"
	"github.com/octlm/octlm/internal/progress"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/xla"
)

func init() {
	register("bench", "measure load, compile, prefill and decode speed, peak memory and the decode roofline ratio", func(args []string) error {
		return runBench(args, os.Stdout, os.Stderr)
	})
}

func runBench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var mf modelFlags
	mf.register(fs, "")
	mf.registerAdapter(fs)
	prompt := fs.Int("prompt", 128, "prompt `tokens` for prefill and time to first token")
	decode := fs.Int("decode", 64, "`tokens` decoded one at a time after the prompt")
	depth := fs.Int("depth", 0, "`positions` in the KV cache before the prompt (llama-bench -d): prefill and decode at that depth")
	depthFill := fs.String("depth-fill", bench.FillPrefill, "how the cache reaches --depth: prefill (a timed prompt of random tokens) or zeros (zero keys and values, no model run; decode does the same work)")
	kvDType := fs.String("kv-dtype", "", "store the KV cache in f32, bf16 or f16 (default: generate's, f16 under f32 weights where attention runs in Go, as llama.cpp; else the weights' dtype); a half-precision cache halves it and rounds keys and values")
	bandwidth := fs.Float64("bandwidth-gib", 1, "size in GiB of the streaming read that measures memory bandwidth (at least 1)")
	reps := fs.Int("reps", 1, "timed prefill+decode runs; the report gives the best and the median")
	batch := fs.String("batch", "", "also decode `B` sequences together (NextBatch), or each size of a list such as 1,2,4,8,16, and print their aggregate tokens/s beside B=1")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "usage: octlm bench --model DIR|HUB-NAME [--backend NAME] [--dtype f32|bf16] [--prompt 128] [--decode 64] [--depth N [--depth-fill prefill|zeros]] [--kv-dtype f32|bf16|f16] [--reps 1] [--batch 1,2,4,8] [--adapter DIR] [--json]\n\n"+
			"Loads the checkpoint (timed against a plain read of the same files), compiles, runs a\n"+
			"prompt of random token IDs on top of --depth positions already in the KV cache and decodes\n"+
			"greedily, then measures the memory read bandwidth and reports decode speed as a fraction\n"+
			"of it (the roofline ratio). --batch adds a table of batched decoding: B sequences, each on\n"+
			"its own KV cache, decoded one token each per step. Progress on stderr, results on stdout.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if mf.model == "" {
		return usageError{"--model is required"}
	}
	if *prompt <= 0 || *decode <= 0 {
		return usageError{"--prompt and --decode must be positive"}
	}
	if *depth < 0 {
		return usageError{fmt.Sprintf("--depth must be at least 0, got %d", *depth)}
	}
	if *depthFill != bench.FillPrefill && *depthFill != bench.FillZeros {
		return usageError{fmt.Sprintf("--depth-fill must be %s or %s, got %q", bench.FillPrefill, bench.FillZeros, *depthFill)}
	}
	if *reps < 1 || *reps > 1000 {
		return usageError{fmt.Sprintf("--reps must be between 1 and 1000, got %d", *reps)}
	}
	// Also refuses NaN, and sizes whose byte count overflows int64.
	if !(*bandwidth >= 1) || *bandwidth*(1<<30) >= math.MaxInt64 {
		return usageError{fmt.Sprintf("--bandwidth-gib must be at least 1 and below 2^33, got %v", *bandwidth)}
	}
	// Checked again, with the model loaded, just before the read.
	if err := bench.CheckBandwidthSize(int64(*bandwidth * (1 << 30))); err != nil {
		return usageError{"--bandwidth-gib: " + err.Error()}
	}
	batches, err := parseBatchSizes(*batch)
	if err != nil {
		return err
	}
	dtype, err := octlm.ParseDType(mf.dtype)
	if err != nil {
		return usageError{err.Error()}
	}
	kv, err := parseKVDType(*kvDType)
	if err != nil {
		return err
	}
	ctx, stop := interruptContext()
	defer stop()
	dir, err := resolveCheckpoint(ctx, mf.model)
	if err != nil {
		return err
	}
	adapter, err := readAdapter(dir, mf.adapter)
	if err != nil {
		return err
	}
	// The bandwidth read's buffer is allocated while the model is still loaded; each cache holds
	// the depth, the prompt and the decoded tokens, and --batch's largest size has that many.
	positions, bandwidthBytes := *depth+*prompt+*decode, int64(*bandwidth*(1<<30))
	work := xla.Workload{Longest: positions}
	if len(batches) > 0 {
		work.Sequences = slices.Max(batches)
		positions *= work.Sequences
	}
	job := modelJob(mf.backend, dir, dtype, positions, work, bandwidthBytes, stderr)
	backend, info, err := xla.Choose(job)
	if err != nil {
		return err
	}
	defer backend.Finalize()
	fmt.Fprintf(stderr, "backend: %s\n", info)
	warnHalfOnGo(stderr, info, dtype)
	if err := job.Fits(info); err != nil {
		return err
	}
	bar := progress.New(stderr, "loading")
	res, err := bench.Run(ctx, bench.Options{
		Dir: dir, Backend: backend, BackendName: info.Name, DType: dtype,
		PromptTokens: *prompt, DecodeTokens: *decode, Reps: *reps, Depth: *depth, DepthFill: *depthFill, KVDType: kv, BandwidthBytes: int64(*bandwidth * (1 << 30)),
		Batches: batches, Adapter: adapter, AdapterName: mf.adapter,
		Log: stderr, LoadProgress: func(done, total int64) {
			bar.Update(done, total)
			if done == total {
				bar.Finish()
			}
		},
	})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %v", interruptedBy(ctx), err) // exit status 130 or 143
		}
		return err
	}
	if res.LoadAverage > float64(res.GOMAXPROCS) {
		fmt.Fprintf(stderr, "note: the load average was %.1f on %d cores: other work shared the machine, so these numbers are low\n", res.LoadAverage, res.GOMAXPROCS)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return res.WriteText(stdout)
}

// maxBenchBatch is the largest --batch size: past it the KV caches alone outgrow any machine
// octlm runs on, for a model worth measuring.
const maxBenchBatch = 1024

// parseBatchSizes reads --batch: one size or a comma-separated list, each from 1 to
// maxBenchBatch and given once ("" is none).
func parseBatchSizes(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		b, err := strconv.Atoi(strings.TrimSpace(f))
		switch {
		case err != nil:
			return nil, usageError{fmt.Sprintf("--batch: %q is not a batch size", f)}
		case b < 1 || b > maxBenchBatch:
			return nil, usageError{fmt.Sprintf("--batch: %d is not between 1 and %d", b, maxBenchBatch)}
		case slices.Contains(out, b):
			return nil, usageError{fmt.Sprintf("--batch: %d given twice", b)}
		}
		out = append(out, b)
	}
	return out, nil
}
