package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gomlx/compute"

	"github.com/octlm/octlm/hub"
	"github.com/octlm/octlm/internal/progress"
	"github.com/octlm/octlm/internal/termsafe"
	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/xla"
)

// modelFlags are the flags every command that runs the decoder shares: which checkpoint, on
// which backend, in which dtype (dtype is float32 for a command registered with registerBundled).
type modelFlags struct {
	model   string
	backend string
	dtype   string
	adapter string // --adapter, for commands that call registerAdapter (adapter.go)
}

// register adds --model (defaultModel when not given), --backend and --dtype.
func (f *modelFlags) register(fs *flag.FlagSet, defaultModel string) {
	f.registerSource(fs, defaultModel, "checkpoint folder or Hugging Face name (Qwen/Qwen3-0.6B[@revision])")
	fs.StringVar(&f.dtype, "dtype", "f32", "resident weights and activations: f32, bf16 or f16")
}

// registerBundled adds --model and --backend for a float32 command (parity, figures) that runs
// the bundled tiny checkpoint when --model is not given.
func (f *modelFlags) registerBundled(fs *flag.FlagSet) {
	f.registerSource(fs, "", "checkpoint folder or Hugging Face name (default: the bundled tiny-qwen3)")
}

// registerSource adds --model and --backend.
func (f *modelFlags) registerSource(fs *flag.FlagSet, defaultModel, modelHelp string) {
	fs.StringVar(&f.model, "model", defaultModel, modelHelp)
	fs.StringVar(&f.backend, "backend", "", "compute backend: go, xla:cpu, xla:cuda, onnx; options after a comma, e.g. go,parallelism=1 or onnx,intra_op_num_threads=2 (default: $GOMLX_BACKEND, else a PJRT plugin if found, else onnx if ONNX Runtime is found, else go)")
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

// resolve checks the flags and turns --model into a checkpoint folder (see resolveCheckpoint).
func (f *modelFlags) resolve(ctx context.Context) (string, error) {
	if f.model == "" {
		return "", usageError{"--model is required"}
	}
	if _, err := octlm.ParseDType(f.dtype); err != nil {
		return "", usageError{err.Error()}
	}
	return resolveCheckpoint(ctx, f.model)
}

// openDir opens the backend and streams the weights of the checkpoint folder dir in, with
// progress on stderr, after checking that the weights and KV caches of positions positions in all
// fit in memory; work (how the job decodes) informs the automatic choice of engine.
func (f *modelFlags) openDir(dir string, positions int, work xla.Workload, stderr io.Writer) (*loadedModel, error) {
	return f.openDirVerbose(dir, positions, work, stderr, false)
}

// openDirVerbose is openDir with the backend line in full (its library's path and why it was
// chosen) when verbose, else one short line.
func (f *modelFlags) openDirVerbose(dir string, positions int, work xla.Workload, stderr io.Writer, verbose bool) (*loadedModel, error) {
	dtype, err := octlm.ParseDType(f.dtype)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	adapter, err := readAdapter(dir, f.adapter)
	if err != nil {
		return nil, err
	}
	job := modelJob(f.backend, dir, dtype, positions, work, 0, stderr)
	backend, info, err := xla.Choose(job)
	if err != nil {
		return nil, err
	}
	if verbose {
		fmt.Fprintf(stderr, "backend: %s\n", info)
	} else {
		fmt.Fprintf(stderr, "backend: %s\n", shortBackend(info))
	}
	warnHalfOnGo(stderr, info, dtype)
	begin := time.Now()
	m, err := loadModel(job, dir, backend, info, adapter, stderr)
	if err != nil {
		backend.Finalize()
		return nil, err
	}
	return &loadedModel{Model: m, Dir: dir, Backend: info, Load: time.Since(begin), backend: backend}, nil
}

// loadModel loads job's checkpoint (called label on its progress bar) with job's dtype and the
// adapter (nil: none) applied unmerged, with a progress bar on stderr, once job.Fits has found
// room for it on backend.
func loadModel(job xla.Job, label string, backend compute.Backend, info xla.Info, adapter *octlm.LoRA, stderr io.Writer) (*octlm.Model, error) {
	if err := job.Fits(info); err != nil {
		return nil, err
	}
	dir, dtype := job.Label, octlm.DType(job.DType)
	bar := progress.New(stderr, fmt.Sprintf("loading %s (%s)", label, dtype))
	m, err := octlm.Load(dir, octlm.LoadOptions{Backend: backend, DType: dtype, Adapter: adapter, Progress: func(_ string, done, total int64) {
		bar.Update(done, total)
	}, Warn: func(msg string) { fmt.Fprintf(stderr, "warning: %s\n", printable(msg)) }})
	bar.Finish()
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", label, err)
	}
	return m, nil
}

// resolveCheckpoint turns --model into a folder: a local folder as it is, a Hub name through
// the Hugging Face cache (downloading what is missing, with progress on stderr). The folder is
// then checked against its snapshot manifest, where it has one, before any tensor is read.
func resolveCheckpoint(ctx context.Context, name string) (string, error) {
	dir, err := hub.Resolve(ctx, name, hub.Options{Progress: os.Stderr})
	if err != nil {
		return "", withOfflineHint(err)
	}
	if err := checkIsCheckpoint(dir); err != nil {
		return "", err
	}
	if _, err := loader.VerifySnapshot(dir, os.Stderr); err != nil && !errors.Is(err, loader.ErrNoManifest) {
		return "", err
	}
	return dir, nil
}

// withOfflineHint adds what to do to an error that getting an answer from the Hub failed (no
// network, DNS, a refused connection, a stalled or failing Hub: hub.ErrUnreachable): the Hub
// cache alone, a local folder, or a random checkpoint made here. Errors of the local disk (an
// unwritable or full cache) get no such hint: they are not the network's.
func withOfflineHint(err error) error {
	if !errors.Is(err, hub.ErrUnreachable) {
		return err
	}
	return fmt.Errorf("%w\n  cannot reach the Hugging Face Hub. Offline, either use what the Hub cache holds (HF_HUB_OFFLINE=1),\n"+
		"  give a checkpoint folder (--model ./Qwen3-0.6B), or make a random Qwen3-0.6B with the real tokenizer to\n"+
		"  try octlm: octlm synth --like tiny --out /tmp/qwen3-tiny (see README, Quickstart)", err)
}

// halfOnGo is what half precision does to speed on the pure-Go backend, measured with `octlm
// bench` on a full-size Qwen3-0.6B (2-core AMD Zen 5 with AVX-512 BF16, compute v0.1.14, runs
// alternated with float32; docs/performance.md has the numbers).
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

// shortBackend names a backend in a few words: name, options, ONNX Runtime's version and the
// first clause of why it was chosen, without the library's path (--verbose shows it).
func shortBackend(i xla.Info) string {
	s := i.Name
	if i.Options != "" {
		s += "," + i.Options
	}
	if i.ONNXVersion != "" {
		s += " " + i.ONNXVersion
	}
	why, _, _ := strings.Cut(i.Reason, ";")
	if why = strings.TrimSpace(why); why != "" {
		if r := []rune(why); len(r) > 48 {
			why = string(r[:47]) + "…"
		}
		s += " (" + why + ")"
	}
	// A library or plugin the automatic choice passed over (truncated, no GPU) is a warning the
	// user must see even on the short line: one note line each.
	parts := strings.Split(i.Reason, ";")
	for _, part := range parts[1:] {
		if part = strings.TrimSpace(part); strings.Contains(part, "skipped") || strings.HasPrefix(part, xla.ONNXPassedOver) {
			s += "\n  note: " + termsafe.Name(part)
		}
	}
	return s
}

// checkIsCheckpoint refuses a folder without config.json (-m /tmp) before anything else is
// read from it, naming what is missing.
func checkIsCheckpoint(dir string) error {
	_, err := os.Stat(filepath.Join(dir, "config.json"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usageError{fmt.Sprintf("%s is not a checkpoint: it has no config.json (a checkpoint folder holds config.json and model.safetensors; 'octlm synth --like tiny --out DIR' writes one)", dir)}
	case err != nil:
		return fmt.Errorf("%s: %w", dir, err)
	}
	return nil
}
