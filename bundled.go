// Package bundled carries the tiny Qwen3 checkpoint of testdata/tiny-qwen3 inside the binary
// (config.json, model.safetensors, cases.json and its float32 reference logits, about 600 KB),
// so that `octlm parity` with no flags runs the whole protocol from any folder.
//
// It owns nothing but the embedded bytes and writing them out; what they mean is for packages
// loader, octlm and parity.
package bundled

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Name is the bundled checkpoint's folder name.
const Name = "tiny-qwen3"

//go:embed testdata/tiny-qwen3/config.json testdata/tiny-qwen3/model.safetensors testdata/tiny-qwen3/cases.json testdata/tiny-qwen3/reference
var files embed.FS

// FS returns the bundled checkpoint folder: config.json, model.safetensors, cases.json and
// reference/ (reference-logits-N.safetensors, greedy.json).
func FS() fs.FS {
	sub, err := fs.Sub(files, "testdata/"+Name)
	if err != nil {
		panic(err) // unreachable: the path is a constant embedded above
	}
	return sub
}

// Extract writes the bundled checkpoint into a new folder Name inside dir and returns its path.
// It refuses to write over an existing folder.
func Extract(dir string) (string, error) {
	root := filepath.Join(dir, Name)
	if err := os.Mkdir(root, 0o755); err != nil {
		return "", fmt.Errorf("bundled: %w", err)
	}
	src := FS()
	err := fs.WalkDir(src, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(root, filepath.FromSlash(path))
		if d.IsDir() {
			if path == "." {
				return nil
			}
			return os.Mkdir(target, 0o755)
		}
		data, err := fs.ReadFile(src, path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("bundled: extracting %s into %s: %w", Name, dir, err)
	}
	return root, nil
}
