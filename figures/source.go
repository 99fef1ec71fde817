package figures

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gomlx/compute"

	bundled "github.com/octlm/octlm"
	"github.com/octlm/octlm/hub"
	"github.com/octlm/octlm/internal/fileio"
	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/synth"
	"github.com/octlm/octlm/octlm/tokenizer"
	"github.com/octlm/octlm/parity"
	"github.com/octlm/octlm/xla"
)

// Environment variables the notebooks read (see OpenEnv).
const (
	EnvModel     = "OCTLM_MODEL"     // checkpoint folder or Hub name; default the bundled tiny-qwen3
	EnvReference = "OCTLM_REFERENCE" // reference folder; default MODEL/reference
)

// Options choose what the figures are drawn from.
type Options struct {
	Model     string    // checkpoint folder or Hub name (Qwen/Qwen3-0.6B[@revision]); "" is the bundled tiny-qwen3
	Reference string    // reference folder (reference-logits-N.safetensors); "" is MODEL/reference when it exists
	Backend   string    // xla.Open's name; "" is $GOMLX_BACKEND, else xla.Choose's automatic choice for small graphs (a PJRT plugin if found, else go)
	Progress  io.Writer // Hub download progress; nil for silence
}

// Source is the checkpoint the figures are drawn from, its reference and the compute backend.
type Source struct {
	Label     string // what to call the checkpoint in captions: the folder or Hub name, or "tiny-qwen3 (bundled)"
	Dir       string // the checkpoint folder
	Reference string // the reference folder; "" when there is none
	Backend   compute.Backend
	Info      xla.Info
	tmp       string          // temporary folder of extracted files, removed by Close
	half      compute.Backend // the pure-Go backend that loads in a dtype Backend cannot run use (ONNX Runtime and bf16)
}

// OpenEnv opens the source the notebooks use: OCTLM_MODEL (else the bundled checkpoint),
// OCTLM_REFERENCE (else MODEL/reference), and the backend $GOMLX_BACKEND names (else the best
// found).
func OpenEnv() (*Source, error) {
	return Open(Options{Model: os.Getenv(EnvModel), Reference: os.Getenv(EnvReference), Progress: os.Stderr})
}

// Open resolves the checkpoint (extracting the bundled one into a temporary folder, or resolving a
// Hub name through the Hugging Face cache) and opens the backend. Close removes what it extracted.
func Open(opts Options) (s *Source, err error) {
	s = &Source{Label: opts.Model}
	opened := s // s is nil on the error returns
	defer func() {
		if err != nil {
			opened.Close()
		}
	}()
	if opts.Model == "" {
		if s.tmp, err = fileio.ScratchDir("octlm-figures"); err != nil {
			return nil, fmt.Errorf("figures: %w", err)
		}
		if s.Dir, err = bundled.Extract(s.tmp); err != nil {
			return nil, fmt.Errorf("figures: %w", err)
		}
		s.Label = bundled.Name + " (bundled)"
	} else if s.Dir, err = hub.Resolve(context.Background(), opts.Model, hub.Options{Progress: opts.Progress}); err != nil {
		return nil, fmt.Errorf("figures: model %s: %w", opts.Model, err)
	}
	s.Reference = opts.Reference
	if s.Reference == "" {
		if st, err := os.Stat(filepath.Join(s.Dir, "reference")); err == nil && st.IsDir() {
			s.Reference = filepath.Join(s.Dir, "reference")
		}
	}
	if s.Backend, s.Info, err = openBackend(opts.Backend); err != nil {
		return nil, fmt.Errorf("figures: %w", err)
	}
	return s, nil
}

// openBackend opens the backend named (or $GOMLX_BACKEND), else xla.Choose's automatic choice
// for the notebooks' small graphs, which passes ONNX Runtime over for the pure-Go backend,
// saying why. Asked for, ONNX Runtime runs the float32 figures and the pure-Go backend the
// half-precision ones (see load).
func openBackend(name string) (compute.Backend, xla.Info, error) {
	return xla.Choose(xla.Job{Backend: name, SmallGraphs: true})
}

// Close finalizes the backend and removes extracted files.
func (s *Source) Close() error {
	if s.half != nil {
		s.half.Finalize()
		s.half = nil
	}
	if s.Backend != nil {
		s.Backend.Finalize()
		s.Backend = nil
	}
	if s.tmp != "" {
		err := fileio.RemoveTemp(s.tmp)
		s.tmp = ""
		return err
	}
	return nil
}

// Shape reads the checkpoint's config.json, of any architecture octlm loads, for the shape the
// model would have (vocabulary, context, width, heads, layers).
func (s *Source) Shape() (octlm.Shape, error) {
	return octlm.ReadShape(filepath.Join(s.Dir, "config.json"))
}

// Qwen3Config reads the checkpoint's config.json as Qwen3's whole configuration (its switches,
// head width, RoPE base), which the loading and RoPE figures draw and change. Another
// architecture's checkpoint is refused, saying so.
func (s *Source) Qwen3Config() (octlm.Config, error) {
	path := filepath.Join(s.Dir, "config.json")
	cfg, err := octlm.ReadQwen3Config(path)
	if err != nil {
		// Another architecture's config that octlm reads is refused for what it is; one octlm
		// refuses (a size past its bound, a broken file) by what is wrong with it.
		if _, other := octlm.ReadShape(path); other != nil {
			return octlm.Config{}, other
		}
		return octlm.Config{}, fmt.Errorf("figures: %s is not a Qwen3 checkpoint, and this figure draws Qwen3's configuration: %w", s.Label, err)
	}
	return cfg, nil
}

// SafetensorsFile is the checkpoint's model.safetensors, or its first shard when sharded.
func (s *Source) SafetensorsFile() (string, error) {
	ck, err := loader.OpenCheckpoint(s.Dir)
	if err != nil {
		return "", err
	}
	defer ck.Close()
	files := ck.Files()
	if len(files) == 0 {
		return "", fmt.Errorf("figures: %s: no safetensors file", s.Dir)
	}
	return files[0].Path(), nil
}

// Load loads the model with dtype weights and activations. mutate, when not nil, changes the
// configuration before anything is compiled (e.g. the RoPE pairing, for 02-rope).
func (s *Source) Load(dtype octlm.DType, mutate func(*octlm.Config)) (*octlm.Model, error) {
	return s.load(octlm.LoadOptions{DType: dtype}, mutate)
}

func (s *Source) load(opts octlm.LoadOptions, mutate func(*octlm.Config)) (*octlm.Model, error) {
	opts.Backend = s.Backend
	if !s.Info.Engine.Suits(string(opts.DType)) {
		if s.half == nil {
			b, _, err := xla.Open(xla.Go)
			if err != nil {
				return nil, fmt.Errorf("figures: the pure-Go backend for %s (%s cannot run it): %w", opts.DType, s.Info.Name, err)
			}
			s.half = b
		}
		opts.Backend = s.half
	}
	if mutate == nil {
		m, err := octlm.Load(s.Dir, opts)
		if err != nil {
			return nil, fmt.Errorf("figures: loading %s: %w", s.Label, err)
		}
		return m, nil
	}
	// The checkpoint's weights under a changed configuration (a deliberate bug to measure).
	cfg, err := s.Qwen3Config()
	if err != nil {
		return nil, err
	}
	mutate(&cfg)
	ckpt, err := loader.OpenCheckpoint(s.Dir)
	if err != nil {
		return nil, fmt.Errorf("figures: loading %s: %w", s.Label, err)
	}
	defer ckpt.Close()
	m, err := octlm.LoadQwen3Checkpoint(cfg, ckpt, opts)
	if err != nil {
		return nil, fmt.Errorf("figures: loading %s: %w", s.Label, err)
	}
	return m, nil
}

// ReadReference reads the reference logits, checked against the model's configuration and, when
// the checkpoint folder has one, its cases.json (parity.OpenReference).
func (s *Source) ReadReference() (*parity.Reference, error) {
	if s.Reference == "" {
		return nil, fmt.Errorf("figures: %s has no reference folder: compute one with parity/reference.py and set %s (or put it in %s)",
			s.Label, EnvReference, filepath.Join(s.Dir, parity.ReferenceDirName))
	}
	return parity.OpenReference(s.Dir, s.Reference, 0)
}

// Tokenizer loads the checkpoint's tokenizer, or Qwen3's (embedded in package synth) when the
// folder has none, as the bundled tiny checkpoint has none. The string says which.
func (s *Source) Tokenizer() (*tokenizer.Tokenizer, string, error) {
	if _, err := os.Stat(filepath.Join(s.Dir, "tokenizer.json")); err == nil {
		t, err := tokenizer.LoadDir(s.Dir)
		return t, "the checkpoint's tokenizer.json", err
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, "", err
	}
	if s.tmp == "" {
		var err error
		if s.tmp, err = fileio.ScratchDir("octlm-figures"); err != nil {
			return nil, "", fmt.Errorf("figures: %w", err)
		}
	}
	dir := filepath.Join(s.tmp, "qwen3-tokenizer")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		files, err := synth.TokenizerFiles()
		if err != nil {
			return nil, "", err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, "", fmt.Errorf("figures: %w", err)
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				return nil, "", fmt.Errorf("figures: %w", err)
			}
		}
	}
	t, err := tokenizer.LoadDir(dir)
	return t, "Qwen3's tokenizer (the checkpoint folder has none)", err
}
