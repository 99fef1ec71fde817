//go:build linux

package main

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/octlm/octlm/xla"
)

// truncatedLibrary writes the first half of a real shared library (libm) to path: an ELF
// file whose segments run past its end, as a download cut short leaves it.
func truncatedLibrary(t *testing.T, path string) string {
	t.Helper()
	var lib []byte
	for _, c := range []string{"/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6"} {
		if b, err := os.ReadFile(c); err == nil {
			lib = b
			break
		}
	}
	if lib == nil {
		t.Skip("no libm.so.6 to cut")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, lib[:len(lib)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestUnusableONNXLibrary: $ONNXRUNTIME_SHARED_LIBRARY_PATH naming a missing file, a folder or
// a truncated library is an error (exit 2) naming the variable, in `octlm backends` and in a
// model command, never a silent fallback nor a SIGBUS; a truncated library where the automatic
// choice looks (npm's folder under $HOME) is passed over with a note, and the model command
// runs on the pure-Go backend.
func TestUnusableONNXLibrary(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	npmLib := filepath.Join(home, ".cache", "octlm", "onnxruntime", "node_modules", "onnxruntime-node", "bin", "napi-v6", "linux", arch, "libonnxruntime.so.1")
	truncatedLibrary(t, npmLib)
	truncated := truncatedLibrary(t, filepath.Join(dir, "cut", "libonnxruntime.so"))
	generate := []string{"generate", "-m", testdata("tiny-qwen3"), "--prompt-ids", "1,2,3", "-n", "2", "--temperature", "0"}
	env := func(t *testing.T, onnxPath string) []string {
		// No $GOMLX_BACKEND: the automatic choice; HOME holds the truncated npm library.
		var e []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, xla.EnvBackend+"=") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, xla.SourceONNXEnv+"=") && !strings.HasPrefix(kv, "PJRT_PLUGIN_LIBRARY_PATH=") {
				e = append(e, kv)
			}
		}
		e = append(e, envRunMain+"=1", "HOME="+home, "PATH=/nonexistent") // no python3: no site-packages plugins
		if onnxPath != "" {
			e = append(e, xla.SourceONNXEnv+"="+onnxPath)
		}
		return e
	}
	run := func(t *testing.T, onnxPath string, args ...string) (string, int) {
		t.Helper()
		cmd := octlmCommand(t, args...)
		cmd.Env = env(t, onnxPath)
		out, err := cmd.CombinedOutput()
		code := 0
		if err != nil {
			code = cmd.ProcessState.ExitCode()
		}
		if strings.Contains(string(out), "SIGBUS") || strings.Contains(string(out), "goroutine ") {
			t.Fatalf("octlm %v crashed:\n%s", args, out)
		}
		return string(out), code
	}
	// A PJRT plugin installed for the whole machine comes before ONNX Runtime in the automatic
	// choice, which then never looks at ONNX Runtime.
	t.Setenv("HOME", home)
	t.Setenv("PATH", "/nonexistent")
	t.Setenv("PJRT_PLUGIN_LIBRARY_PATH", "")
	plugins := xla.DefaultPlaces().Discover()
	explicit := [][]string{{"backends"}, {"backends", "--backend", "onnx"}, append(slices.Clone(generate), "--backend", "onnx")}
	if len(plugins) == 0 {
		explicit = append(explicit, generate)
	}
	for name, path := range map[string]string{"missing": filepath.Join(dir, "none.so"), "folder": dir, "truncated": truncated} {
		t.Run("explicit "+name, func(t *testing.T) {
			for _, args := range explicit {
				out, code := run(t, path, args...)
				if code != 2 || !strings.Contains(out, xla.SourceONNXEnv) || !strings.Contains(out, path) {
					t.Errorf("octlm %v: exit %d, want 2 and an error naming $%s=%s:\n%s", args, code, xla.SourceONNXEnv, path, out)
				}
			}
		})
	}
	t.Run("truncated in the automatic choice", func(t *testing.T) {
		if len(plugins) > 0 {
			t.Skipf("a PJRT plugin on this machine (%s) comes before ONNX Runtime in the automatic choice", plugins[0].Path)
		}
		out, code := run(t, "", "backends")
		if code != 1 || !strings.Contains(out, npmLib+" (npm onnxruntime-node) skipped: truncated") || !strings.Contains(out, "default: go") ||
			!strings.Contains(out, "onnx      found, unusable (note 1)") || !strings.Contains(out, npmLib+" (unusable: truncated") {
			t.Errorf("octlm backends: exit %d, want 1, the truncated library named in a note and go as the default:\n%s", code, out)
		}
		out, code = run(t, "", generate...)
		if code != 0 || !strings.Contains(out, "backend: go") || !strings.Contains(out, "skipped: truncated") {
			t.Errorf("octlm generate: exit %d, want 0 on go with the truncated library named:\n%s", code, out)
		}
	})
}
