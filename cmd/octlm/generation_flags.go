package main

import (
	"crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"math"

	"github.com/octlm/octlm/octlm"
)

// generationFlags are the flags of generate and chat that shape a generation: --max-new-tokens
// (-n), the sampling settings and the KV cache's dtype. The sampling defaults are octlm.QwenDefaults, so the library
// holds the one copy of Qwen3's generation settings.
type generationFlags struct {
	maxNew  int
	s       octlm.Sampling
	kvDType string
}

// register adds --max-new-tokens (-n, default maxNew), --temperature, --top-k, --top-p,
// --min-p, --repetition-penalty, --seed and --kv-dtype; seedHelp says where a seed drawn at random is shown.
func (f *generationFlags) register(fs *flag.FlagSet, maxNew int, maxNewHelp, seedHelp string) {
	fs.IntVar(&f.maxNew, "max-new-tokens", maxNew, maxNewHelp)
	alias(fs, "n", "max-new-tokens")
	d := octlm.QwenDefaults()
	fs.Float64Var(&f.s.Temperature, "temperature", d.Temperature, "sampling temperature; 0 means greedy")
	fs.IntVar(&f.s.TopK, "top-k", d.TopK, "keep the k most likely tokens; 0 keeps all")
	fs.Float64Var(&f.s.TopP, "top-p", d.TopP, "keep the smallest set of tokens whose probability reaches p")
	fs.Float64Var(&f.s.MinP, "min-p", d.MinP, "drop tokens less likely than min-p × the most likely one")
	fs.Float64Var(&f.s.RepetitionPenalty, "repetition-penalty", d.RepetitionPenalty, "divide the logits of tokens already seen (1 is none)")
	fs.Uint64Var(&f.s.Seed, "seed", d.Seed, "random seed for sampling (default: a random one, "+seedHelp+")")
	fs.StringVar(&f.kvDType, "kv-dtype", "", "store the KV cache in f32, bf16 or f16 (default: f16 under f32 weights where attention runs in Go, as llama.cpp; else the weights' dtype)")
}

// options returns the parsed settings, with a random seed unless --seed was given, or a usage
// error for a setting out of range.
func (f *generationFlags) options(fs *flag.FlagSet) (octlm.GenerateOptions, error) {
	if f.maxNew < 1 {
		return octlm.GenerateOptions{}, usageError{fmt.Sprintf("--max-new-tokens must be at least 1, got %d", f.maxNew)}
	}
	s := f.s
	if !flagSet(fs, "seed") {
		s.Seed = randomSeed()
	}
	// The library reads a zero penalty as none (its zero value); given on the command line, 0
	// would divide by zero, so it is refused as transformers refuses it.
	if !(s.RepetitionPenalty > 0) || math.IsInf(s.RepetitionPenalty, 0) {
		return octlm.GenerateOptions{}, usageError{fmt.Sprintf("--repetition-penalty must be a finite number greater than 0 (1 is none), got %v", s.RepetitionPenalty)}
	}
	if err := s.Validate(); err != nil {
		return octlm.GenerateOptions{}, usageError{err.Error()}
	}
	kv, err := parseKVDType(f.kvDType)
	if err != nil {
		return octlm.GenerateOptions{}, err
	}
	return octlm.GenerateOptions{MaxNewTokens: f.maxNew, Sampling: s, KVDType: kv}, nil
}

// parseKVDType is the dtype --kv-dtype names ("" for the default), or a usage error.
func parseKVDType(name string) (octlm.DType, error) {
	if name == "" {
		return "", nil
	}
	kv, err := octlm.ParseDType(name)
	if err != nil {
		return "", usageError{fmt.Sprintf("--kv-dtype must be f32, bf16 or f16, got %q", name)}
	}
	return kv, nil
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// randomSeed draws a sampling seed from the operating system's random source.
func randomSeed() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand.Read does not fail on supported platforms
	}
	return binary.LittleEndian.Uint64(b[:])
}
