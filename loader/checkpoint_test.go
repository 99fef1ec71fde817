package loader

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeShard writes a safetensors file holding one 2-element F32 tensor per name.
func writeShard(t testing.TB, path string, names ...string) {
	t.Helper()
	var ws []WriteTensor
	for i, n := range names {
		ws = append(ws, WriteTensor{n, F32, []int{2}, []byte{byte(i), 0, 0, 0, 1, 0, 0, 0}})
	}
	if err := WriteFile(path, ws, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
}

func writeText(t testing.TB, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

const goodIndex = `{"metadata":{"total_size":32},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00001-of-00002.safetensors","c":"model-00002-of-00002.safetensors","d":"model-00002-of-00002.safetensors"}}`

// shardedDir writes a valid two-shard checkpoint and returns its folder.
func shardedDir(t testing.TB) string {
	dir := t.TempDir()
	writeShard(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), "a", "b")
	writeShard(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), "c", "d")
	writeText(t, filepath.Join(dir, IndexFileName), goodIndex)
	return dir
}

func TestOpenCheckpointSingle(t *testing.T) {
	c, err := OpenCheckpoint(fixture(t, "tiny-qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Sharded() || c.Len() != 25 {
		t.Fatalf("sharded %v, %d tensors", c.Sharded(), c.Len())
	}
	var prev int64 = -1
	n := 0
	for e, err := range c.Tensors() {
		if err != nil {
			t.Fatal(err)
		}
		if e.Info.Offset <= prev {
			t.Errorf("%s not in offset order", e.Info.Name)
		}
		prev = e.Info.Offset
		dst := make([]float32, e.Info.NumElements())
		if err := e.File.ReadFloat32(e.Info, dst); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 25 {
		t.Errorf("streamed %d tensors", n)
	}
}

func TestOpenCheckpointSharded(t *testing.T) {
	c, err := OpenCheckpoint(shardedDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var names []string
	for e, err := range c.Tensors() {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, e.Info.Name+"@"+filepath.Base(e.File.Path()))
	}
	want := []string{"a@model-00001-of-00002.safetensors", "b@model-00001-of-00002.safetensors", "c@model-00002-of-00002.safetensors", "d@model-00002-of-00002.safetensors"}
	if !slices.Equal(names, want) {
		t.Errorf("streamed %v, want %v", names, want)
	}
	e, ok := c.Lookup("c")
	if !ok {
		t.Fatal("c missing")
	}
	dst := make([]float32, 2)
	if err := e.File.ReadFloat32(e.Info, dst); err != nil || dst[1] == 0 {
		t.Errorf("read c: %v %v", dst, err)
	}
	// Early stop of the iterator.
	for range c.Tensors() {
		break
	}
}

func TestOpenCheckpointRejects(t *testing.T) {
	s1, s2 := "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	index := func(entries string) string { return `{"metadata":{},"weight_map":{` + entries + `}}` }
	tests := []struct {
		name   string
		setup  func(t *testing.T, dir string)
		rule   Rule
		tensor string
	}{
		{"empty folder", func(t *testing.T, dir string) {}, RuleNoCheckpoint, ""},
		{"index names a parent path", func(t *testing.T, dir string) {
			writeText(t, filepath.Join(dir, IndexFileName), index(`"a":"../x.safetensors"`))
		}, RuleShardName, "a"},
		{"index names an absolute path", func(t *testing.T, dir string) {
			writeText(t, filepath.Join(dir, IndexFileName), index(`"a":"/etc/passwd"`))
		}, RuleShardName, "a"},
		{"index names a subfolder", func(t *testing.T, dir string) {
			writeText(t, filepath.Join(dir, IndexFileName), index(`"a":"sub/x.safetensors"`))
		}, RuleShardName, "a"},
		{"index names dot-dot", func(t *testing.T, dir string) {
			writeText(t, filepath.Join(dir, IndexFileName), index(`"a":".."`))
		}, RuleShardName, "a"},
		{"shard symlink escapes", func(t *testing.T, dir string) {
			outside := filepath.Join(t.TempDir(), "x.safetensors")
			writeShard(t, outside, "a")
			if err := os.Symlink(outside, filepath.Join(dir, s1)); err != nil {
				t.Skip(err)
			}
			writeText(t, filepath.Join(dir, IndexFileName), index(`"a":"`+s1+`"`))
		}, RuleShardEscape, ""},
		{"single file symlink escapes", func(t *testing.T, dir string) {
			outside := filepath.Join(t.TempDir(), "x.safetensors")
			writeShard(t, outside, "a")
			if err := os.Symlink(outside, filepath.Join(dir, SingleFileName)); err != nil {
				t.Skip(err)
			}
		}, RuleShardEscape, ""},
		{"shard lacks indexed tensor", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, s1), "a")
			writeText(t, filepath.Join(dir, IndexFileName), index(`"a":"`+s1+`","b":"`+s1+`"`))
		}, RuleShardLacks, "b"},
		{"tensor indexed to the other shard", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, s1), "a", "b")
			writeShard(t, filepath.Join(dir, s2), "c")
			writeText(t, filepath.Join(dir, IndexFileName), index(`"a":"`+s1+`","b":"`+s2+`","c":"`+s2+`"`))
		}, RuleUnindexed, "b"},
		{"tensor not in index", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, s1), "a", "extra")
			writeText(t, filepath.Join(dir, IndexFileName), index(`"a":"`+s1+`"`))
		}, RuleUnindexed, "extra"},
		{"tensor in two shards", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, s1), "a", "b")
			writeShard(t, filepath.Join(dir, s2), "b", "c")
			writeText(t, filepath.Join(dir, IndexFileName), index(`"a":"`+s1+`","b":"`+s1+`","c":"`+s2+`"`))
		}, RuleTwoShards, "b"},
		{"tensor twice in the index", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, s1), "a")
			writeShard(t, filepath.Join(dir, s2), "b")
			writeText(t, filepath.Join(dir, IndexFileName), index(`"a":"`+s1+`","a":"`+s2+`"`))
		}, RuleDuplicateKey, "weight_map"},
		{"total size wrong", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, s1), "a")
			writeText(t, filepath.Join(dir, IndexFileName), `{"metadata":{"total_size":9},"weight_map":{"a":"`+s1+`"}}`)
		}, RuleTotalSize, ""},
		{"malformed shard", func(t *testing.T, dir string) {
			writeText(t, filepath.Join(dir, s1), "garbage!")
			writeText(t, filepath.Join(dir, IndexFileName), index(`"a":"`+s1+`"`))
		}, RuleHeaderLength, ""},
		{"missing shard", func(t *testing.T, dir string) {
			writeText(t, filepath.Join(dir, IndexFileName), index(`"a":"`+s1+`"`))
		}, "", ""},
		{"index not JSON", func(t *testing.T, dir string) {
			writeText(t, filepath.Join(dir, IndexFileName), `{"weight_map":`)
		}, RuleJSON, "weight_map"},
		{"index array", func(t *testing.T, dir string) {
			writeText(t, filepath.Join(dir, IndexFileName), `[]`)
		}, RuleNotObject, ""},
		{"index without weight_map", func(t *testing.T, dir string) {
			writeText(t, filepath.Join(dir, IndexFileName), `{"metadata":{}}`)
		}, RuleIndex, ""},
		{"index unknown key", func(t *testing.T, dir string) {
			writeText(t, filepath.Join(dir, IndexFileName), `{"weight_map":{},"extra":1}`)
		}, RuleIndex, "extra"},
		{"index shard not string", func(t *testing.T, dir string) {
			writeText(t, filepath.Join(dir, IndexFileName), `{"weight_map":{"a":3}}`)
		}, RuleIndex, "a"},
		{"index negative total", func(t *testing.T, dir string) {
			writeText(t, filepath.Join(dir, IndexFileName), `{"metadata":{"total_size":-1},"weight_map":{}}`)
		}, RuleIndex, "metadata.total_size"},
		{"both single and index", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, SingleFileName), "a")
			writeText(t, filepath.Join(dir, IndexFileName), index(`"a":"`+SingleFileName+`"`))
		}, "", ""},
		{"single file is a folder", func(t *testing.T, dir string) {
			os.Mkdir(filepath.Join(dir, SingleFileName), 0o755)
		}, RuleNotRegularFile, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			c, err := OpenCheckpoint(dir)
			if err == nil {
				c.Close()
				t.Fatal("OpenCheckpoint accepted the folder")
			}
			if !strings.Contains(err.Error(), dir) {
				t.Errorf("error %q does not name the folder", err)
			}
			if tc.rule == "" {
				return
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a *FormatError", err)
			}
			if fe.Rule != tc.rule || fe.Tensor != tc.tensor {
				t.Fatalf("got rule %q tensor %q (%v), want rule %q tensor %q", fe.Rule, fe.Tensor, err, tc.rule, tc.tensor)
			}
			if tc.tensor != "" && !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.tensor)) {
				t.Errorf("error %q does not name tensor %q", err, tc.tensor)
			}
		})
	}
}

// TestOpenCheckpointHFCache accepts the Hugging Face cache layout, where snapshot files are
// symlinks into the repository's blobs folder, and still refuses links leaving the repository.
func TestOpenCheckpointHFCache(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "models--Org--Name")
	blobs := filepath.Join(repo, "blobs")
	snap := filepath.Join(repo, "snapshots", "0123456789abcdef0123456789abcdef01234567")
	for _, d := range []string{blobs, snap} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeShard(t, filepath.Join(blobs, "deadbeef"), "a")
	if err := os.Symlink(filepath.Join("..", "..", "blobs", "deadbeef"), filepath.Join(snap, SingleFileName)); err != nil {
		t.Skip(err)
	}
	c, err := OpenCheckpoint(snap)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	outside := filepath.Join(t.TempDir(), "evil")
	writeShard(t, outside, "a")
	os.Remove(filepath.Join(snap, SingleFileName))
	os.Symlink(outside, filepath.Join(snap, SingleFileName))
	if c, err := OpenCheckpoint(snap); err == nil {
		c.Close()
		t.Fatal("accepted a snapshot link leaving the cache repository")
	} else if !errors.Is(err, ErrFormat) {
		t.Fatalf("got %v", err)
	}
}
