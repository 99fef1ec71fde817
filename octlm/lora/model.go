package lora

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/octlm/octlm/internal/fileio"
	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm/synth"
)

// ModelFiles are the files of a checkpoint folder other than its weights that a merged or
// fine-tuned checkpoint copies from its base, when present.
var ModelFiles = []string{
	"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
	"vocab.json", "merges.txt", "special_tokens_map.json", "added_tokens.json", "chat_template.jinja",
}

// maxModelFileBytes bounds each copied file (Qwen3's tokenizer.json is 11 MB).
const maxModelFileBytes = 256 << 20

// WriteModel writes a checkpoint folder into dir (created if needed): the ModelFiles of srcDir,
// and the tensors specs (their bytes from fill, called once per tensor with its index in specs)
// in model.safetensors, or in shards of at most maxShardBytes (0: the Hub's 4 GB) with
// model.safetensors.index.json, as save_pretrained splits them. Each file is written to a
// temporary name and renamed into place.
func WriteModel(dir, srcDir string, specs []loader.TensorSpec, fill func(i int, w io.Writer) error, maxShardBytes int64) error {
	if err := fileio.CheckWritableDir(dir); err != nil {
		return fmt.Errorf("lora: %w", err)
	}
	for _, name := range ModelFiles {
		data, err := fileio.ReadFile(filepath.Join(srcDir, name), maxModelFileBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("lora: %w", err)
		}
		if err := fileio.WriteFile(filepath.Join(dir, name), data); err != nil {
			return fmt.Errorf("lora: %w", err)
		}
	}
	index := make(map[string]int, len(specs))
	for i, s := range specs {
		index[s.Name] = i
	}
	shards := synth.ShardTensors(specs, maxShardBytes)
	for _, sh := range shards {
		err := loader.WriteFileFunc(filepath.Join(dir, sh.Name), sh.Tensors, map[string]string{"format": "pt"}, func(j int, w io.Writer) error {
			return fill(index[sh.Tensors[j].Name], w)
		})
		if err != nil {
			return err
		}
	}
	indexPath := filepath.Join(dir, loader.IndexFileName)
	if len(shards) > 1 {
		if err := fileio.WriteFile(indexPath, synth.IndexJSON(shards)); err != nil {
			return fmt.Errorf("lora: %w", err)
		}
	} else if err := os.Remove(indexPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("lora: %w", err) // a stale index would shadow the new single file
	}
	return nil
}

// EncodeFloat32 writes v to w as dtype (F32, BF16 or F16, rounded to nearest even), in bounded
// chunks.
func EncodeFloat32(w io.Writer, v []float32, dtype loader.DType) error {
	if dtype != loader.F32 && dtype != loader.BF16 && dtype != loader.F16 {
		return fmt.Errorf("lora: cannot write %s weights (float32, bfloat16 or float16)", dtype)
	}
	const chunk = 1 << 14
	buf := make([]byte, 0, 4*chunk)
	for start := 0; start < len(v); start += chunk {
		part := v[start:min(start+chunk, len(v))]
		buf = buf[:0]
		for _, x := range part {
			switch dtype {
			case loader.F32:
				b := math.Float32bits(x)
				buf = append(buf, byte(b), byte(b>>8), byte(b>>16), byte(b>>24))
			case loader.BF16:
				h := loader.Float32ToBFloat16(x)
				buf = append(buf, byte(h), byte(h>>8))
			case loader.F16:
				h := loader.Float32ToFloat16(x)
				buf = append(buf, byte(h), byte(h>>8))
			}
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

// Float32Bytes is v as float32 little-endian bytes.
func Float32Bytes(v []float32) []byte {
	var b bytes.Buffer
	b.Grow(4 * len(v))
	_ = EncodeFloat32(&b, v, loader.F32) // a bytes.Buffer never fails
	return b.Bytes()
}

// Merge writes into outDir the checkpoint in modelDir with a merged into its weights:
// W + scale·B·A for every targeted Linear, the product and sum in float32 from the stored
// weight, rounded once to the weight's dtype; every other tensor is copied byte for byte.
// linears are the model's Linear weights (a is validated against them first).
func Merge(modelDir, outDir string, a *Adapter, linears []Linear, maxShardBytes int64) error {
	if err := a.Validate(linears); err != nil {
		return err
	}
	if same, _ := sameDir(modelDir, outDir); same {
		return fmt.Errorf("lora: merging into the model's own folder %s: give another --out", outDir)
	}
	byName := map[string]Matrices{}
	for _, l := range linears {
		if m, ok := a.Modules[l.Module]; ok {
			byName[l.Name] = m
		}
	}
	ck, err := loader.OpenCheckpoint(modelDir)
	if err != nil {
		return err
	}
	defer ck.Close()
	var specs []loader.TensorSpec
	var entries []loader.Entry
	for e, err := range ck.Tensors() {
		if err != nil {
			return err
		}
		specs = append(specs, loader.TensorSpec{Name: e.Info.Name, DType: e.Info.DType, Shape: e.Info.Shape})
		entries = append(entries, e)
	}
	merged := 0
	scale := float32(a.Config.Scale())
	err = WriteModel(outDir, modelDir, specs, func(i int, w io.Writer) error {
		e := entries[i]
		m, ok := byName[e.Info.Name]
		if !ok {
			raw := make([]byte, e.Info.NumElements()*e.Info.DType.Size())
			if err := e.File.ReadRaw(e.Info, raw); err != nil {
				return err
			}
			_, err := w.Write(raw)
			return err
		}
		if len(e.Info.Shape) != 2 || e.Info.Shape[0] != m.Out || e.Info.Shape[1] != m.In {
			return fmt.Errorf("tensor %q is %v, the adapter's module [%d, %d]", e.Info.Name, e.Info.Shape, m.Out, m.In)
		}
		wt := make([]float32, m.Out*m.In)
		if err := e.File.ReadFloat32(e.Info, wt); err != nil {
			return err
		}
		MergeInto(wt, m, scale)
		merged++
		return EncodeFloat32(w, wt, e.Info.DType)
	}, maxShardBytes)
	if err != nil {
		return err
	}
	if merged != len(byName) {
		return fmt.Errorf("lora: merged %d of the adapter's %d modules: the checkpoint lacks the others' weights", merged, len(byName))
	}
	return nil
}

// MergeInto adds scale·(B·A) to w [Out, In] in float32, as PEFT's merge: the product first,
// then scaled and added.
func MergeInto(w []float32, m Matrices, scale float32) {
	delta := make([]float32, m.In)
	for o := range m.Out {
		clear(delta)
		for r := range m.Rank {
			b := m.B[o*m.Rank+r]
			for i, a := range m.A[r*m.In : (r+1)*m.In] {
				delta[i] += b * a
			}
		}
		row := w[o*m.In : (o+1)*m.In]
		for i, d := range delta {
			row[i] += d * scale
		}
	}
}

// sameDir reports whether a and b are the same existing folder.
func sameDir(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}
