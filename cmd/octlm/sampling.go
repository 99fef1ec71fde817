package main

import (
	"crypto/rand"
	"encoding/binary"
	"flag"

	"github.com/octlm/octlm/octlm"
)

// samplingFlags are the sampling flags of generate and chat. Their defaults are
// octlm.QwenDefaults, so the library holds the one copy of Qwen3's generation settings.
type samplingFlags struct {
	s octlm.Sampling
}

// register adds --temperature, --top-k, --top-p, --min-p, --repetition-penalty and --seed;
// seedHelp says where a seed drawn at random is shown.
func (f *samplingFlags) register(fs *flag.FlagSet, seedHelp string) {
	d := octlm.QwenDefaults()
	fs.Float64Var(&f.s.Temperature, "temperature", d.Temperature, "sampling temperature; 0 means greedy")
	fs.IntVar(&f.s.TopK, "top-k", d.TopK, "keep the k most likely tokens; 0 keeps all")
	fs.Float64Var(&f.s.TopP, "top-p", d.TopP, "keep the smallest set of tokens whose probability reaches p")
	fs.Float64Var(&f.s.MinP, "min-p", d.MinP, "drop tokens less likely than min-p × the most likely one")
	fs.Float64Var(&f.s.RepetitionPenalty, "repetition-penalty", d.RepetitionPenalty, "divide the logits of tokens already seen (1 is none)")
	fs.Uint64Var(&f.s.Seed, "seed", d.Seed, "random seed for sampling (default: a random one, "+seedHelp+")")
}

// sampling returns the parsed settings, with a random seed unless --seed was given, or a usage
// error for a setting out of range.
func (f *samplingFlags) sampling(fs *flag.FlagSet) (octlm.Sampling, error) {
	s := f.s
	if !flagSet(fs, "seed") {
		s.Seed = randomSeed()
	}
	if err := s.Validate(); err != nil {
		return octlm.Sampling{}, usageError{err.Error()}
	}
	return s, nil
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
