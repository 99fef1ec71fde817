package bundled

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestExtract checks that every file of testdata/tiny-qwen3 is bundled and extracted byte for byte.
func TestExtract(t *testing.T) {
	dir, err := Extract(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"config.json", "model.safetensors", "cases.json", "reference/greedy.json"}
	refs, _ := filepath.Glob(filepath.Join("testdata", Name, "reference", "reference-logits-*.safetensors"))
	if len(refs) == 0 {
		t.Fatal("no reference files in testdata")
	}
	for _, r := range refs {
		want = append(want, "reference/"+filepath.Base(r))
	}
	for _, name := range want {
		orig, err := os.ReadFile(filepath.Join("testdata", Name, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("extracted folder lacks %s: %v", name, err)
		}
		if !bytes.Equal(got, orig) {
			t.Errorf("%s: extracted %d bytes differ from testdata's %d", name, len(got), len(orig))
		}
	}
	n := 0
	_ = fs.WalkDir(FS(), ".", func(_ string, d fs.DirEntry, _ error) error {
		if !d.IsDir() {
			n++
		}
		return nil
	})
	if n != len(want) {
		t.Errorf("bundle holds %d files, want %d", n, len(want))
	}
	if _, err := Extract(filepath.Dir(dir)); err == nil {
		t.Error("Extract wrote over an existing folder")
	}
}
