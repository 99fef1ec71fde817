package figures

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/octlm/octlm/train"
	"github.com/octlm/octlm/xla"
)

// TestFinetuneParity trains the Qwen3 fixture's LoRA runs and checks every number of the table
// against its gate; a run whose reference is another run's fails.
func TestFinetuneParity(t *testing.T) {
	b, _, err := xla.Open("go")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	const fixture = "../testdata/tiny-qwen3-finetune/"
	run := func(name, dir string) FinetuneRun {
		return FinetuneRun{Name: name, Model: "../testdata/tiny-qwen3", Data: fixture + "train.jsonl", Dir: fixture + dir}
	}
	tbl, err := FinetuneParity(b, []FinetuneRun{run("lora", "lora"), run("lora-clip-warmup", "lora-clip-warmup")})
	if err != nil {
		t.Fatal(err)
	}
	gates := []float64{FinetuneGradGate, FinetuneLossGate, 1e-4, FinetuneAdapterGate}
	for _, row := range tbl.Rows {
		for i, gate := range gates {
			v, err := strconv.ParseFloat(row[2+i], 64)
			if err != nil || !(v <= gate) {
				t.Errorf("%s: %s = %q, gate %g", row[0], tbl.Header[2+i], row[2+i], gate)
			}
		}
		if row[6] != "PASS" {
			t.Errorf("%s: verdict %s", row[0], row[6])
		}
	}
	// The lora run against a reference whose losses are 2e-4 higher: the loss column fails.
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(fixture+"lora")); err != nil {
		t.Fatal(err)
	}
	losses, err := train.ReadReferenceLosses(filepath.Join(dir, "reference-losses.json"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range losses {
		losses[i].Loss += 2e-4
	}
	data, err := json.Marshal(losses)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "reference-losses.json")
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	shifted := run("shifted", "lora")
	shifted.Dir = dir
	tbl, err = FinetuneParity(b, []FinetuneRun{shifted})
	if err != nil {
		t.Fatal(err)
	}
	if got := tbl.Rows[0]; got[6] != "FAIL" {
		t.Errorf("losses 2e-4 off the reference: %v, want FAIL", got)
	}
}
