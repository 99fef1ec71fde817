package synth

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/octlm/octlm/loader"
)

// smallQwen35 is a Qwen3.5 shape that writes in milliseconds.
func smallQwen35() Qwen35Like {
	q := Qwen35_0_8B()
	q.NumLayers, q.VocabSize, q.HiddenSize, q.IntermediateSize, q.EOSTokenID = 4, 512, 64, 96, 511
	q.HeadDim, q.LinearKeyHeadDim, q.LinearValueHeadDim, q.VisionHidden = 32, 16, 16, 8
	q.MRopeSection = [3]int{2, 1, 1}
	return q
}

// hidden lists the hidden entries (temporaries) left in dir.
func hidden(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestCreate: both shapes go through the one atomic writer: a new folder is written whole; an
// existing checkpoint is replaced only when forced (its other files gone with it); a file, or a
// folder holding other things, is refused untouched; a cancelled context leaves the target as it
// was; what a killed run left beside the target is removed; no temporary is ever left.
func TestCreate(t *testing.T) {
	shapes := []struct {
		name   string
		create func(dir string, force bool, opts Options) error
	}{
		{"qwen3", func(dir string, force bool, opts Options) error { return Create(dir, Tiny(), force, opts) }},
		{"qwen3.5", func(dir string, force bool, opts Options) error { return CreateQwen35(dir, smallQwen35(), force, opts) }},
	}
	for _, shape := range shapes {
		t.Run(shape.name, func(t *testing.T) {
			root := t.TempDir()
			out := filepath.Join(root, "ckpt")
			model := filepath.Join(out, loader.SingleFileName)
			// A hidden folder of a writer that is gone, as a SIGKILLed run leaves it.
			dead := exec.Command("true")
			if err := dead.Run(); err != nil {
				t.Skip("cannot run true:", err)
			}
			stale := filepath.Join(root, ".ckpt.synth-"+strconv.Itoa(dead.Process.Pid)+"-1")
			if err := os.Mkdir(stale, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := shape.create(out, false, Options{Seed: 1, NoTokenizer: true}); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the killed run's %s survived", stale)
			}
			first, err := os.ReadFile(model)
			if err != nil {
				t.Fatal(err)
			}
			extra := filepath.Join(out, "reference")
			if err := os.Mkdir(extra, 0o755); err != nil {
				t.Fatal(err)
			}

			var refused *RefusedError
			err = shape.create(out, false, Options{Seed: 2, NoTokenizer: true})
			if !errors.As(err, &refused) || !refused.NeedsForce || refused.Path != out {
				t.Errorf("an existing checkpoint without force: %v, want a RefusedError that needs force", err)
			}

			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := shape.create(out, true, Options{Seed: 2, NoTokenizer: true, Context: ctx}); !errors.Is(err, context.Canceled) {
				t.Errorf("a cancelled context: %v, want context.Canceled", err)
			}
			if got, _ := os.ReadFile(model); string(got) != string(first) {
				t.Error("a refused or cancelled write changed the checkpoint")
			}

			if err := shape.create(out, true, Options{Seed: 2, NoTokenizer: true}); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(model); string(got) == string(first) {
				t.Error("force did not replace the checkpoint")
			}
			if _, err := os.Stat(extra); !errors.Is(err, os.ErrNotExist) {
				t.Error("the old checkpoint's reference/ survived its replacement")
			}

			notes := filepath.Join(root, "notes")
			os.Mkdir(notes, 0o755)
			os.WriteFile(filepath.Join(notes, "todo.txt"), []byte("keep me"), 0o644)
			file := filepath.Join(root, "file")
			os.WriteFile(file, []byte("keep me"), 0o644)
			for _, target := range []string{notes, file} {
				err := shape.create(target, true, Options{NoTokenizer: true})
				if !errors.As(err, &refused) || refused.NeedsForce || refused.Path != target {
					t.Errorf("%s: %v, want a RefusedError naming it", target, err)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(notes, "todo.txt")); string(b) != "keep me" {
				t.Error("the folder's files were touched")
			}
			if left := hidden(t, root); len(left) > 0 {
				t.Errorf("temporaries left: %v", left)
			}
		})
	}
}
