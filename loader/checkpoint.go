package loader

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/octlm/octlm/internal/fileio"
)

// File names of a checkpoint folder, as on the Hub.
const (
	SingleFileName = "model.safetensors"
	IndexFileName  = "model.safetensors.index.json"
)

// MaxIndexBytes bounds model.safetensors.index.json (a 400-shard index is about 100 KB).
const MaxIndexBytes = 64 << 20

// Entry is one tensor of a checkpoint and the open file holding it. Read it with
// Entry.File.ReadFloat32(Entry.Info, dst).
type Entry struct {
	File *File
	Info TensorInfo
}

// Checkpoint is a checkpoint folder whose files have all been opened and validated: either one
// model.safetensors, or model.safetensors.index.json plus the shards it names.
type Checkpoint struct {
	dir     string
	files   []*File // shard order: sorted by file name
	entries map[string]Entry
	index   *Index // nil for a single-file checkpoint
	// warnings are oddities that do not stop the load (see Warnings).
	warnings []string
}

// OpenCheckpoint opens the checkpoint in dir and validates every header (and the index, for a
// sharded checkpoint) before returning: every indexed tensor is in exactly one shard, the shard
// really holds it, and every shard is a plain file name that resolves inside dir (or, for a
// Hugging Face cache snapshot, inside the repository's blobs folder).
func OpenCheckpoint(dir string) (*Checkpoint, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("loader: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("loader: %s: not a folder", dir)
	}
	roots, err := allowedRoots(dir)
	if err != nil {
		return nil, err
	}
	_, errSingle := os.Lstat(filepath.Join(dir, SingleFileName))
	_, errIndex := os.Lstat(filepath.Join(dir, IndexFileName))
	switch {
	case errSingle == nil && errIndex == nil:
		return nil, fmt.Errorf("loader: %s: both %s and %s exist; remove the one that does not belong", dir, SingleFileName, IndexFileName)
	case errSingle == nil:
		f, err := openInside(dir, SingleFileName, roots)
		if err != nil {
			return nil, err
		}
		c := &Checkpoint{dir: dir, files: []*File{f}, entries: map[string]Entry{}}
		for _, t := range f.tensors {
			c.entries[t.Name] = Entry{File: f, Info: t}
		}
		c.warnings = strayFiles(dir, []string{SingleFileName}, "the checkpoint is "+SingleFileName)
		return c, nil
	case errIndex == nil:
		c, err := openSharded(dir, roots)
		if err != nil {
			return nil, err
		}
		c.warnings = strayFiles(dir, c.index.Shards(), IndexFileName+" does not list it")
		return c, nil
	case !errors.Is(errSingle, fs.ErrNotExist):
		return nil, fmt.Errorf("loader: %w", errSingle)
	case !errors.Is(errIndex, fs.ErrNotExist):
		return nil, fmt.Errorf("loader: %w", errIndex)
	}
	return nil, &FormatError{Path: dir, Rule: RuleNoCheckpoint}
}

func openSharded(dir string, roots []string) (_ *Checkpoint, err error) {
	indexPath := filepath.Join(dir, IndexFileName)
	if err := checkInside(indexPath, roots); err != nil {
		return nil, err
	}
	data, err := fileio.ReadFile(indexPath, MaxIndexBytes)
	if err != nil {
		return nil, fmt.Errorf("loader: %w", err)
	}
	idx, err := ReadIndex(data)
	if err != nil {
		return nil, withPath(err, indexPath)
	}
	c := &Checkpoint{dir: dir, entries: map[string]Entry{}, index: idx}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	holder := map[string]string{} // tensor -> shard actually holding it
	var total int64
	for _, shard := range idx.Shards() {
		f, err := openInside(dir, shard, roots)
		if err != nil {
			return nil, err
		}
		c.files = append(c.files, f)
		for _, t := range f.tensors {
			total += t.Size
			if other, ok := holder[t.Name]; ok {
				return nil, &FormatError{Path: f.path, Tensor: t.Name, Rule: RuleTwoShards, Detail: fmt.Sprintf("also in %s", other)}
			}
			holder[t.Name] = shard
			want, ok := idx.WeightMap[t.Name]
			if !ok {
				return nil, &FormatError{Path: f.path, Tensor: t.Name, Rule: RuleUnindexed, Detail: "the index does not list it"}
			}
			if want != shard {
				return nil, &FormatError{Path: f.path, Tensor: t.Name, Rule: RuleUnindexed, Detail: fmt.Sprintf("the index assigns it to %s", want)}
			}
			c.entries[t.Name] = Entry{File: f, Info: t}
		}
	}
	for _, name := range idx.Names() {
		if _, ok := c.entries[name]; !ok {
			return nil, &FormatError{Path: filepath.Join(dir, idx.WeightMap[name]), Tensor: name, Rule: RuleShardLacks}
		}
	}
	if idx.HasTotalSize && idx.TotalSize != total {
		return nil, &FormatError{Path: indexPath, Rule: RuleTotalSize, Detail: fmt.Sprintf("index says %d bytes, the shards' tensors hold %d", idx.TotalSize, total)}
	}
	return c, nil
}

// strayFiles lists, as warnings, the .safetensors files in dir other than used: weights a
// reader might think are loaded but are not.
func strayFiles(dir string, used []string, why string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".safetensors") && !strings.HasPrefix(name, ".") && !slices.Contains(used, name) {
			out = append(out, fmt.Sprintf("%s: ignored: not part of the checkpoint (%s)", filepath.Join(dir, name), why))
		}
	}
	return out
}

// Warnings are what OpenCheckpoint noticed but did not refuse: .safetensors files in the
// folder that are not part of the checkpoint (a shard the index does not list). Callers show
// them to the user.
func (c *Checkpoint) Warnings() []string { return slices.Clone(c.warnings) }

// allowedRoots returns the real folders a checkpoint file may resolve into: dir itself and, when
// dir is a Hugging Face cache snapshot (models--Org--Name/snapshots/<commit>), the repository's
// blobs folder, where the cache keeps the files the snapshot links to.
func allowedRoots(dir string) ([]string, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("loader: %s: resolving symlinks: %w", dir, err)
	}
	abs, err := filepath.Abs(real)
	if err != nil {
		return nil, fmt.Errorf("loader: %w", err)
	}
	roots := []string{abs}
	// Use the folder as named, not as resolved: the cache layout is what matters.
	named, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("loader: %w", err)
	}
	for _, d := range []string{named, abs} {
		snaps := filepath.Dir(d)
		repo := filepath.Dir(snaps)
		if filepath.Base(snaps) == "snapshots" && strings.HasPrefix(filepath.Base(repo), "models--") {
			blobs, err := filepath.EvalSymlinks(filepath.Join(repo, "blobs"))
			if err == nil {
				roots = append(roots, blobs)
			}
		}
	}
	return roots, nil
}

// checkInside verifies that path resolves (through any symlinks) inside one of roots.
func checkInside(path string, roots []string) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("loader: %s: resolving symlinks: %w", path, err)
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return fmt.Errorf("loader: %w", err)
	}
	for _, r := range roots {
		if rel, err := filepath.Rel(r, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel) {
			return nil
		}
	}
	return &FormatError{Path: path, Rule: RuleShardEscape, Detail: fmt.Sprintf("resolves to %s", real)}
}

// openInside opens the plain file name inside dir after checking it stays inside roots.
func openInside(dir, name string, roots []string) (*File, error) {
	if !plainFileName(name) {
		return nil, &FormatError{Path: dir, Rule: RuleShardName, Detail: fmt.Sprintf("%q", name)}
	}
	path := filepath.Join(dir, name)
	if err := checkInside(path, roots); err != nil {
		return nil, err
	}
	return Open(path)
}

// plainFileName reports whether name is a single path element that is not . or ..
func plainFileName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`+"\x00") &&
		!filepath.IsAbs(name) && filepath.VolumeName(name) == ""
}

// Dir is the checkpoint folder.
func (c *Checkpoint) Dir() string { return c.dir }

// Sharded reports whether the checkpoint has an index and shards.
func (c *Checkpoint) Sharded() bool { return c.index != nil }

// Index returns the parsed index of a sharded checkpoint, or nil.
func (c *Checkpoint) Index() *Index { return c.index }

// Files returns the open safetensors files, in shard order.
func (c *Checkpoint) Files() []*File { return append([]*File(nil), c.files...) }

// Len is the number of stored tensors.
func (c *Checkpoint) Len() int { return len(c.entries) }

// Lookup finds a tensor by name in any shard.
func (c *Checkpoint) Lookup(name string) (Entry, bool) {
	e, ok := c.entries[name]
	return e, ok
}

// Tensors streams every tensor, shard by shard (shards in file-name order), each shard in
// offset order, which is the order that reads the disk sequentially. The error slot is
// reserved for failures discovered while streaming; all validation happens in OpenCheckpoint.
func (c *Checkpoint) Tensors() iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		for _, f := range c.files {
			for _, t := range f.tensors {
				if !yield(Entry{File: f, Info: t}, nil) {
					return
				}
			}
		}
	}
}

// Close closes every file of the checkpoint.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, f := range c.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// Index is a parsed model.safetensors.index.json.
type Index struct {
	WeightMap    map[string]string // tensor name -> shard file name
	TotalSize    int64             // metadata.total_size, when HasTotalSize
	HasTotalSize bool
	Metadata     map[string]string // other metadata values, as their JSON text
}

// Shards returns the distinct shard file names, sorted.
func (x *Index) Shards() []string {
	set := map[string]bool{}
	for _, s := range x.WeightMap {
		set[s] = true
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Names returns the indexed tensor names, sorted.
func (x *Index) Names() []string {
	out := make([]string, 0, len(x.WeightMap))
	for n := range x.WeightMap {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ReadIndex parses and validates a model.safetensors.index.json: an object with "weight_map"
// (tensor name -> shard file name, each name once, each shard a plain file name) and an optional
// "metadata" object of scalars whose "total_size", if present, is a non-negative integer.
// Errors are *FormatError without a path.
func ReadIndex(data []byte) (*Index, error) {
	s := newJSONScanner(data)
	idx := &Index{WeightMap: map[string]string{}, Metadata: map[string]string{}}
	haveMap := false
	err := s.object("", RuleNotObject, func(key string) error {
		switch key {
		case "weight_map":
			haveMap = true
			return s.object("weight_map", RuleIndex, func(name string) error {
				shard, err := s.str(name, RuleIndex)
				if err != nil {
					return err
				}
				if name == "" {
					return formatErr(name, RuleName, "")
				}
				if !plainFileName(shard) {
					return formatErr(name, RuleShardName, "%q", shard)
				}
				idx.WeightMap[name] = shard
				return nil
			})
		case "metadata":
			return s.object("metadata", RuleIndex, func(k string) error {
				if k == "total_size" {
					v, err := s.int64Value("metadata.total_size", RuleIndex)
					if err != nil {
						return err
					}
					if v < 0 {
						return formatErr("metadata.total_size", RuleIndex, "%d is negative", v)
					}
					idx.TotalSize, idx.HasTotalSize = v, true
					return nil
				}
				t, err := s.token("metadata." + k)
				if err != nil {
					return err
				}
				switch v := t.(type) {
				case string:
					idx.Metadata[k] = v
				case json.Number:
					idx.Metadata[k] = string(v)
				case nil, bool:
					idx.Metadata[k] = fmt.Sprint(v)
				default:
					return formatErr("metadata."+k, RuleIndex, "got %s, want a scalar", describeToken(t))
				}
				return nil
			})
		}
		return formatErr(key, RuleIndex, "unknown top-level key %q", key)
	})
	if err != nil {
		return nil, err
	}
	if err := s.end(""); err != nil {
		return nil, err
	}
	if !haveMap {
		return nil, formatErr("", RuleIndex, "no weight_map")
	}
	return idx, nil
}

// SameData reports whether two tensors hold identical dtype, shape and bytes (compared in
// bounded chunks); used to recognise a stored copy of a tied weight.
func SameData(a, b Entry) (bool, error) {
	if a.Info.DType != b.Info.DType || !slices.Equal(a.Info.Shape, b.Info.Shape) || a.Info.Size != b.Info.Size {
		return false, nil
	}
	const chunk = 1 << 20
	ba, bb := make([]byte, min(chunk, a.Info.Size)), make([]byte, min(chunk, a.Info.Size))
	for off := int64(0); off < a.Info.Size; off += chunk {
		n := min(chunk, a.Info.Size-off)
		if err := a.File.readAt(ba[:n], a.Info.Offset+off); err != nil {
			return false, fmt.Errorf("loader: %s: tensor %q: %w", a.File.path, a.Info.Name, err)
		}
		if err := b.File.readAt(bb[:n], b.Info.Offset+off); err != nil {
			return false, fmt.Errorf("loader: %s: tensor %q: %w", b.File.path, b.Info.Name, err)
		}
		if !bytes.Equal(ba[:n], bb[:n]) {
			return false, nil
		}
	}
	return true, nil
}
