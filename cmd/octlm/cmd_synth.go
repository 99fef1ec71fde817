package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm/synth"
)

func init() {
	register("synth", "write a random checkpoint in the Hub's Qwen3 layout", func(args []string) error {
		return runSynth(args, os.Stdout, os.Stderr)
	})
}

func runSynth(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("synth", flag.ContinueOnError)
	fs.SetOutput(stderr)
	like := fs.String("like", "qwen3-0.6b", "shape to copy: qwen3-0.6b (1.4 GiB), qwen3-1.7b (3.8 GiB), qwen3-4b (8.2 GiB), qwen3-8b (15.3 GiB) or tiny")
	out := fs.String("out", "", "output `DIR` (created; existing checkpoint files are replaced)")
	seed := fs.Int64("seed", 0, "random seed; the same seed writes the same bytes")
	layers := fs.Int("layers", 0, "override num_hidden_layers")
	vocab := fs.Int("vocab", 0, "override vocab_size")
	hidden := fs.Int("hidden", 0, "override hidden_size")
	ff := fs.Int("ff", 0, "override intermediate_size")
	noTok := fs.Bool("no-tokenizer", false, "do not write tokenizer.json and tokenizer_config.json")
	tokDir := fs.String("tokenizer-dir", "", "copy the tokenizer files from this folder instead of the built-in Qwen3 ones")
	manifest := fs.Bool("manifest", false, "also write "+loader.ManifestFileName)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: octlm synth [--like qwen3-0.6b|qwen3-1.7b|qwen3-4b|qwen3-8b|tiny] --out DIR [--seed N] [--layers N] ...\n\n"+
			"Writes config.json, generation_config.json, BF16 weights with every Qwen3 tensor under\n"+
			"the Hub's names (lm_head.weight: a copy of the embedding where tied, its own in Qwen3-8B),\n"+
			"sharded as the Hub's are (model.safetensors up to 4 GB, else model-0000N-of-0000M shards\n"+
			"and model.safetensors.index.json), and Qwen3's tokenizer files. Values are random (normal,\n"+
			"std 0.02; norms near 1): for speed and memory work, never for output quality.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usageError{"--out DIR is required"}
	}
	cfg, err := synth.Like(*like)
	if err != nil {
		return usageError{err.Error()}
	}
	for _, o := range []struct {
		v   int
		dst *int
	}{{*layers, &cfg.NumLayers}, {*vocab, &cfg.VocabSize}, {*hidden, &cfg.HiddenSize}, {*ff, &cfg.IntermediateSize}} {
		if o.v < 0 {
			return usageError{"sizes must be positive"}
		}
		if o.v > 0 {
			*o.dst = o.v
		}
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err.Error()}
	}
	begin := time.Now()
	err = synth.WriteWith(*out, cfg, synth.Options{Seed: *seed, Progress: stderr, NoTokenizer: *noTok, TokenizerDir: *tokDir, Manifest: *manifest})
	if err != nil {
		return err
	}
	size, _ := cfg.ModelFileSize()
	files := loader.SingleFileName
	if n := len(cfg.Shards(0)); n > 1 {
		files = fmt.Sprintf("%d shards", n)
	}
	fmt.Fprintf(stdout, "wrote %s: %d entries, %s unique params, %s of %s bytes (%s) in %.1fs\n",
		filepath.Clean(*out), len(cfg.Tensors()), commas(cfg.UniqueParams()), files, commas(size), loader.HumanBytes(size), time.Since(begin).Seconds())
	return nil
}
