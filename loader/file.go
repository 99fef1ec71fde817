package loader

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/octlm/octlm/internal/fileio"
)

// File is one open safetensors file whose header has been fully validated.
// Its methods are safe for concurrent use (reads go through ReadAt).
type File struct {
	path     string
	f        *os.File
	data     []byte // read-only mapping of the whole file, or nil (reads use ReadAt)
	size     int64
	tensors  []TensorInfo
	index    map[string]int
	metadata map[string]string
}

// Open opens path and validates its whole header (see ReadHeader) before returning.
// Errors name the path and, for format errors, the tensor and rule (*FormatError).
func Open(path string) (*File, error) {
	// Stat before opening: opening a FIFO blocks until a writer comes.
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("loader: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, &FormatError{Path: path, Rule: RuleNotRegularFile, Detail: st.Mode().String()}
	}
	f, err := fileio.OpenRead(path) // does not block should path have become a FIFO since
	if err != nil {
		return nil, fmt.Errorf("loader: %w", err)
	}
	if st, err = f.Stat(); err != nil {
		f.Close()
		return nil, fmt.Errorf("loader: %w", err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &FormatError{Path: path, Rule: RuleNotRegularFile, Detail: st.Mode().String()}
	}
	tensors, metadata, err := ReadHeader(io.NewSectionReader(f, 0, st.Size()), st.Size())
	if err != nil {
		f.Close()
		return nil, withPath(err, path)
	}
	index := make(map[string]int, len(tensors))
	for i, t := range tensors {
		index[t.Name] = i
	}
	return &File{path: path, f: f, data: mapFile(f, st.Size()), size: st.Size(), tensors: tensors, index: index, metadata: metadata}, nil
}

// Path is the path the file was opened with.
func (f *File) Path() string { return f.path }

// Size is the file size in bytes.
func (f *File) Size() int64 { return f.size }

// Close unmaps and closes the file. Tensors already decoded stay valid.
func (f *File) Close() error {
	var err error
	if f.data != nil {
		err = unmapFile(f.data)
		f.data = nil
	}
	return errors.Join(err, f.f.Close())
}

// Metadata returns a copy of the header's __metadata__ strings.
func (f *File) Metadata() map[string]string { return maps.Clone(f.metadata) }

// Tensors returns the tensors in offset order (a copy).
func (f *File) Tensors() []TensorInfo { return append([]TensorInfo(nil), f.tensors...) }

// Lookup finds a tensor by name.
func (f *File) Lookup(name string) (TensorInfo, bool) {
	i, ok := f.index[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.tensors[i], true
}

// check verifies that t is a tensor of this file (same name, place and size).
func (f *File) check(t TensorInfo) error {
	i, ok := f.index[t.Name]
	if !ok || f.tensors[i].Offset != t.Offset || f.tensors[i].Size != t.Size || f.tensors[i].DType != t.DType {
		return fmt.Errorf("loader: %s: tensor %q: not a tensor of this file", f.path, t.Name)
	}
	return nil
}

// ReadRaw reads the tensor's bytes, as stored (little-endian), into dst; len(dst) must be t.Size.
func (f *File) ReadRaw(t TensorInfo, dst []byte) error {
	if err := f.check(t); err != nil {
		return err
	}
	if int64(len(dst)) != t.Size {
		return fmt.Errorf("loader: %s: tensor %q: destination holds %d bytes, tensor has %d", f.path, t.Name, len(dst), t.Size)
	}
	if err := f.readAt(dst, t.Offset); err != nil {
		return fmt.Errorf("loader: %s: tensor %q: %w", f.path, t.Name, err)
	}
	return nil
}

// ErrChanged is matched (errors.Is) by read errors caused by the file shrinking after Open
// validated it: someone truncated or rewrote it while it was being read.
var ErrChanged = errors.New("file changed while being read")

// readAt fills dst from offset off; a short read (the file shrank since Open) is ErrChanged.
func (f *File) readAt(dst []byte, off int64) error {
	_, err := f.f.ReadAt(dst, off)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return f.changed()
	}
	return err
}

// changed describes a file that shrank after Open, with its sizes then and now.
func (f *File) changed() error {
	if st, err := f.f.Stat(); err == nil && st.Size() != f.size {
		return fmt.Errorf("%w: %d bytes when opened, %d now", ErrChanged, f.size, st.Size())
	}
	return ErrChanged
}

// ReadBFloat16 reads a BF16 tensor as raw bfloat16 bit patterns (no conversion).
func (f *File) ReadBFloat16(t TensorInfo, dst []uint16) error {
	if t.DType != BF16 {
		return fmt.Errorf("loader: %s: tensor %q: dtype %s, want BF16", f.path, t.Name, t.DType)
	}
	return readInto(f, t, dst, 2, func(out []uint16, raw []byte) {
		for i := range out {
			out[i] = binary.LittleEndian.Uint16(raw[2*i:])
		}
	})
}

// ReadFloat32 decodes a floating-point tensor (BF16, F16, F32, F64, F8_E4M3, F8_E5M2) into dst,
// len(dst) == t.NumElements(). The bytes are read and converted in bounded chunks, in parallel
// for large tensors, so no second full-size copy of the tensor is ever held.
func (f *File) ReadFloat32(t TensorInfo, dst []float32) error {
	if n := t.NumElements(); len(dst) != n {
		return fmt.Errorf("loader: %s: tensor %q: destination holds %d elements, tensor has %d", f.path, t.Name, len(dst), n)
	}
	return f.ReadFloat32Range(t, 0, dst)
}

// Release drops the pages of the tensor's bytes that the file's mapping holds in this process
// (the page cache keeps them); a tensor read in several ranges (ReadFloat32Range) can leave
// some behind, mapped again by the kernel's read-around while a neighbouring range was read. It
// does nothing where the file is read rather than mapped.
func (f *File) Release(t TensorInfo) error {
	if err := f.check(t); err != nil {
		return err
	}
	if f.data != nil {
		releasePages(f.data, t.Offset&^4095, t.Offset+t.Size+4095)
	}
	return nil
}

// ReadFloat32Range is ReadFloat32 for the elements first … first+len(dst)-1 of the tensor (in
// its row-major order), so a large tensor can be decoded piece by piece into a small buffer.
func (f *File) ReadFloat32Range(t TensorInfo, first int, dst []float32) error {
	if n := t.NumElements(); first < 0 || first > n || len(dst) > n-first {
		return fmt.Errorf("loader: %s: tensor %q: elements %d…%d are outside its %d", f.path, t.Name, first, first+len(dst)-1, n)
	}
	switch t.DType {
	case BF16:
		return readRange(f, t, first, dst, 2, decodeBF16)
	case F16:
		return readRange(f, t, first, dst, 2, func(out []float32, raw []byte) {
			for i := range out {
				out[i] = Float16ToFloat32(binary.LittleEndian.Uint16(raw[2*i:]))
			}
		})
	case F32:
		return readRange(f, t, first, dst, 4, func(out []float32, raw []byte) {
			for i := range out {
				out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		})
	case F64:
		return readRange(f, t, first, dst, 8, func(out []float32, raw []byte) {
			for i := range out {
				out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:])))
			}
		})
	case F8E4M3:
		return readRange(f, t, first, dst, 1, func(out []float32, raw []byte) {
			for i := range out {
				out[i] = f8e4m3Table[raw[i]]
			}
		})
	case F8E5M2:
		return readRange(f, t, first, dst, 1, func(out []float32, raw []byte) {
			for i := range out {
				out[i] = Float8E5M2ToFloat32(raw[i])
			}
		})
	}
	return fmt.Errorf("loader: %s: tensor %q: cannot decode dtype %s to float32", f.path, t.Name, t.DType)
}

// ReadInt64 decodes an integer or boolean tensor (I64, I32, I16, I8, U64, U32, U16, U8, BOOL)
// into dst, len(dst) == t.NumElements(). A U64 value above MaxInt64 is an error.
func (f *File) ReadInt64(t TensorInfo, dst []int64) error {
	var bad atomic.Bool
	var err error
	switch t.DType {
	case I64:
		err = readInto(f, t, dst, 8, func(out []int64, raw []byte) {
			for i := range out {
				out[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
			}
		})
	case U64:
		err = readInto(f, t, dst, 8, func(out []int64, raw []byte) {
			for i := range out {
				v := binary.LittleEndian.Uint64(raw[8*i:])
				if v > math.MaxInt64 {
					bad.Store(true)
				}
				out[i] = int64(v)
			}
		})
	case I32:
		err = readInto(f, t, dst, 4, func(out []int64, raw []byte) {
			for i := range out {
				out[i] = int64(int32(binary.LittleEndian.Uint32(raw[4*i:])))
			}
		})
	case U32:
		err = readInto(f, t, dst, 4, func(out []int64, raw []byte) {
			for i := range out {
				out[i] = int64(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		})
	case I16:
		err = readInto(f, t, dst, 2, func(out []int64, raw []byte) {
			for i := range out {
				out[i] = int64(int16(binary.LittleEndian.Uint16(raw[2*i:])))
			}
		})
	case U16:
		err = readInto(f, t, dst, 2, func(out []int64, raw []byte) {
			for i := range out {
				out[i] = int64(binary.LittleEndian.Uint16(raw[2*i:]))
			}
		})
	case I8:
		err = readInto(f, t, dst, 1, func(out []int64, raw []byte) {
			for i := range out {
				out[i] = int64(int8(raw[i]))
			}
		})
	case U8, BOOL:
		err = readInto(f, t, dst, 1, func(out []int64, raw []byte) {
			for i := range out {
				out[i] = int64(raw[i])
			}
		})
	default:
		return fmt.Errorf("loader: %s: tensor %q: cannot decode dtype %s to int64", f.path, t.Name, t.DType)
	}
	if err == nil && bad.Load() {
		return fmt.Errorf("loader: %s: tensor %q: U64 value does not fit int64", f.path, t.Name)
	}
	return err
}

// chunkBytes bounds the raw bytes one worker holds at a time.
const chunkBytes = 256 << 10

var chunkPool = sync.Pool{New: func() any { b := make([]byte, chunkBytes); return &b }}

// readInto decodes t chunk by chunk into the matching slices of dst, with up to GOMAXPROCS
// workers for large tensors.
func readInto[T any](f *File, t TensorInfo, dst []T, elemSize int, decode func(out []T, raw []byte)) error {
	if n := t.NumElements(); len(dst) != n {
		return fmt.Errorf("loader: %s: tensor %q: destination holds %d elements, tensor has %d", f.path, t.Name, len(dst), n)
	}
	return readRange(f, t, 0, dst, elemSize, decode)
}

// readRange decodes the elements first … first+len(dst)-1 of t like readInto. Chunks come
// straight from the file's mapping when it has one (their pages released once decoded, so the
// file never joins the resident set), else from ReadAt into a pooled buffer of chunkBytes.
func readRange[T any](f *File, t TensorInfo, first int, dst []T, elemSize int, decode func(out []T, raw []byte)) error {
	if err := f.check(t); err != nil {
		return err
	}
	if int64(t.NumElements())*int64(elemSize) != t.Size {
		return fmt.Errorf("loader: %s: tensor %q: %s is not %d bytes per element", f.path, t.Name, t.DType, elemSize)
	}
	n := len(dst)
	base := t.Offset + int64(first)*int64(elemSize)
	per := chunkBytes / elemSize
	chunks := (n + per - 1) / per
	workers := min(runtime.GOMAXPROCS(0), chunks, maxReadWorkers)
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	fail := func(err error) {
		once.Do(func() { firstErr = fmt.Errorf("loader: %s: tensor %q: %w", f.path, t.Name, err) })
		next.Store(int64(chunks))
	}
	work := func() {
		if f.data != nil {
			// A file truncated by someone else while mapped faults on access: turn that into
			// an error instead of a crash.
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				if r := recover(); r != nil {
					if _, ok := r.(interface{ Addr() uintptr }); !ok {
						panic(r)
					}
					// The fault is the mapping reaching past the file's new end.
					fail(f.changed())
				}
			}()
		}
		var buf []byte
		if f.data == nil {
			bp := chunkPool.Get().(*[]byte)
			defer chunkPool.Put(bp)
			buf = *bp
		}
		for {
			c := int(next.Add(1) - 1)
			if c >= chunks {
				return
			}
			lo := c * per
			hi := min(lo+per, n)
			off := base + int64(lo*elemSize)
			end := base + int64(hi*elemSize)
			if f.data != nil {
				decode(dst[lo:hi], f.data[off:end])
				releasePages(f.data, off, end)
				continue
			}
			raw := buf[:end-off]
			if err := f.readAt(raw, off); err != nil {
				fail(err)
				return
			}
			decode(dst[lo:hi], raw)
		}
	}
	if workers <= 1 {
		work()
	} else {
		var wg sync.WaitGroup
		for range workers {
			wg.Go(work)
		}
		wg.Wait()
	}
	if f.data != nil {
		// Also the pages shared with neighbouring tensors, which no chunk released alone.
		releasePages(f.data, base&^4095, base+int64(n*elemSize)+4095)
	}
	return firstErr
}

// maxReadWorkers caps the goroutines decoding one tensor.
const maxReadWorkers = 8

// littleEndian reports whether the host stores integers little-endian, which lets the BF16
// decoder reinterpret raw bytes as uint16 words.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// decodeBF16 widens little-endian bfloat16 words to float32 (vectorised where the CPU allows,
// see decode_simd_amd64.go).
func decodeBF16(out []float32, raw []byte) {
	if !littleEndian || len(out) == 0 {
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		}
		return
	}
	in := unsafe.Slice((*uint16)(unsafe.Pointer(&raw[0])), len(out))
	o := unsafe.Slice((*uint32)(unsafe.Pointer(&out[0])), len(out))
	done := widenBF16Vector(o, in)
	for i, v := range in[done:] {
		o[done+i] = uint32(v) << 16
	}
}
