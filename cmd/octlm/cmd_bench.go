package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"

	"github.com/octlm/octlm/bench"
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
	prompt := fs.Int("prompt", 128, "prompt `tokens` for prefill and time to first token")
	decode := fs.Int("decode", 64, "`tokens` decoded one at a time after the prompt")
	bandwidth := fs.Float64("bandwidth-gib", 1, "size in GiB of the streaming read that measures memory bandwidth (at least 1)")
	reps := fs.Int("reps", 1, "timed prefill+decode runs; the report gives the best and the median")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: octlm bench --model DIR|HUB-NAME [--backend NAME] [--dtype f32|bf16] [--prompt 128] [--decode 64] [--reps 1] [--json]\n\n"+
			"Loads the checkpoint (timed against a plain read of the same files), compiles, runs a\n"+
			"prompt of random token IDs and decodes greedily, then measures the memory read bandwidth\n"+
			"and reports decode speed as a fraction of it (the roofline ratio). Progress on stderr,\n"+
			"results on stdout.\n\nflags:")
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
	if *reps < 1 || *reps > 1000 {
		return usageError{fmt.Sprintf("--reps must be between 1 and 1000, got %d", *reps)}
	}
	// Also refuses NaN, and sizes whose byte count overflows int64.
	if !(*bandwidth >= 1) || *bandwidth*(1<<30) >= math.MaxInt64 {
		return usageError{fmt.Sprintf("--bandwidth-gib must be at least 1 and below 2^33, got %v", *bandwidth)}
	}
	dtype, err := octlm.ParseDType(mf.dtype)
	if err != nil {
		return usageError{err.Error()}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dir, err := resolveCheckpoint(ctx, mf.model)
	if err != nil {
		return err
	}
	backend, info, err := xla.OpenForDType(mf.backend, string(dtype))
	if err != nil {
		return err
	}
	defer backend.Finalize()
	fmt.Fprintf(stderr, "backend: %s\n", info)
	warnHalfOnGo(stderr, info, dtype)
	bar := newProgress(stderr, "loading")
	res, err := bench.Run(ctx, bench.Options{
		Dir: dir, Backend: backend, BackendName: info.Name, DType: dtype,
		PromptTokens: *prompt, DecodeTokens: *decode, Reps: *reps, BandwidthBytes: int64(*bandwidth * (1 << 30)),
		Log: stderr, LoadProgress: func(done, total int64) {
			bar.update(done, total)
			if done == total {
				bar.finish()
			}
		},
	})
	if err != nil {
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
