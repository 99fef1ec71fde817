package figures

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/octlm/octlm/internal/fileio"
	"github.com/octlm/octlm/octlm"
)

// Defaults shared by the notebooks and All, so both draw the same figures.
const (
	// TokenizerText is the text 03-generation tokenizes.
	TokenizerText = "Rotary embeddings pair channels: Qwen3 rotates channel i with i+64, not 2i with 2i+1. 東京 → 🚀\n"
	// Question is the chat prompt's question.
	Question = "Why does the pairing of RoPE channels matter?"

	// PairChannels is the head width RopePairs draws.
	PairChannels = 16
	// GenerateTokens is how many tokens 03-generation generates per run.
	GenerateTokens = 32
	// HalfTokens is how many greedy tokens the half-precision comparison generates per prompt.
	HalfTokens = 32
)

// HalfQuestions returns the prompts of the half-precision comparison on a real Qwen3.
func HalfQuestions() []string {
	return []string{Question, "Write a haiku about float32.", "What is 17 times 23?"}
}

// AnglePairs are the RoPE pairs RopeAngles draws for a head of headDim channels: the fastest, the
// next, and a few slower ones up to the slowest.
func AnglePairs(headDim int) []int {
	half := headDim / 2
	out := []int{0, 1}
	for _, p := range []int{half / 8, half / 4, half / 2, half - 1} {
		if p > out[len(out)-1] {
			out = append(out, p)
		}
	}
	return out
}

// AnglePositions returns the positions RopeAngles draws in 02-rope.
func AnglePositions() []int { return []int{0, 1, 2, 3, 4, 8, 64, 1000, 30000} }

// Set is every output of All.
type Set struct {
	Figures  []Figure
	Tables   []Table
	Snippets []Snippet
}

// All computes every figure and table of the four notebooks on src. logf, when not nil, is told
// each step. tmp is a folder for corrupted copies (01-loading).
func All(src *Source, tmp string, logf func(format string, args ...any)) (*Set, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	set := &Set{}
	logf("01-loading: header, corruptions, switches, parameters, memory")
	cfg, err := set.addLoading(src, tmp)
	if err != nil {
		return nil, err
	}
	logf("02-rope: pairs, angles, wrong pairing")
	if err := set.addRope(src, cfg, logf); err != nil {
		return nil, err
	}
	logf("03-generation: tokens, chat prompt, generation, half precision")
	if err := set.addGeneration(src); err != nil {
		return nil, err
	}
	if src.Reference != "" {
		logf("04-parity: protocol, histogram, per position, logit range")
		r, err := MeasureParity(src)
		if err != nil {
			return nil, err
		}
		set.addParity(r)
		if err := r.Err(); err != nil {
			return set, fmt.Errorf("figures: %w", err) // matches parity.ErrFailed
		}
	} else {
		logf("04-parity: no reference folder: skipping the parity figures")
	}
	return set, nil
}

// addLoading adds 01-loading's outputs: the header's anatomy, the corruptions, the config
// switches, the parameter count and the memory of a load. It returns the checkpoint's config.
func (set *Set) addLoading(src *Source, tmp string) (octlm.Config, error) {
	file, err := src.SafetensorsFile()
	if err != nil {
		return octlm.Config{}, err
	}
	f, t, err := HeaderAnatomy(file)
	if err != nil {
		return octlm.Config{}, err
	}
	set.Figures = append(set.Figures, f)
	set.Tables = append(set.Tables, t)
	if t, err = Corruptions(file, tmp); err != nil {
		return octlm.Config{}, err
	}
	set.Tables = append(set.Tables, t)
	cfg, err := src.Qwen3Config()
	if err != nil {
		return octlm.Config{}, err
	}
	set.Tables = append(set.Tables, ConfigSwitches(cfg))
	if t, err = ParameterCount(src.Dir); err != nil {
		return octlm.Config{}, err
	}
	set.Tables = append(set.Tables, t)
	if f, t, err = LoadMemory(src, octlm.Float32); err != nil {
		return octlm.Config{}, err
	}
	set.Figures = append(set.Figures, f)
	set.Tables = append(set.Tables, t)
	return cfg, nil
}

// addRope adds 02-rope's outputs: the channel pairs, the angles and, with a reference folder,
// the wrong pairing.
func (set *Set) addRope(src *Source, cfg octlm.Config, logf func(format string, args ...any)) error {
	f, err := RopePairs(PairChannels)
	if err != nil {
		return err
	}
	set.Figures = append(set.Figures, f)
	f, t, err := RopeAngles(cfg.HeadWidth(), cfg.Base(), AnglePairs(cfg.HeadWidth()), AnglePositions())
	if err != nil {
		return err
	}
	set.Figures = append(set.Figures, f)
	set.Tables = append(set.Tables, t)
	if src.Reference == "" {
		logf("02-rope: no reference folder: skipping the wrong-pairing figure")
		return nil
	}
	if f, t, err = WrongPairing(src); err != nil {
		return err
	}
	set.Figures = append(set.Figures, f)
	set.Tables = append(set.Tables, t)
	return nil
}

// addGeneration adds 03-generation's outputs: the tokens, the chat prompt, generation runs
// with their latency, and the half-precision comparison.
func (set *Set) addGeneration(src *Source) error {
	tok, _, err := src.Tokenizer()
	if err != nil {
		return err
	}
	sn, _, err := TokenHTML(tok, "03-tokens", "Qwen3's tokenizer: one colour per token", TokenizerText)
	if err != nil {
		return err
	}
	set.Snippets = append(set.Snippets, sn)
	if sn, _, err = ChatPrompt(tok, Question, false); err != nil {
		return err
	}
	set.Snippets = append(set.Snippets, sn)
	prompts, err := Prompts(src, tok, HalfQuestions())
	if err != nil {
		return err
	}
	m, err := src.Load(octlm.Float32, nil)
	if err != nil {
		return err
	}
	runs, err := Generate(m, tok, prompts[0].IDs, GenerateTokens)
	m.Close()
	if err != nil {
		return err
	}
	set.Tables = append(set.Tables, GenerationTable(runs, src.Label))
	set.Figures = append(set.Figures, LatencyFigure(runs, src.Label))
	f, t, err := HalfGreedy(src, tok, prompts, HalfTokens)
	if err != nil {
		return err
	}
	set.Figures = append(set.Figures, f)
	set.Tables = append(set.Tables, t)
	return nil
}

// addParity adds 04-parity's outputs from r: the protocol's table, the error histogram, the
// error per position, the argmax agreement and the logit range.
func (set *Set) addParity(r *ParityResult) {
	set.Tables = append(set.Tables, r.Table())
	set.Figures = append(set.Figures, r.Histogram(), r.PerPosition())
	set.Tables = append(set.Tables, r.ArgmaxTable(), r.RangeTable())
	set.Figures = append(set.Figures, r.RangeFigure())
}

// names lists the file names Write gives the outputs of set.
func (set *Set) names() []string {
	var names []string
	for _, f := range set.Figures {
		names = append(names, f.Name+".svg")
	}
	for _, t := range set.Tables {
		names = append(names, t.Name+".md")
	}
	for _, s := range set.Snippets {
		names = append(names, s.Name+".html")
	}
	return names
}

// Existing lists the files of dir that Write would replace.
func (set *Set) Existing(dir string) []string {
	var taken []string
	for _, name := range set.names() {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			taken = append(taken, name)
		}
	}
	return taken
}

// Write writes every output of set into dir: NAME.svg for figures, NAME.md for tables and
// NAME.html for snippets, each through a temporary file renamed into place. It returns the
// paths written.
func (set *Set) Write(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("figures: %w", err)
	}
	var paths []string
	write := func(name string, data []byte) error {
		p := filepath.Join(dir, name)
		if err := fileio.WriteFile(p, data); err != nil {
			return fmt.Errorf("figures: %w", err)
		}
		paths = append(paths, p)
		return nil
	}
	for _, f := range set.Figures {
		if err := write(f.Name+".svg", f.SVG); err != nil {
			return paths, err
		}
	}
	for _, t := range set.Tables {
		if err := write(t.Name+".md", []byte(t.Markdown())); err != nil {
			return paths, err
		}
	}
	for _, s := range set.Snippets {
		if err := write(s.Name+".html", []byte(s.Page())); err != nil {
			return paths, err
		}
	}
	return paths, nil
}
