package octlm

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// tinyWithConfig copies the tiny-qwen3 checkpoint with config.json edited.
func tinyWithConfig(t *testing.T, from, to string) string {
	t.Helper()
	cfg, err := os.ReadFile(filepath.Join(fixtureDir("tiny-qwen3"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), from) {
		t.Fatalf("config.json lacks %q", from)
	}
	return fixtureWithConfig(t, "tiny-qwen3", []byte(strings.Replace(string(cfg), from, to, 1)))
}

// fixtureWithConfig copies a fixture's model.safetensors into a new folder beside config.
func fixtureWithConfig(t *testing.T, fixture string, config []byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), config, 0o644); err != nil {
		t.Fatal(err)
	}
	weights, err := os.ReadFile(filepath.Join(fixtureDir(fixture), "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), weights, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestConfigCheckedAgainstCheckpoint: a config.json whose sizes disagree with the checkpoint
// is refused before anything sized by the config is built; a billion layers must neither take
// memory nor time.
func TestConfigCheckedAgainstCheckpoint(t *testing.T) {
	cases := []struct {
		name, from, to string
		want           string
	}{
		// The largest sizes within the config's bounds (TestAbsurdConfigSizes has those past them).
		{"the most layers", `"num_hidden_layers": 2`, `"num_hidden_layers": 1024`, "num_hidden_layers is 1024, the checkpoint holds 2 layers"},
		{"one layer too few", `"num_hidden_layers": 2`, `"num_hidden_layers": 1`, "holds layer 1, the config's num_hidden_layers is 1"},
		{"the largest vocabulary", `"vocab_size": 320`, `"vocab_size": 16777216`, "does not match the config's vocab_size × hidden_size [16777216 64]"},
		{"the largest hidden size", `"hidden_size": 64`, `"hidden_size": 65536`, "does not match the config's vocab_size × hidden_size [320 65536]"},
		{"the largest MLP", `"intermediate_size": 96`, `"intermediate_size": 1048576`, "does not match the config's"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := tinyWithConfig(t, c.from, c.to)
			// Load and the memory estimate both check the header before the weight table (the
			// layers and the embedding's sizes; an MLP width is checked as its tensor is read).
			calls := []func() error{func() error { _, err := Load(dir, LoadOptions{Backend: goBackend(t)}); return err }}
			if !strings.Contains(c.name, "MLP") {
				calls = append(calls, func() error { _, err := MemoryNeededDir(dir, Float32, goBackend(t), 100); return err })
			}
			for _, call := range calls {
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				err := call()
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("got %v, want an error containing %q", err, c.want)
				}
				if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
					t.Errorf("refusing the config allocated %d MiB", grew>>20)
				}
			}
		})
	}
}

// TestLoadFileTruncatedDuringLoad: a checkpoint cut short while it streams in gives an error
// saying the file changed, naming it, and the load frees what it had allocated.
func TestLoadFileTruncatedDuringLoad(t *testing.T) {
	dir := tinyWithConfig(t, `"num_hidden_layers": 2`, `"num_hidden_layers": 2`)
	model := filepath.Join(dir, "model.safetensors")
	cut := false
	_, err := Load(dir, LoadOptions{Backend: goBackend(t), Progress: func(_ string, done, total int64) {
		if !cut {
			cut = true
			if err := os.Truncate(model, 4096); err != nil {
				t.Fatal(err)
			}
		}
	}})
	if err == nil || !strings.Contains(err.Error(), "file changed while being read") || !strings.Contains(err.Error(), "4096 now") || !strings.Contains(err.Error(), model) {
		t.Fatalf("got %v, want a file-changed error naming %s", err, model)
	}
}
