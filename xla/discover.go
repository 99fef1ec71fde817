package xla

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Where a plugin was found; Plugin.Source holds one of these.
const (
	SourceEnv    = "PJRT_PLUGIN_LIBRARY_PATH"
	SourceGoXLA  = "go-xla install folder"
	SourcePython = "Python site-packages (JAX)"
)

// Plugin is a PJRT plugin file found on disk. Finding one does not load it.
type Plugin struct {
	// Kind is "cpu" or "cuda", or the plugin's own name for others (e.g. "tpu").
	Kind string
	// Path is the absolute path of the plugin's shared library.
	Path string
	// Source says where it was found: SourceEnv, SourceGoXLA or SourcePython.
	Source string
	// SitePackages is the site-packages folder of a JAX plugin, whose nvidia/ folder holds the NVIDIA
	// libraries the plugin needs; "" for plugins found elsewhere.
	SitePackages string
}

// Backend returns the backend name this plugin serves: "xla:cpu", "xla:cuda" or "xla:<kind>".
func (p Plugin) Backend() string { return "xla:" + p.Kind }

// Places lists where plugin discovery looks, in order. DefaultPlaces fills it from the environment;
// tests and tools may build their own.
type Places struct {
	// PluginPath are the folders of $PJRT_PLUGIN_LIBRARY_PATH (go-xla's own variable, ':'-separated),
	// holding pjrt_c_api_<name>_plugin.so (or JAX's xla_cuda_plugin.so). An entry may also name a
	// plugin file directly.
	PluginPath []string
	// GoXLA are go-xla's install folders (~/.local/lib/go-xla, its nvidia/ subfolder, /usr/local/lib/go-xla, ...).
	GoXLA []string
	// SitePackages are Python site-packages folders searched for jax_plugins/*/xla_cuda_plugin.so.
	SitePackages []string
	// NvidiaGPU reports whether an NVIDIA device is present; automatic choice only picks xla:cuda then.
	NvidiaGPU bool
	// ONNX are the ONNX Runtime library files the "onnx" backend tries, in order.
	ONNX []ONNXLibrary
}

// DefaultPlaces returns the places searched on this machine: $PJRT_PLUGIN_LIBRARY_PATH, go-xla's install
// folders, and the site-packages of python3 (asked, if it runs) plus the usual Python locations
// ($VIRTUAL_ENV, $CONDA_PREFIX, ~/.local, pyenv, /usr/local/lib/python3*, /usr/lib/python3*, /opt/conda).
func DefaultPlaces() Places {
	var p Places
	for _, dir := range strings.Split(os.Getenv(SourceEnv), ":") {
		if dir != "" {
			p.PluginPath = append(p.PluginPath, dir)
		}
	}
	home, _ := os.UserHomeDir()
	if home != "" {
		p.GoXLA = append(p.GoXLA,
			filepath.Join(home, ".local", "lib", "go-xla"),
			filepath.Join(home, ".local", "lib", "go-xla", "nvidia"),
			filepath.Join(home, ".local", "lib", "gomlx", "pjrt"))
	}
	p.GoXLA = append(p.GoXLA, "/usr/local/lib/go-xla", "/usr/local/lib/go-xla/nvidia", "/usr/local/lib/gomlx/pjrt")
	p.SitePackages = defaultSitePackages(home)
	p.NvidiaGPU = hasNvidiaDevice()
	p.ONNX = defaultONNXLibraries(home)
	return p
}

// hasNvidiaDevice reports whether /dev/nvidia* exists (as go-xla's own check does first).
func hasNvidiaDevice() bool {
	m, _ := filepath.Glob("/dev/nvidia*")
	return len(m) > 0
}

// defaultSitePackages returns the existing site-packages folders, deduplicated, python3's own first.
func defaultSitePackages(home string) []string {
	var cands []string
	cands = append(cands, pythonSitePackages()...)
	var globs []string
	for _, env := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if v := os.Getenv(env); v != "" {
			globs = append(globs, filepath.Join(v, "lib", "python3*", "site-packages"))
		}
	}
	if home != "" {
		globs = append(globs,
			filepath.Join(home, ".local", "lib", "python3*", "site-packages"),
			filepath.Join(home, ".pyenv", "versions", "*", "lib", "python3*", "site-packages"))
	}
	globs = append(globs,
		"/usr/local/lib/python3*/site-packages",
		"/usr/local/lib/python3*/dist-packages",
		"/usr/lib/python3/dist-packages",
		"/usr/lib/python3*/site-packages",
		"/opt/conda/lib/python3*/site-packages")
	for _, g := range globs {
		m, _ := filepath.Glob(g)
		cands = append(cands, m...)
	}
	var out []string
	seen := map[string]bool{}
	for _, c := range cands {
		key := c
		if r, err := filepath.EvalSymlinks(c); err == nil {
			key = r
		}
		if seen[key] || !isDir(c) {
			continue
		}
		seen[key] = true
		out = append(out, c)
	}
	return out
}

// pythonSitePackages asks python3 for its site-packages; nothing if python3 is absent or slow.
func pythonSitePackages() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "python3", "-c",
		"import site\nfor p in site.getsitepackages()+[site.getusersitepackages()]: print(p)").Output()
	if err != nil {
		return nil
	}
	var dirs []string
	for _, line := range strings.Split(string(out), "\n") {
		if line = strings.TrimSpace(line); line != "" && filepath.IsAbs(line) {
			dirs = append(dirs, line)
		}
	}
	return dirs
}

// Discover returns the PJRT plugins found in the default places, in search order.
func Discover() []Plugin { return DefaultPlaces().Discover() }

// pluginFileName matches go-xla's plugin file names and captures the plugin name.
var pluginFileName = []*regexp.Regexp{
	regexp.MustCompile(`^pjrt_c_api_(.+)_plugin\.so$`),
	regexp.MustCompile(`^pjrt[-_]plugin[-_](.+)\.so$`),
}

// jaxPluginFile is the file name of JAX's CUDA PJRT plugin (jax-cuda12-pjrt, jax-cuda13-pjrt).
const jaxPluginFile = "xla_cuda_plugin.so"

// kindOf returns the plugin kind for a file name, or "" if the name is not a plugin's.
func kindOf(base string) string {
	if base == jaxPluginFile {
		return "cuda"
	}
	for _, re := range pluginFileName {
		if m := re.FindStringSubmatch(base); m != nil {
			name := strings.ToLower(m[1])
			switch {
			case strings.Contains(name, "cuda"), strings.Contains(name, "nvidia"):
				return "cuda"
			case name == "cpu" || strings.HasPrefix(name, "cpu_"):
				return "cpu"
			}
			return name
		}
	}
	return ""
}

// Discover returns the PJRT plugins found in p, in search order: PluginPath, then GoXLA, then
// SitePackages. The same file reached twice (e.g. through go-xla's unversioned symlink) is listed once.
func (p Places) Discover() []Plugin {
	var found []Plugin
	seen := map[string]bool{}
	add := func(path, source, site string) {
		abs, err := filepath.Abs(path)
		if err != nil {
			return
		}
		kind := kindOf(filepath.Base(abs))
		if kind == "" || !isFile(abs) {
			return
		}
		key := abs
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			key = r
		}
		if seen[key] {
			return
		}
		seen[key] = true
		found = append(found, Plugin{Kind: kind, Path: abs, Source: source, SitePackages: site})
	}
	scanDir := func(dir, source string) {
		if isFile(dir) {
			add(dir, source, jaxSitePackages(dir))
			return
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			path := filepath.Join(dir, e.Name())
			add(path, source, jaxSitePackages(path))
		}
	}
	for _, dir := range p.PluginPath {
		scanDir(dir, SourceEnv)
	}
	for _, dir := range p.GoXLA {
		scanDir(dir, SourceGoXLA)
	}
	for _, site := range p.SitePackages {
		m, _ := filepath.Glob(filepath.Join(site, "jax_plugins", "*", jaxPluginFile))
		for _, path := range m {
			add(path, SourcePython, site)
		}
	}
	return found
}

// jaxSitePackages returns the site-packages folder of a plugin laid out as JAX installs it
// (<site-packages>/jax_plugins/<pkg>/xla_cuda_plugin.so), or "".
func jaxSitePackages(path string) string {
	if filepath.Base(path) != jaxPluginFile {
		return ""
	}
	pkgDir := filepath.Dir(path)
	plugins := filepath.Dir(pkgDir)
	if filepath.Base(plugins) != "jax_plugins" {
		return ""
	}
	return filepath.Dir(plugins)
}

// Searched lists every place searched, one per line, with what each held (for error messages and
// `octlm backends`).
func (p Places) Searched() []string {
	var lines []string
	if len(p.PluginPath) == 0 {
		lines = append(lines, fmt.Sprintf("%s: not set", SourceEnv))
	}
	for _, d := range p.PluginPath {
		lines = append(lines, fmt.Sprintf("%s: %s (%s)", SourceEnv, d, dirState(d)))
	}
	for _, d := range p.GoXLA {
		lines = append(lines, fmt.Sprintf("%s: %s (%s)", SourceGoXLA, d, dirState(d)))
	}
	if len(p.SitePackages) == 0 {
		lines = append(lines, fmt.Sprintf("%s: no site-packages folder found (python3, $VIRTUAL_ENV, $CONDA_PREFIX, ~/.local, pyenv, /usr/local/lib/python3*, /usr/lib/python3*, /opt/conda)", SourcePython))
	}
	for _, l := range p.ONNX {
		state := "ONNX Runtime library"
		if err := checkLibrary(l.Path); errors.Is(err, fs.ErrNotExist) {
			state = "missing"
		} else if err != nil {
			state = "unusable: " + err.Error()
		}
		lines = append(lines, fmt.Sprintf("%s: %s (%s)", l.Source, l.Path, state))
	}
	for _, d := range p.SitePackages {
		state := "no jax_plugins/*/" + jaxPluginFile
		if m, _ := filepath.Glob(filepath.Join(d, "jax_plugins", "*", jaxPluginFile)); len(m) > 0 {
			state = fmt.Sprintf("%d JAX CUDA plugin(s)", len(m))
		}
		lines = append(lines, fmt.Sprintf("%s: %s (%s)", SourcePython, d, state))
	}
	return lines
}

// dirState says whether a searched folder exists and how many plugins it holds.
func dirState(d string) string {
	if isFile(d) {
		if kindOf(filepath.Base(d)) == "" {
			return "a file, not named like a PJRT plugin"
		}
		return "plugin file"
	}
	entries, err := os.ReadDir(d)
	if err != nil {
		if os.IsNotExist(err) {
			return "missing"
		}
		return "unreadable: " + err.Error()
	}
	n := 0
	for _, e := range entries {
		if kindOf(e.Name()) != "" {
			n++
		}
	}
	if n == 0 {
		return "no plugins"
	}
	return fmt.Sprintf("%d plugin file(s)", n)
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
