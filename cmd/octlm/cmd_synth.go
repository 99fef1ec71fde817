package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/synth"
	"github.com/octlm/octlm/units"
)

func init() {
	register("synth", "write a random checkpoint in the Hub's Qwen3 or Qwen3.5 layout", func(args []string) error {
		return runSynth(args, os.Stdout, os.Stderr)
	})
}

// runSynth is `octlm synth`. The checkpoint is built in a hidden folder beside --out and
// renamed into place when complete (synth.Create); on an error or an interrupt (SIGINT,
// SIGTERM: exit status 130, 143) the hidden folder is removed and --out is left as it was.
func runSynth(args []string, stdout, stderr io.Writer) error {
	ctx, stop := interruptContext()
	defer stop()
	return withOutputCheck(stdout, func(stdout io.Writer) error { return synthCmd(ctx, args, stdout, stderr) })
}

func synthCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("synth", flag.ContinueOnError)
	fs.SetOutput(stderr)
	like := fs.String("like", "qwen3-0.6b", "shape to copy: qwen3-0.6b (1.4 GiB), qwen3-1.7b (3.8 GiB), qwen3-4b (8.2 GiB), qwen3-8b (15.3 GiB), "+
		"tiny (Qwen3's whole vocabulary, hidden 16, 2 layers: 10 MB that speak random text; with --no-tokenizer, tiny-fixture), tiny-fixture (testdata/tiny-qwen3's shape, vocabulary 320), "+
		"or Qwen3.5's qwen3.5-0.8b, qwen3.5-2b, qwen3.5-4b, qwen3.5-9b (multimodal layout, text weights random, token IDs only)")
	out := fs.String("out", "", "output `DIR` (created; an existing checkpoint there is replaced only with --force)")
	force := fs.Bool("force", false, "replace the checkpoint already in --out")
	seed := fs.Int64("seed", 0, "random seed; the same seed writes the same bytes")
	layers := fs.Int("layers", 0, "override num_hidden_layers")
	vocab := fs.Int("vocab", 0, "override vocab_size")
	hidden := fs.Int("hidden", 0, "override hidden_size")
	ff := fs.Int("ff", 0, "override intermediate_size")
	noTok := fs.Bool("no-tokenizer", false, "do not write tokenizer.json and tokenizer_config.json")
	tokDir := fs.String("tokenizer-dir", "", "copy the tokenizer files from this folder instead of the built-in Qwen3 ones")
	manifest := fs.Bool("manifest", false, "also write "+loader.ManifestFileName)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "usage: octlm synth [--like "+strings.Join(append(synth.LikeNames(), synth.Qwen35LikeNames()...), "|")+"] --out DIR [--force] [--seed N] [--layers N] ...\n\n"+
			"Writes config.json, generation_config.json, BF16 weights with every Qwen3 or Qwen3.5 tensor\n"+
			"under the Hub's names (lm_head.weight: a copy of the embedding where tied, its own in Qwen3-8B),\n"+
			"sharded as the Hub's are (model.safetensors up to 4 GB, else model-0000N-of-0000M shards\n"+
			"and model.safetensors.index.json), and Qwen3's tokenizer files (Qwen3.5's shapes have none:\n"+
			"they run on token IDs). Values are random (normal,\n"+
			"std 0.02; norms near 1): for speed and memory work, never for output quality. The folder\n"+
			"is built beside DIR and renamed into place when complete; sizes that do not fit the free\n"+
			"disk are refused before writing.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usageError{"--out DIR is required"}
	}
	// Bounded before any list of tensors (one entry per layer) is made: octlm reads no more.
	for _, o := range []struct {
		name     string
		v, bound int
	}{{"layers", *layers, octlm.MaxLayers}, {"vocab", *vocab, octlm.MaxVocab}, {"hidden", *hidden, octlm.MaxHidden}, {"ff", *ff, octlm.MaxIntermediate}} {
		if o.v > o.bound {
			return usageError{fmt.Sprintf("--%s %d is beyond the largest octlm reads, %d", o.name, o.v, o.bound)}
		}
	}
	if q, ok := synth.Qwen35LikeNamed(*like); ok {
		for _, o := range []struct {
			v   int
			dst *int
		}{{*layers, &q.NumLayers}, {*vocab, &q.VocabSize}, {*hidden, &q.HiddenSize}, {*ff, &q.IntermediateSize}} {
			if o.v < 0 {
				return usageError{"sizes must be positive"}
			}
			if o.v > 0 {
				*o.dst = o.v
			}
		}
		if q.EOSTokenID >= q.VocabSize {
			q.EOSTokenID = q.VocabSize - 1
		}
		if err := q.Validate(); err != nil {
			return usageError{err.Error()}
		}
		return synthQwen35(ctx, q, filepath.Clean(*out), *force, synth.Options{Seed: *seed, Progress: stderr, Manifest: *manifest, Context: ctx}, stdout)
	}
	cfg, err := synth.Like(*like)
	if err != nil {
		return usageError{err.Error()}
	}
	if *noTok && strings.EqualFold(*like, "tiny") {
		cfg = synth.Tiny() // no text in or out: the fixture's small vocabulary will do
	}
	for _, o := range []struct {
		name string
		v    int
		dst  *int
	}{{"layers", *layers, &cfg.NumLayers}, {"vocab", *vocab, &cfg.VocabSize}, {"hidden", *hidden, &cfg.HiddenSize}, {"ff", *ff, &cfg.IntermediateSize}} {
		if o.v < 0 || (o.v == 0 && flagSet(fs, o.name)) {
			return usageError{fmt.Sprintf("--%s must be at least 1, got %d", o.name, o.v)}
		}
		if o.v > 0 {
			*o.dst = o.v
		}
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err.Error()}
	}
	dir := filepath.Clean(*out)
	begin := time.Now()
	err = synth.Create(dir, cfg, *force, synth.Options{Seed: *seed, Progress: stderr, NoTokenizer: *noTok, TokenizerDir: *tokDir, Manifest: *manifest, Context: ctx})
	if err != nil {
		return synthError(ctx, dir, err)
	}
	size, _ := cfg.ModelFileSize()
	files := loader.SingleFileName
	if n := len(cfg.Shards(0)); n > 1 {
		files = fmt.Sprintf("%d shards", n)
	}
	fmt.Fprintf(stdout, "wrote %s: %d entries, %s unique params, %s of %s bytes (%s) in %.1fs\n",
		dir, len(cfg.Tensors()), units.Commas(cfg.UniqueParams()), files, units.Commas(size), units.Bytes(size), time.Since(begin).Seconds())
	return nil
}

// synthError is synth.Create's error as the command reports it: a refused target is a usage
// error (exit status 2), an interrupt ends the command with 128 + the signal's number.
func synthError(ctx context.Context, dir string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w; %s left as it was", interruptedBy(ctx), dir) // exit status 130 or 143
	}
	var refused *synth.RefusedError
	if errors.As(err, &refused) {
		msg := "--out: " + refused.Error()
		if refused.NeedsForce {
			msg += "; give --force to replace it"
		}
		return usageError{msg}
	}
	return err
}

// synthQwen35 is `octlm synth --like qwen3.5-…`: synth.CreateQwen35, the same atomic writer as
// Qwen3's.
func synthQwen35(ctx context.Context, q synth.Qwen35Like, dir string, force bool, opts synth.Options, stdout io.Writer) error {
	begin := time.Now()
	if err := synth.CreateQwen35(dir, q, force, opts); err != nil {
		return synthError(ctx, dir, err)
	}
	var need int64
	for _, t := range q.Tensors() {
		need += t.Bytes()
	}
	files := loader.SingleFileName
	if n := len(q.Shards(0)); n > 1 {
		files = fmt.Sprintf("%d shards", n)
	}
	_, err := fmt.Fprintf(stdout, "wrote %s: Qwen3.5 (%d layers: %s), %d entries, %s of %s tensor bytes (%s) in %.1fs; no tokenizer: run it with token IDs\n",
		dir, q.NumLayers, strings.Join(layerTypeCountsOf(q.LayerTypes()), ", "), len(q.Tensors()), files, units.Commas(need), units.Bytes(need), time.Since(begin).Seconds())
	return err
}

// layerTypeCountsOf counts each of Qwen3.5's layer types: "18 linear_attention", "6 full_attention".
func layerTypeCountsOf(types []string) []string {
	counts := map[string]int{}
	for _, t := range types {
		counts[t]++
	}
	return []string{fmt.Sprintf("%d %s", counts[octlm.LinearAttention], octlm.LinearAttention),
		fmt.Sprintf("%d %s", counts[octlm.FullAttention], octlm.FullAttention)}
}
