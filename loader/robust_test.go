//go:build unix

package loader

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bounded runs f and fails the test if it has not returned within a few seconds: the cases
// here are ones a careless reader would block on forever.
func bounded(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("blocked")
		return nil
	}
}

// TestFIFOsRefused: a FIFO as a checkpoint file, shard or index is refused at once, naming it.
func TestFIFOsRefused(t *testing.T) {
	mkfifo := func(t *testing.T, path string) {
		if err := syscall.Mkfifo(path, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name  string
		setup func(t *testing.T) (open func() error, fifo string)
	}{
		{"file given to Open", func(t *testing.T) (func() error, string) {
			p := filepath.Join(t.TempDir(), "x.safetensors")
			mkfifo(t, p)
			return func() error { _, err := Open(p); return err }, p
		}},
		{"model.safetensors", func(t *testing.T) (func() error, string) {
			dir := t.TempDir()
			p := filepath.Join(dir, SingleFileName)
			mkfifo(t, p)
			return func() error { _, err := OpenCheckpoint(dir); return err }, p
		}},
		{"shard", func(t *testing.T) (func() error, string) {
			dir := shardedDir(t)
			p := filepath.Join(dir, "model-00002-of-00002.safetensors")
			os.Remove(p)
			mkfifo(t, p)
			return func() error { _, err := OpenCheckpoint(dir); return err }, p
		}},
		{"index", func(t *testing.T) (func() error, string) {
			dir := shardedDir(t)
			p := filepath.Join(dir, IndexFileName)
			os.Remove(p)
			mkfifo(t, p)
			return func() error { _, err := OpenCheckpoint(dir); return err }, p
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			open, fifo := c.setup(t)
			err := bounded(t, open)
			if err == nil || !strings.Contains(err.Error(), fifo) || !strings.Contains(err.Error(), "not a regular file") {
				t.Fatalf("got %v, want a not-a-regular-file error naming %s", err, fifo)
			}
		})
	}
}

// TestSymlinkLoopsNamed: a symlink loop, as a checkpoint file or a shard, gives an
// error naming the path.
func TestSymlinkLoopsNamed(t *testing.T) {
	loop := func(t *testing.T, path string) {
		if err := os.Symlink(filepath.Base(path), path); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name  string
		setup func(t *testing.T) (open func() error, looped string)
	}{
		{"model.safetensors", func(t *testing.T) (func() error, string) {
			dir := t.TempDir()
			p := filepath.Join(dir, SingleFileName)
			loop(t, p)
			return func() error { _, err := OpenCheckpoint(dir); return err }, p
		}},
		{"shard", func(t *testing.T) (func() error, string) {
			dir := shardedDir(t)
			p := filepath.Join(dir, "model-00001-of-00002.safetensors")
			os.Remove(p)
			loop(t, p)
			return func() error { _, err := OpenCheckpoint(dir); return err }, p
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			open, looped := c.setup(t)
			err := bounded(t, open)
			if err == nil || !strings.Contains(err.Error(), looped) {
				t.Fatalf("got %v, want an error naming %s", err, looped)
			}
			if strings.Contains(err.Error(), "no such folder") {
				t.Errorf("a symlink loop reported as a missing folder: %v", err)
			}
		})
	}
}

// TestStrayShardWarned: a .safetensors file the checkpoint does not use is reported by
// Warnings (and still ignored), for sharded and single-file checkpoints.
func TestStrayShardWarned(t *testing.T) {
	cases := []struct {
		name  string
		dir   func(t testing.TB) string
		stray string // "" for none
	}{
		{"sharded, clean", shardedDir, ""},
		{"sharded, extra shard", func(t testing.TB) string {
			dir := shardedDir(t)
			writeShard(t, filepath.Join(dir, "model-00003-of-00003.safetensors"), "e")
			return dir
		}, "model-00003-of-00003.safetensors"},
		{"single, extra file", func(t testing.TB) string {
			dir := t.TempDir()
			writeShard(t, filepath.Join(dir, SingleFileName), "a")
			writeShard(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), "b")
			return dir
		}, "model-00001-of-00002.safetensors"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ck, err := OpenCheckpoint(c.dir(t))
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			w := ck.Warnings()
			if c.stray == "" {
				if len(w) != 0 {
					t.Fatalf("warnings %q for a clean checkpoint", w)
				}
				return
			}
			if len(w) != 1 || !strings.Contains(w[0], c.stray) || !strings.Contains(w[0], "ignored") {
				t.Fatalf("warnings %q, want one naming %s as ignored", w, c.stray)
			}
			if _, ok := ck.Lookup("e"); ok {
				t.Error("the stray shard's tensor was loaded")
			}
		})
	}
}

// TestReadAfterTruncationSays: a file cut short after Open, read through the mapping or
// through ReadAt, says it changed while being read (with both sizes), naming file and tensor.
func TestReadAfterTruncationSays(t *testing.T) {
	for _, mapped := range []bool{true, false} {
		name := map[bool]string{true: "mapped", false: "ReadAt"}[mapped]
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cut.safetensors")
			n := 4 * chunkBytes
			if err := WriteFile(path, []WriteTensor{{"w", BF16, []int{n}, make([]byte, 2*n)}}, nil); err != nil {
				t.Fatal(err)
			}
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if !mapped && f.data != nil {
				unmapFile(f.data)
				f.data = nil
			}
			if err := os.Truncate(path, 4096); err != nil {
				t.Fatal(err)
			}
			w, _ := f.Lookup("w")
			err = f.ReadFloat32(w, make([]float32, n))
			if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "4096 now") {
				t.Fatalf("got %v, want ErrChanged naming %s and its new size", err, path)
			}
			raw := make([]byte, w.Size)
			if err := f.ReadRaw(w, raw); !errors.Is(err, ErrChanged) {
				t.Fatalf("ReadRaw: got %v, want ErrChanged", err)
			}
		})
	}
}
