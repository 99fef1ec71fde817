package xla

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/gomlx/go-xla/installer"
)

// InstallNames are the plugins Install accepts.
var InstallNames = []string{"cpu", "cuda", "cuda12", "cuda13"}

// installMu serialises Install, which borrows os.Stdout.
var installMu sync.Mutex

// InstallDir returns go-xla's per-user install folder (~/.local/lib/go-xla on Linux), where Install
// puts plugins and where discovery looks.
func InstallDir() (string, error) {
	lib, err := installer.DefaultHomeLibPath()
	if err != nil {
		return "", fmt.Errorf("xla: go-xla install folder: %w", err)
	}
	return filepath.Join(lib, "go-xla"), nil
}

// Install downloads a PJRT plugin into InstallDir with go-xla's installer: "cpu" (go-xla's tested CPU
// plugin, from github.com/gomlx/pjrt-cpu-binaries) or "cuda" (= "cuda13"; or "cuda12": JAX's CUDA
// plugin and the NVIDIA libraries it needs, from pypi.org). It is the only way this package downloads
// anything. A plugin already installed is left alone. progress receives the installer's messages
// (nil discards them).
func Install(plugin string, progress io.Writer) error {
	if progress == nil {
		progress = io.Discard
	}
	dir, err := InstallDir()
	if err != nil {
		return err
	}
	var kind string
	var run func() error
	switch plugin {
	case "cpu":
		// CPUAutoInstall installs the version go-xla was tested with, and is a no-op if present.
		kind = "cpu"
		run = func() error { return installer.CPUAutoInstall(dir, true, installer.Normal) }
	case "cuda", "cuda12", "cuda13":
		variant := plugin
		if variant == "cuda" {
			variant = "cuda13"
		}
		kind = "cuda"
		if installed := filepath.Join(dir, "nvidia", installer.NVIDIAPJRTPluginFileName); isFile(installed) {
			fmt.Fprintf(progress, "CUDA plugin already installed: %s (remove %s to reinstall)\n", installed, filepath.Join(dir, "nvidia"))
			return nil
		}
		run = func() error { return installer.CudaInstall(variant, "latest", dir, true, installer.Normal) }
	default:
		return fmt.Errorf("xla: install %q: unknown plugin; valid: %q", plugin, InstallNames)
	}
	fmt.Fprintf(progress, "installing the %s PJRT plugin into %s (network: github.com for cpu, pypi.org for cuda)\n", plugin, dir)
	err = withStdout(progress, func() error {
		return protect("install "+plugin, run)
	})
	if err != nil {
		return fmt.Errorf("xla: install %s plugin into %s: %w\n(this downloads from the network; without network access, copy a plugin by hand "+
			"and set PJRT_PLUGIN_LIBRARY_PATH to its folder, or use --backend go)", plugin, dir, err)
	}
	for _, pl := range (Places{GoXLA: []string{dir, filepath.Join(dir, "nvidia")}}).Discover() {
		if pl.Kind == kind {
			fmt.Fprintf(progress, "\ninstalled: %s\n", pl.Path)
			return nil
		}
	}
	return fmt.Errorf("xla: install %s plugin: the installer reported success but no %s plugin is in %s", plugin, kind, dir)
}

// withStdout runs fn with os.Stdout redirected to w: go-xla's installer prints its progress there, and
// octlm keeps stdout for results.
func withStdout(w io.Writer, fn func() error) error {
	installMu.Lock()
	defer installMu.Unlock()
	r, pw, err := os.Pipe()
	if err != nil {
		return fn()
	}
	old := os.Stdout
	os.Stdout = pw
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(w, r)
		close(done)
	}()
	defer func() {
		os.Stdout = old
		_ = pw.Close()
		<-done
		_ = r.Close()
	}()
	return fn()
}
