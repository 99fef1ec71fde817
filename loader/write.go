package loader

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"

	"github.com/octlm/octlm/internal/fileio"
)

// TensorSpec describes a tensor to be written: its data is supplied separately.
type TensorSpec struct {
	Name  string
	DType DType
	Shape []int
}

// Bytes is the stored size of the tensor.
func (s TensorSpec) Bytes() int64 {
	n := int64(s.DType.Bits())
	for _, d := range s.Shape {
		n *= int64(d)
	}
	return n / 8
}

// WriteTensor is a tensor held in memory, for WriteFile.
type WriteTensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte // little-endian, exactly the stored size
}

// WriteFile writes a safetensors file holding tensors in memory; see WriteFileFunc for the
// layout. Use WriteFileFunc to stream large tensors.
func WriteFile(path string, tensors []WriteTensor, metadata map[string]string) error {
	specs := make([]TensorSpec, len(tensors))
	for i, t := range tensors {
		specs[i] = TensorSpec{t.Name, t.DType, t.Shape}
	}
	return WriteFileFunc(path, specs, metadata, func(i int, w io.Writer) error {
		_, err := w.Write(tensors[i].Data)
		return err
	})
}

// WriteFileFunc writes a safetensors file the way the Hub's files are written (the Rust
// safetensors library): __metadata__ first, then the tensors laid out by descending dtype
// (enum order) and ascending name, header padded with spaces so the data starts at a
// multiple of 8. fill is called once per tensor, in layout order, with the index of the spec
// and a writer that must receive exactly the tensor's bytes. The file is written to a
// temporary name beside path (fileio.CreateTemp: it carries the PID, so a later run removes
// it should this process be killed) and renamed into place when complete.
func WriteFileFunc(path string, specs []TensorSpec, metadata map[string]string, fill func(i int, w io.Writer) error) (err error) {
	header, order, err := EncodeHeader(specs, metadata)
	if err != nil {
		return fmt.Errorf("loader: writing %s: %w", path, err)
	}
	tmp, err := fileio.CreateTemp(path, "tmp")
	if err != nil {
		return fmt.Errorf("loader: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
		fileio.Release(tmp.Name())
	}()
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("loader: %w", err)
	}
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if _, err := bw.Write(header); err != nil {
		return fmt.Errorf("loader: writing %s: %w", path, err)
	}
	for _, i := range order {
		cw := &countingWriter{w: bw, limit: specs[i].Bytes()}
		if err := fill(i, cw); err != nil {
			return fmt.Errorf("loader: writing %s: tensor %q: %w", path, specs[i].Name, err)
		}
		if cw.n != cw.limit {
			return fmt.Errorf("loader: writing %s: tensor %q: got %d bytes, want %d", path, specs[i].Name, cw.n, cw.limit)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("loader: writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("loader: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("loader: %w", err)
	}
	return nil
}

type countingWriter struct {
	w        io.Writer
	n, limit int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.n+int64(len(p)) > c.limit {
		return 0, fmt.Errorf("more than the %d bytes of the tensor", c.limit)
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// EncodeHeader returns the 8-byte length prefix plus the padded JSON header for specs, and the
// layout order (indices into specs). It rejects unknown dtypes, negative dimensions, sizes that
// are not whole bytes, duplicate names and the reserved name __metadata__.
func EncodeHeader(specs []TensorSpec, metadata map[string]string) ([]byte, []int, error) {
	seen := make(map[string]bool, len(specs))
	for _, s := range specs {
		if s.Name == "" || s.Name == metadataKey || seen[s.Name] {
			return nil, nil, fmt.Errorf("tensor %q: empty, reserved or duplicate name", s.Name)
		}
		seen[s.Name] = true
		if !s.DType.Valid() {
			return nil, nil, fmt.Errorf("tensor %q: unknown dtype %q", s.Name, s.DType)
		}
		bitsTotal := int64(s.DType.Bits())
		for _, d := range s.Shape {
			if d < 0 {
				return nil, nil, fmt.Errorf("tensor %q: negative dimension in %v", s.Name, s.Shape)
			}
			bitsTotal *= int64(d)
		}
		if bitsTotal%8 != 0 {
			return nil, nil, fmt.Errorf("tensor %q: %s %v is not a whole number of bytes", s.Name, s.DType, s.Shape)
		}
	}
	order := make([]int, len(specs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		sa, sb := specs[order[a]], specs[order[b]]
		if ra, rb := dtypeRank[sa.DType], dtypeRank[sb.DType]; ra != rb {
			return ra > rb
		}
		return sa.Name < sb.Name
	})
	var b bytes.Buffer
	b.WriteString("{")
	if len(metadata) > 0 {
		b.WriteString(`"__metadata__":`)
		m, err := json.Marshal(metadata) // keys sorted
		if err != nil {
			return nil, nil, err
		}
		b.Write(m)
		if len(specs) > 0 {
			b.WriteByte(',')
		}
	}
	var off int64
	for k, i := range order {
		s := specs[i]
		if k > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(s.Name)
		b.Write(name)
		b.WriteString(`:{"dtype":"`)
		b.WriteString(string(s.DType))
		b.WriteString(`","shape":[`)
		for j, d := range s.Shape {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(d))
		}
		end := off + s.Bytes()
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, off, end)
		off = end
	}
	b.WriteString("}")
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	out := make([]byte, 8, 8+b.Len())
	binary.LittleEndian.PutUint64(out, uint64(b.Len()))
	return append(out, b.Bytes()...), order, nil
}
