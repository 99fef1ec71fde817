package xla

import (
	"fmt"
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

// FindONNX returns the first ONNX Runtime library of p.ONNX that exists.
func (p Places) FindONNX() (ONNXLibrary, bool) {
	for _, l := range p.ONNX {
		if st, err := os.Stat(l.Path); err == nil && !st.IsDir() {
			return l, true
		}
	}
	return ONNXLibrary{}, false
}

// openONNX opens ONNX Runtime on the CPU with compute-onnx's options (comma-separated, e.g.
// "intra_op_num_threads=2"; see github.com/gomlx/compute-onnx's README) and onnxMemory's.
func (p Places) openONNX(opts, reason string) (b compute.Backend, info Info, err error) {
	lib, ok := p.FindONNX()
	if !ok {
		return nil, Info{}, p.onnxNotFound()
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
	return b, Info{Name: ONNX, Options: opts, Plugin: lib.Path, Source: lib.Source, Reason: reason, ONNXVersion: version, Env: env}, nil
}

// onnxNotFound says where ONNX Runtime was looked for and how to install it.
func (p Places) onnxNotFound() error {
	var where []string
	for _, l := range p.ONNX {
		where = append(where, fmt.Sprintf("%s (%s)", l.Path, l.Source))
	}
	if len(where) == 0 {
		where = append(where, "nowhere")
	}
	return fmt.Errorf("xla: backend %q: ONNX Runtime library not found; looked at %s; install it with: %s", ONNX, strings.Join(where, ", "), ONNXInstallCommand)
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

// OpenForDType is Open for a model held in dtype ("f32", "bf16" or "f16"): the automatic choice
// passes over ONNX Runtime for the half-precision dtypes (onnxPassedOver says why).
func OpenForDType(name, dtype string) (compute.Backend, Info, error) {
	if resolved, _ := resolveName(name); resolved != "" || onnxPassedOver[dtype] == "" {
		return Open(name)
	}
	p := DefaultPlaces()
	pl, auto, why := p.autoChoice()
	var b compute.Backend
	var info Info
	var err error
	switch {
	case pl != nil:
		b, info, err = openPlugin(*pl, "", why)
	case auto == ONNX:
		b, info, err = openGo("", why+"; passed over for "+dtype+": "+onnxPassedOver[dtype])
	default:
		b, info, err = openGo("", why)
	}
	if err == nil {
		info.Engine = EngineOf(b)
	}
	return b, info, err
}
