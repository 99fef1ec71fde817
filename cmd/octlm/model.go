package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gomlx/compute"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/xla"
)

// modelFlags are the flags every command that runs the decoder shares.
type modelFlags struct {
	model   string
	backend string
	dtype   string
}

func (f *modelFlags) register(fs *flag.FlagSet, defaultModel string) {
	fs.StringVar(&f.model, "model", defaultModel, "checkpoint folder or Hugging Face name (Qwen/Qwen3-0.6B[@revision])")
	fs.StringVar(&f.backend, "backend", "", "compute backend: go, xla:cpu, xla:cuda, onnx; options after a comma, e.g. go,parallelism=1 or onnx,intra_op_num_threads=2 (default: $GOMLX_BACKEND, else a PJRT plugin if found, else onnx if ONNX Runtime is found, else go)")
	fs.StringVar(&f.dtype, "dtype", "f32", "resident weights and activations: f32, bf16 or f16")
}

// loadedModel is a decoder ready to run and where it came from.
type loadedModel struct {
	*octlm.Model
	Dir     string
	Backend xla.Info
	Load    time.Duration

	backend compute.Backend
}

// Close frees the model's weights and graphs, then the backend it opened.
func (l *loadedModel) Close() {
	l.Model.Close()
	l.backend.Finalize()
}

// open resolves the checkpoint, opens the backend and streams the weights in, with progress on stderr.
func (f *modelFlags) open(ctx context.Context, stderr io.Writer) (*loadedModel, error) {
	if f.model == "" {
		return nil, usageError{"--model is required"}
	}
	dtype, err := octlm.ParseDType(f.dtype)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	dir, err := resolveCheckpoint(ctx, f.model)
	if err != nil {
		return nil, err
	}
	backend, info, err := xla.OpenForDType(f.backend, string(dtype))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "backend: %s\n", info)
	warnHalfOnGo(stderr, info, dtype)
	begin := time.Now()
	m, err := loadModel(dir, dir, backend, dtype, stderr)
	if err != nil {
		backend.Finalize()
		return nil, err
	}
	return &loadedModel{Model: m, Dir: dir, Backend: info, Load: time.Since(begin), backend: backend}, nil
}

// loadModel loads the checkpoint in dir with dtype weights, with a progress bar on stderr.
func loadModel(dir, label string, backend compute.Backend, dtype octlm.DType, stderr io.Writer) (*octlm.Model, error) {
	bar := newProgress(stderr, fmt.Sprintf("loading %s (%s)", label, dtype))
	m, err := octlm.Load(dir, octlm.LoadOptions{Backend: backend, DType: dtype, Progress: func(_ string, done, total int64) {
		bar.update(done, total)
	}})
	bar.finish()
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", label, err)
	}
	return m, nil
}

// resolveCheckpoint turns --model into a folder: a local folder as it is, a Hub name through
// the Hugging Face cache (downloading what is missing, with progress on stderr). The folder is
// then checked against its snapshot manifest, where it has one, before any tensor is read.
func resolveCheckpoint(ctx context.Context, name string) (string, error) {
	dir, err := loader.Resolve(ctx, name, loader.HubOptions{Progress: os.Stderr})
	if err != nil {
		return "", err
	}
	if _, err := loader.VerifySnapshot(dir, os.Stderr); err != nil && !errors.Is(err, loader.ErrNoManifest) {
		return "", err
	}
	return dir, nil
}

// halfOnGo is what half precision does to speed on the pure-Go backend, measured with `octlm
// bench` on a full-size Qwen3-0.6B (2-core AMD Zen 5 with AVX-512 BF16, compute v0.1.14, runs
// alternated with float32; the README's performance table has the numbers).
var halfOnGo = map[octlm.DType]string{
	octlm.BFloat16: "bf16 decodes about 1.1-1.3x faster than f32 (half the weight bytes) but prefills about 1.4x slower",
	octlm.Float16:  "f16 decodes about 2x slower than f32 and prefills about 2x slower",
}

// warnHalfOnGo says what a half-precision dtype costs or gains on the pure-Go backend.
func warnHalfOnGo(stderr io.Writer, info xla.Info, dtype octlm.DType) {
	if note, ok := halfOnGo[dtype]; ok && info.Name == xla.Go {
		fmt.Fprintf(stderr, "note: on the pure-Go backend %s (measured on Qwen3-0.6B, 2-core AMD Zen 5)\n", note)
	}
}
