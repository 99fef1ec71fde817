package xla

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/gomlx/compute"
	onnxbackend "github.com/gomlx/compute-onnx"
)

// ONNX is the backend name of ONNX Runtime on the CPU, through GoMLX's compute-onnx.
const ONNX = "onnx"

// Where the ONNX Runtime library was found; Info.Source holds one of these for "onnx".
const (
	SourceONNXEnv = "ONNXRUNTIME_SHARED_LIBRARY_PATH"
	SourceNPM     = "npm onnxruntime-node"
	SourceONNXOwn = "compute-onnx install folder"
)

// onnxVersion is the onnxruntime-node release octlm's install step and docs/backends.md name, and the
// ONNX Runtime release the ONNX engine was measured with.
const onnxVersion = "1.30.0"

// ONNXInstallCommand installs the ONNX Runtime library where DefaultPlaces looks first: npm's
// onnxruntime-node package (its install script, which downloads more, skipped) in octlm's cache.
const ONNXInstallCommand = `mkdir -p ~/.cache/octlm/onnxruntime && npm install --prefix ~/.cache/octlm/onnxruntime --ignore-scripts onnxruntime-node@` + onnxVersion

func init() {
	// As for PJRT plugins: never download behind the user's back. compute-onnx would otherwise
	// fetch ONNX Runtime from GitHub when no library is found.
	onnxbackend.EnableAutoInstall(false)
}

// ONNXLibrary is an ONNX Runtime shared library found on disk.
type ONNXLibrary struct {
	Path   string
	Source string // SourceONNXEnv, SourceNPM or SourceONNXOwn
}

// npmLibrary is where onnxruntime-node keeps the library for this machine under node_modules.
func npmLibrary(nodeModules string) string {
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	return filepath.Join(nodeModules, "onnxruntime-node", "bin", "napi-v6", runtime.GOOS, arch, "libonnxruntime.so.1")
}

// defaultONNXLibraries lists the ONNX Runtime library files DefaultPlaces tries, in order:
// $ONNXRUNTIME_SHARED_LIBRARY_PATH, npm's onnxruntime-node in ~/.cache/octlm/onnxruntime and in
// the working folder's node_modules, then compute-onnx's own install folder.
func defaultONNXLibraries(home string) []ONNXLibrary {
	var libs []ONNXLibrary
	if p := strings.TrimSpace(os.Getenv(SourceONNXEnv)); p != "" {
		libs = append(libs, ONNXLibrary{p, SourceONNXEnv})
	}
	if home != "" {
		libs = append(libs, ONNXLibrary{npmLibrary(filepath.Join(home, ".cache", "octlm", "onnxruntime", "node_modules")), SourceNPM})
	}
	if wd, err := os.Getwd(); err == nil {
		libs = append(libs, ONNXLibrary{npmLibrary(filepath.Join(wd, "node_modules")), SourceNPM})
	}
	if home != "" && runtime.GOOS == "linux" {
		libs = append(libs, ONNXLibrary{filepath.Join(home, ".local", "lib", "onnxruntime", "libonnxruntime.so"), SourceONNXOwn})
	}
	return libs
}

// ErrONNXNotFound is matched (errors.Is) by FindONNX's error when no ONNX Runtime library was
// found.
var ErrONNXNotFound = errors.New("ONNX Runtime library not found")

// FindONNX returns the library the "onnx" backend loads: the first of p.ONNX that is a
// loadable shared library. A file that is there but cannot be loaded (a truncated download, a
// folder, not a library for this machine) is passed over, and skipped says so. The library
// named by $ONNXRUNTIME_SHARED_LIBRARY_PATH is never passed over: when it cannot be used
// (missing, a folder, truncated), that is the error. With nothing found the error matches
// ErrONNXNotFound and says where it looked.
func (p Places) FindONNX() (lib ONNXLibrary, skipped []string, err error) {
	for _, l := range p.ONNX {
		err := checkLibrary(l.Path)
		if err == nil {
			return l, skipped, nil
		}
		if l.Source == SourceONNXEnv {
			return ONNXLibrary{}, skipped, fmt.Errorf("xla: $%s=%s cannot be used: %w (point it at libonnxruntime.so itself, or unset it to search the usual places)", SourceONNXEnv, l.Path, err)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			skipped = append(skipped, fmt.Sprintf("ONNX Runtime %s (%s) skipped: %v", l.Path, l.Source, err))
		}
	}
	return ONNXLibrary{}, skipped, p.onnxNotFound(skipped)
}

// openONNX opens ONNX Runtime on the CPU with compute-onnx's options (comma-separated, e.g.
// "intra_op_num_threads=2"; see github.com/gomlx/compute-onnx's README) and onnxMemory's.
func (p Places) openONNX(opts, reason string) (b compute.Backend, info Info, err error) {
	lib, skipped, err := p.FindONNX()
	if err != nil {
		return nil, Info{}, err
	}
	opts, reason, env := onnxMemoryOptions(opts, reason)
	config := "cpu," + lib.Path
	if opts != "" {
		config += "," + opts
	}
	err = protect("load ONNX Runtime", func() error {
		var err error
		b, err = onnxbackend.New(config)
		return err
	})
	if err != nil {
		return nil, Info{}, fmt.Errorf("xla: backend %q: ONNX Runtime %s (from %s): %w", ONNX, lib.Path, lib.Source, err)
	}
	version := ""
	if v, ok := b.(interface{ Version() string }); ok {
		version = v.Version()
	}
	return b, Info{Name: ONNX, Options: opts, Plugin: lib.Path, Source: lib.Source, Reason: reason, ONNXVersion: version, Warnings: skipped, Env: env}, nil
}

// onnxNotFound says where ONNX Runtime was looked for, what was skipped, and how to install it.
func (p Places) onnxNotFound(skipped []string) error {
	var where []string
	for _, l := range p.ONNX {
		where = append(where, fmt.Sprintf("%s (%s)", l.Path, l.Source))
	}
	if len(where) == 0 {
		where = append(where, "nowhere")
	}
	msg := ""
	if len(skipped) > 0 {
		msg = "; " + strings.Join(skipped, "; ")
	}
	return fmt.Errorf("xla: backend %q: %w; looked at %s%s; install it with: %s", ONNX, ErrONNXNotFound, strings.Join(where, ", "), msg, ONNXInstallCommand)
}

// onnxPassedOver says, per dtype, why the automatic choice does not run it on ONNX Runtime.
// float16 runs there (its KV cache written by slices), but ONNX Runtime 1.30.0's CPU provider
// runs few float16 operations itself and casts the rest, weights included, to float32 on every
// step: Qwen3-0.6B decoded at a fifth to a third of its float32 speed in the same sitting, with a
// peak of 2.6–3.0× the weights (Intel Xeon, 2026-12-01; docs/performance.md).
var onnxPassedOver = map[string]string{
	"bf16": "ONNX Runtime cannot run it on the CPU",
	"f16":  "ONNX Runtime's CPU provider casts float16 weights to float32 on every step (a fifth to a third of its float32 decode, 3x the memory)",
}
