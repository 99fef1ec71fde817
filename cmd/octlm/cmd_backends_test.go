package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octlm/octlm/xla"
)

func TestListBackends(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "pjrt_c_api_cpu_plugin.so")
	if err := os.WriteFile(fake, bytes.Repeat([]byte("not an ELF file\n"), 10), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(xla.EnvBackend, "")
	tests := []struct {
		name    string
		places  xla.Places
		check   bool
		want    []string
		wantErr error
	}{
		{"nothing found", xla.Places{GoXLA: []string{filepath.Join(dir, "missing")}}, true,
			[]string{"go        usable, exact float32", "xla:cpu   not found", "xla:cuda  not found",
				"default: go (automatic: no PJRT plugin found", filepath.Join(dir, "missing") + " (missing)"}, nil},
		{"broken plugin checked", xla.Places{PluginPath: []string{dir}}, true,
			[]string{"xla:cpu   fails to load (note 1)", "note 1: ", "invalid ELF header", "default: xla:cpu"}, errCheckFailed},
		{"broken plugin unchecked", xla.Places{PluginPath: []string{dir}}, false,
			[]string{"xla:cpu   found", fake + " (PJRT_PLUGIN_LIBRARY_PATH)"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := listBackends(&out, tt.places, tt.check)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestBackendsFlags(t *testing.T) {
	for _, args := range [][]string{{"--install", "cpu", "--backend", "go"}, {"extra"}, {"--nope"}} {
		var ue usageError
		if err := runBackends(args, io.Discard, io.Discard); !errors.As(err, &ue) {
			t.Errorf("runBackends(%q) = %v, want a usage error", args, err)
		}
	}
	if err := runBackends([]string{"--install", "tpu"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "unknown plugin") {
		t.Errorf("--install tpu: %v", err)
	}
	if err := runBackends([]string{"--backend", "nope"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "unknown backend") {
		t.Errorf("--backend nope: %v", err)
	}
}

// TestListBackendsONNXDefault: where the automatic choice finds ONNX Runtime, the default line
// says which jobs it runs and that every other job runs on the pure-Go backend.
func TestListBackendsONNXDefault(t *testing.T) {
	t.Setenv(xla.EnvBackend, "")
	places := xla.DefaultPlaces()
	if name, _, _ := places.AutoName(); name != xla.ONNX {
		t.Skipf("the automatic choice here is %s, not ONNX Runtime", name)
	}
	var out bytes.Buffer
	if err := listBackends(&out, places, false); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"default: onnx", "for " + xla.ONNXRunsJobs() + "; every other job runs on go"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
}
