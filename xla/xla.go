// Package xla is the one place in octlm that knows about PJRT and ONNX Runtime: no other package
// imports go-xla or compute-onnx or handles a plugin. It chooses octlm's compute backend, the
// pure-Go backend ("go"), XLA through a PJRT plugin ("xla:cpu", "xla:cuda") or ONNX Runtime on the
// CPU ("onnx", through GoMLX's compute-onnx), finds PJRT plugins on disk
// ($PJRT_PLUGIN_LIBRARY_PATH, go-xla's install folders, a Python environment's JAX CUDA plugin)
// and the ONNX Runtime library ($ONNXRUNTIME_SHARED_LIBRARY_PATH, npm's onnxruntime-node under
// ~/.cache/octlm/onnxruntime or ./node_modules), checks a plugin's PJRT C API version before
// go-xla loads it, and installs plugins on request. Callers get a compute.Backend and an Info
// describing it.
//
// It knows nothing of models, tensors or checkpoints, and it never downloads anything unless asked
// through Install: go-xla's and compute-onnx's automatic downloads are switched off when this
// package is imported.
//
// Float32 matmuls stay exact: on CUDA, Open turns go-xla's TF32 default off (every DotGeneral then
// carries precision HIGHEST) and sets NVIDIA_TF32_OVERRIDE=0 if unset, unless the name asks for TF32
// with the option ",tf32".
package xla

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/gobackend"
	gxla "github.com/gomlx/go-xla/compute/xla"

	"github.com/octlm/octlm/internal/hostproduct"
)

// Backend names accepted by Open.
const (
	Go   = "go"       // pure Go, always available
	CPU  = "xla:cpu"  // XLA on the CPU through a PJRT plugin
	CUDA = "xla:cuda" // XLA on an NVIDIA GPU through a PJRT plugin
	// ONNX (onnx.go) is ONNX Runtime on the CPU.
)

// EnvBackend is the environment variable Open("") reads, shared with GoMLX.
const EnvBackend = "GOMLX_BACKEND"

// The go-xla release octlm is built with and the PJRT C API version of its pjrt_c_api.h
// (github.com/gomlx/go-xla@v0.4.13/pjrt/pjrt_c_api.h: PJRT_API_MAJOR, PJRT_API_MINOR).
const (
	goXLAVersion   = "v0.4.13"
	goXLAPJRTMajor = 0
	goXLAPJRTMinor = 104
)

// ErrNoPlugin is wrapped by Open's error when no PJRT plugin of the requested kind was found.
var ErrNoPlugin = errors.New("no PJRT plugin found")

func init() {
	// Never download behind the user's back: go-xla's New and GetAvailablePlugins would otherwise
	// fetch plugins from GitHub/PyPI. Install is the explicit way.
	gxla.EnableAutoInstall(false)
}

// Info describes the backend Open returned.
type Info struct {
	// Name is "go", "xla:cpu", "xla:cuda", or "xla:<kind>" for another plugin.
	Name string
	// Options are the options given after the name's comma ("parallelism=1"), "" for none.
	Options string
	// Plugin is the path of the PJRT plugin or ONNX Runtime library loaded; "" for "go".
	Plugin string
	// Source is where the plugin was found (SourceEnv, SourceGoXLA, SourcePython, or "given path"),
	// or the ONNX Runtime library (SourceONNXEnv, SourceNPM, SourceONNXOwn).
	Source string
	// ONNXVersion is the ONNX Runtime release the library reports ("1.30.0"); "" for others.
	ONNXVersion string
	// Reason says why this backend was chosen.
	Reason string
	// PJRTVersion is the PJRT C API version the plugin reports ("0.90"); "" for "go".
	PJRTVersion string
	// TF32 reports whether float32 DotGeneral may run in TF32 (only ever true on CUDA, on request).
	TF32 bool
	// Preloaded are the NVIDIA libraries loaded from site-packages/nvidia before a JAX CUDA plugin,
	// as JAX itself does.
	Preloaded []string
	// Env are the environment settings Open made before loading the plugin ("XLA_FLAGS=...").
	Env []string
	// Warnings are things that did not stop loading but may matter (a library that failed to preload).
	Warnings []string
	// Engine is the kind of engine the backend is (EngineOf).
	Engine Engine
	// Automatic reports that nobody named the backend (no name, no $GOMLX_BACKEND): the
	// automatic choice (Open's or Choose's) opened it.
	Automatic bool
}

// ExactFloat32 reports whether float32 matmuls are computed in full float32 (no TF32), as parity needs.
// The pure-Go and XLA CPU backends always are; XLA CUDA is unless opened with ",tf32".
func (i Info) ExactFloat32() bool { return !i.TF32 }

// String is a one-line summary: name, plugin and reason.
func (i Info) String() string {
	s := i.Name
	if i.Options != "" {
		s += "," + i.Options
	}
	if i.ONNXVersion != "" {
		s += " " + i.ONNXVersion
	}
	if i.Plugin != "" {
		s += " (" + i.Plugin + ")"
	}
	if i.Reason != "" {
		s += ": " + i.Reason
	}
	return s
}

// Open returns the compute backend named by name, using the default places to find plugins.
//
// name is "go" (pure Go), "xla:cpu", "xla:cuda", "xla" (the best plugin found), "xla:<absolute path
// of a plugin .so>", or "" meaning $GOMLX_BACKEND if set, else xla:cuda (with a GPU present) or xla:cpu
// if a plugin is found, else "onnx" if its library is found, else "go"; Info.Reason says which and why. XLA names take go-xla's options
// after a comma, e.g. "xla:cuda,tf32,memory_fraction=0.5", and "go" the pure-Go backend's, e.g.
// "go,parallelism=1".
//
// The caller owns the backend and should Finalize it.
func Open(name string) (compute.Backend, Info, error) {
	if n, _ := resolveName(name); strings.HasPrefix(n+",", Go+",") {
		return Places{}.Open(name) // no plugin search (nor python3 run) needed
	}
	return DefaultPlaces().Open(name)
}

// resolveName is the one place $GOMLX_BACKEND is read: the backend name asked for (trimmed), or
// the variable's value where name is empty, and the reason to give; "" means the automatic choice.
func resolveName(name string) (resolved, reason string) {
	if n := strings.TrimSpace(name); n != "" {
		return n, "asked for " + quote(n)
	}
	if env := strings.TrimSpace(os.Getenv(EnvBackend)); env != "" {
		return env, fmt.Sprintf("$%s=%s", EnvBackend, env)
	}
	return "", ""
}

// Open is like the package's Open, with plugins searched in p.
func (p Places) Open(name string) (compute.Backend, Info, error) {
	b, info, err := p.open(name)
	if err == nil {
		info.Engine = EngineOf(b)
	}
	return b, info, err
}

func (p Places) open(name string) (compute.Backend, Info, error) {
	name, reason := resolveName(name)
	if name == "" {
		return p.openAuto()
	}
	base, opts, hasOpts := strings.Cut(name, ",")
	if hasOpts {
		var err error
		switch {
		case base == Go:
			err = checkOptions(Go, opts, goOptions, false)
		case base == ONNX:
			err = checkOptions(ONNX, opts, onnxOptions, true)
		default:
			err = checkEmptyOptions(base, opts)
		}
		if err != nil {
			return nil, Info{}, err
		}
	}
	switch {
	case base == Go:
		return openGo(opts, reason)
	case base == ONNX:
		return p.openONNX(opts, reason)
	case base == "xla":
		return p.openBestXLA(opts, reason)
	case base == CPU || base == CUDA:
		kind := strings.TrimPrefix(base, "xla:")
		for _, pl := range p.Discover() {
			if pl.Kind == kind {
				return openPlugin(pl, opts, reason)
			}
		}
		return nil, Info{}, p.notFound(base)
	case strings.HasPrefix(base, "xla:") && filepath.IsAbs(strings.TrimPrefix(base, "xla:")):
		path := strings.TrimPrefix(base, "xla:")
		kind := kindOf(filepath.Base(path))
		if kind == "" {
			kind = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		}
		pl := Plugin{Kind: kind, Path: path, Source: "given path", SitePackages: jaxSitePackages(path)}
		return openPlugin(pl, opts, reason)
	}
	return nil, Info{}, fmt.Errorf("xla: unknown backend %q: valid names are %q, %q, %q, %q, \"xla\" (best plugin found), "+
		"\"xla:/path/to/plugin.so\", or \"\" (automatic); options follow a comma (\"xla:cuda,tf32\", \"go,parallelism=1\", \"onnx,intra_op_num_threads=2\")",
		name, Go, CPU, CUDA, ONNX)
}

// Auto returns the plugin automatic choice (Open("") without $GOMLX_BACKEND) would load, or nil for
// the pure-Go backend, and why: xla:cuda if a CUDA plugin is found and an NVIDIA GPU is present, else
// xla:cpu if a CPU plugin is found, else go. A plugin found that cannot be loaded is not passed
// over: opening it gives its error (a truncated file is refused before dlopen).
func (p Places) Auto() (*Plugin, string) {
	var cuda, cpu *Plugin
	plugins := p.Discover()
	for i := range plugins {
		switch {
		case plugins[i].Kind == "cuda" && cuda == nil:
			cuda = &plugins[i]
		case plugins[i].Kind == "cpu" && cpu == nil:
			cpu = &plugins[i]
		}
	}
	switch {
	case cuda != nil && p.NvidiaGPU:
		return cuda, fmt.Sprintf("automatic: CUDA plugin found (%s) and an NVIDIA GPU is present", cuda.Source)
	case cpu != nil:
		why := fmt.Sprintf("automatic: CPU plugin found (%s)", cpu.Source)
		if cuda != nil {
			why += fmt.Sprintf("; CUDA plugin %s skipped: no NVIDIA GPU (/dev/nvidia*)", cuda.Path)
		}
		return cpu, why
	case cuda != nil:
		return nil, fmt.Sprintf("automatic: CUDA plugin %s found but no NVIDIA GPU (/dev/nvidia*), and no CPU plugin", cuda.Path)
	}
	return nil, "automatic: no PJRT plugin found (see `octlm backends`)"
}

// AutoName is the backend automatic choice opens and why: what Auto picks if it picks a
// plugin, else "onnx" where its library is found (it decodes faster than "go" on the CPU, see
// docs/performance.md), else "go". Libraries passed over are named in why; an unusable
// $ONNXRUNTIME_SHARED_LIBRARY_PATH is an error, not a reason to choose another.
func (p Places) AutoName() (name, why string, err error) {
	_, name, why, err = p.autoChoice()
	return name, why, err
}

// autoChoice is AutoName with the plugin Auto picked (nil unless name is an XLA one).
func (p Places) autoChoice() (pl *Plugin, name, why string, err error) {
	pl, why = p.Auto()
	if pl != nil {
		return pl, pl.Backend(), why, nil
	}
	lib, skipped, err := p.FindONNX()
	switch {
	case err == nil:
		name, why = ONNX, fmt.Sprintf("automatic: no PJRT plugin; ONNX Runtime found (%s)", lib.Source)
	case errors.Is(err, ErrONNXNotFound):
		name = Go
	default:
		return nil, "", "", err
	}
	if len(skipped) > 0 {
		why += "; " + strings.Join(skipped, "; ")
	}
	return nil, name, why, nil
}

// openAuto opens what AutoName chooses.
func (p Places) openAuto() (b compute.Backend, info Info, err error) {
	pl, name, why, err := p.autoChoice()
	if err != nil {
		return nil, Info{}, err
	}
	switch {
	case pl != nil:
		b, info, err = openPlugin(*pl, "", why)
	case name == ONNX:
		b, info, err = p.openONNX("", why)
	default:
		b, info, err = openGo("", why)
	}
	info.Automatic = true
	return b, info, err
}

// openBestXLA opens the best plugin found for "xla": CUDA with a GPU, else CPU, else the first found.
func (p Places) openBestXLA(opts, reason string) (compute.Backend, Info, error) {
	plugins := p.Discover()
	if len(plugins) == 0 {
		return nil, Info{}, p.notFound("xla")
	}
	best := plugins[0]
	for _, pl := range plugins {
		if pl.Kind == "cuda" && p.NvidiaGPU {
			best = pl
			break
		}
		if pl.Kind == "cpu" && best.Kind != "cpu" {
			best = pl
		}
	}
	return openPlugin(best, opts, reason)
}

// openGo returns the pure-Go backend with its options (comma-separated, e.g.
// "parallelism=1"; see gobackend.New). The backend announces a parallelism setting on stdout,
// where octlm's commands print their results, so that line goes to stderr.
func openGo(opts, reason string) (b compute.Backend, info Info, err error) {
	opts, reason = goExecutorOptions(opts, reason)
	err = protect("create the pure-Go backend", func() error {
		stdout := os.Stdout
		os.Stdout = os.Stderr
		defer func() { os.Stdout = stdout }()
		var err error
		b, err = gobackend.New(opts)
		return err
	})
	if err != nil {
		return nil, Info{}, fmt.Errorf("xla: backend %q: %w", Go, err)
	}
	if b, err = hostproduct.Wrap(b, hostproduct.Options{MaxRows: HostRows(), Attention: hostproduct.AttentionKernels()}); err != nil {
		return nil, Info{}, fmt.Errorf("xla: backend %q: %w", Go, err)
	}
	return b, Info{Name: Go, Reason: reason, Options: opts}, nil
}

// GoHostRows is the most rows of a product by a weight held as panels that the pure-Go backend,
// wrapped by internal/hostproduct, runs in Go where it multiplies four rows at once (HostRows):
// every decode step's and every prompt's here. compute v0.1.14's small kernel multiplies tiles of
// four rows, so a product of one or two rows does four rows' arithmetic there; with one row at a
// time in Go, three rows decoded faster on compute (bench --batch on the Xeon, 2026-12-06:
// 0.81–1.01×), and this was 2 (goHostRowsOneByOne, still the most where the four-row kernels do
// not run). Since four rows are multiplied at once in Go (hostproduct's four-row kernels), on the
// same Xeon, two runs each alternated against the build with 2 here: bench --batch 3,4,8,16
// decoded in float32 1.18–1.20× (3 sequences), 1.21–1.25× (4), 1.16–1.18× (8) and 1.60–1.67×
// (16) as fast, in bfloat16 0.94–1.01×, 1.19–1.26×, 1.15–1.20× and 1.43×; with every row in Go
// (a bfloat16 panel widened once for 32 rows or more), bench prefilled a 128-token prompt
// 1.15–1.16× (float32) and 1.42–1.48× (bfloat16) as fast, a 1,024-token one 1.02–1.11× and
// 1.37–1.39×.
const GoHostRows = 1 << 16

// goHostRowsOneByOne is the most rows run in Go where hostproduct multiplies them one at a
// time (no four-row kernels): one or two rows pad to compute's four-row tile, three and more
// ran as fast or faster on compute (GoHostRows).
const goHostRowsOneByOne = 2

// HostRows is the most rows of a product by panels that the pure-Go backend runs in Go on this
// build and processor: GoHostRows where hostproduct multiplies four rows at once, else
// goHostRowsOneByOne.
func HostRows() int {
	if hostproduct.FourRowKernels() {
		return GoHostRows
	}
	return goHostRowsOneByOne
}

// OpenPlugin loads a plugin that Discover found, with go-xla options opts ("" for none; see Open).
func OpenPlugin(pl Plugin, opts string) (compute.Backend, Info, error) {
	return openPlugin(pl, opts, "asked for "+pl.Path)
}

// openPlugin loads the plugin through go-xla by its absolute path (so go-xla neither searches nor
// downloads), preparing the NVIDIA libraries first for a JAX CUDA plugin, and turns TF32 off unless opts
// mention it.
func openPlugin(pl Plugin, opts, reason string) (compute.Backend, Info, error) {
	info := Info{Name: pl.Backend(), Plugin: pl.Path, Source: pl.Source, Reason: reason}
	fail := func(err error) (compute.Backend, Info, error) {
		err = fmt.Errorf("xla: backend %q: plugin %s (from %s): %w", info.Name, pl.Path, pl.Source, err)
		if len(info.Warnings) > 0 {
			err = fmt.Errorf("%w\nwhile preparing it: %s", err, strings.Join(info.Warnings, "; "))
		}
		return nil, Info{}, err
	}
	st, err := os.Stat(pl.Path)
	if err != nil {
		return fail(err)
	}
	if !st.Mode().IsRegular() {
		return fail(errors.New("not a regular file"))
	}
	if strings.Contains(pl.Path, ",") {
		return fail(errors.New("go-xla cannot load a plugin whose path contains a comma; move or link it"))
	}
	if pl.Kind == "cuda" && pl.SitePackages != "" {
		info.Preloaded, info.Env, info.Warnings = prepareJAXCUDA(pl.SitePackages)
	}
	if pl.Kind == "cuda" && !wantsTF32(opts) && os.Getenv("NVIDIA_TF32_OVERRIDE") == "" {
		// Belt and braces for exact float32: cuBLAS and cuDNN then never use TF32, whatever the
		// precision config of a dot says. Set before the plugin creates its cuBLAS handles.
		if err := os.Setenv("NVIDIA_TF32_OVERRIDE", "0"); err != nil {
			return fail(fmt.Errorf("set NVIDIA_TF32_OVERRIDE: %w", err))
		}
		info.Env = append(info.Env, "NVIDIA_TF32_OVERRIDE=0")
	}
	if err := checkLibrary(pl.Path); err != nil { // a truncated file would end in SIGBUS
		return fail(err)
	}
	major, minor, err := probePlugin(pl.Path)
	if err != nil {
		return fail(err)
	}
	info.PJRTVersion = fmt.Sprintf("%d.%d", major, minor)
	if major != goXLAPJRTMajor {
		return fail(fmt.Errorf("plugin speaks PJRT C API %s, go-xla %s speaks %d.%d: the major versions must match",
			info.PJRTVersion, goXLAVersion, goXLAPJRTMajor, goXLAPJRTMinor))
	}
	if minor < goXLAPJRTMinor {
		info.Warnings = append(info.Warnings, fmt.Sprintf("plugin speaks PJRT C API %s, older than go-xla %s's %d.%d: "+
			"calls added since may be missing", info.PJRTVersion, goXLAVersion, goXLAPJRTMajor, goXLAPJRTMinor))
	}
	config := pl.Path
	if opts != "" {
		config += "," + opts
	}
	var backend *gxla.Backend
	err = protect("load the PJRT plugin", func() error {
		var err error
		backend, err = gxla.NewWithOptions(config, nil)
		return err
	})
	if err != nil {
		return fail(err)
	}
	if !mentionsTF32(opts) {
		backend.DotGeneralUseTF32 = false
	}
	info.TF32 = backend.DotGeneralUseTF32 && backend.IsCUDA()
	return backend, info, nil
}

// wantsTF32 reports whether go-xla options turn TF32 on ("tf32", "tf32=true"); go-xla's own CUDA
// default (on) does not count, Open turns it off.
func wantsTF32(opts string) bool {
	on := false
	for _, o := range strings.Split(opts, ",") {
		key, val, hasVal := strings.Cut(strings.TrimSpace(o), "=")
		switch key {
		case "tf32":
			on = !hasVal || val == "true" || val == "1" || val == "t" || val == "T" || val == "TRUE" || val == "True"
		case "notf32":
			on = false
		}
	}
	return on
}

// mentionsTF32 reports whether go-xla options set tf32 explicitly ("tf32", "tf32=…", "notf32").
func mentionsTF32(opts string) bool {
	for _, o := range strings.Split(opts, ",") {
		key, _, _ := strings.Cut(strings.TrimSpace(o), "=")
		if key == "tf32" || key == "notf32" {
			return true
		}
	}
	return false
}

// notFound is the error for a plugin kind that discovery did not find: every place searched and how to
// get one.
func (p Places) notFound(name string) error {
	var b strings.Builder
	b.WriteString(" Searched, in order:")
	for _, line := range p.Searched() {
		b.WriteString("\n  " + line)
	}
	b.WriteString("\nTo get one:")
	switch name {
	case CPU:
		b.WriteString("\n  octlm backends --install cpu   (downloads go-xla's CPU plugin from GitHub into ~/.local/lib/go-xla)")
	case CUDA:
		b.WriteString("\n  octlm backends --install cuda  (downloads JAX's CUDA plugin and NVIDIA libraries from PyPI into ~/.local/lib/go-xla)")
		b.WriteString("\n  pip install \"jax[cuda13]\"       (octlm finds site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so)")
	default:
		b.WriteString("\n  octlm backends --install cpu|cuda|cuda12|cuda13")
	}
	b.WriteString("\n  or set PJRT_PLUGIN_LIBRARY_PATH to a folder holding pjrt_c_api_<cpu|cuda>_plugin.so (or xla_cuda_plugin.so)")
	b.WriteString("\nThe pure-Go backend needs nothing: --backend go")
	return fmt.Errorf("xla: backend %q: %w.%s", name, ErrNoPlugin, b.String())
}

// protect runs fn, turning a panic (go-xla and compute panic in places) into an error.
func protect(what string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: panic: %v", what, r)
		}
	}()
	return fn()
}

func quote(s string) string { return fmt.Sprintf("%q", s) }
