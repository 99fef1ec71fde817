package loader

import (
	"encoding/binary"
	"io"
	"math/bits"
	"sort"
	"unicode/utf8"
)

// MaxHeaderLength is the largest JSON header accepted, as in the safetensors reference.
const MaxHeaderLength = 100_000_000

// metadataKey is the reserved header key holding free-form string metadata.
const metadataKey = "__metadata__"

// TensorInfo describes one tensor of a safetensors file.
type TensorInfo struct {
	Name   string
	DType  DType
	Shape  []int
	Offset int64 // absolute offset in the file of the first byte
	Size   int64 // bytes
}

// NumElements is the product of the shape (1 for a scalar).
func (t TensorInfo) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// ReadHeader parses and validates a safetensors header read from r, the start of a file of
// fileSize bytes. It returns the tensors in offset order (with absolute offsets) and the
// __metadata__ strings (an empty map when absent). It reads exactly 8 + header-length bytes
// from r and checks every rule of the format against fileSize: the payload after the header
// must be covered by the tensors exactly, with no gap, overlap or trailing byte.
// Errors are *FormatError without a path (Open adds it).
func ReadHeader(r io.Reader, fileSize int64) (tensors []TensorInfo, metadata map[string]string, err error) {
	var prefix [8]byte
	if fileSize < 8 {
		return nil, nil, formatErr("", RuleTruncated, "%d bytes, shorter than the 8-byte header length", fileSize)
	}
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, nil, formatErr("", RuleTruncated, "reading the 8-byte header length: %v", err)
	}
	length := binary.LittleEndian.Uint64(prefix[:])
	limit := uint64(min(MaxHeaderLength, fileSize-8))
	if length < 2 || length > limit {
		return nil, nil, formatErr("", RuleHeaderLength, "header length %d, want 2 to %d (file is %d bytes)", length, limit, fileSize)
	}
	header := make([]byte, length)
	if _, err := io.ReadFull(r, header); err != nil {
		return nil, nil, formatErr("", RuleTruncated, "reading the %d-byte header: %v", length, err)
	}
	payload := fileSize - 8 - int64(length)
	tensors, metadata, err = parseHeader(header, payload)
	if err != nil {
		return nil, nil, err
	}
	for i := range tensors {
		tensors[i].Offset += 8 + int64(length)
	}
	return tensors, metadata, nil
}

// parseHeader validates the JSON header; offsets in the result are relative to the payload.
func parseHeader(header []byte, payload int64) ([]TensorInfo, map[string]string, error) {
	if !utf8.Valid(header) {
		return nil, nil, formatErr("", RuleUTF8, "")
	}
	s := newJSONScanner(header)
	var tensors []TensorInfo
	var metadata map[string]string
	err := s.object("", RuleNotObject, func(key string) error {
		if key == metadataKey {
			m, err := readMetadata(s)
			metadata = m
			return err
		}
		t, err := readEntry(s, key)
		if err != nil {
			return err
		}
		tensors = append(tensors, t)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if err := s.end(""); err != nil {
		return nil, nil, err
	}
	if metadata == nil {
		metadata = map[string]string{}
	}
	order := make([]int, len(tensors))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ta, tb := tensors[order[a]], tensors[order[b]]
		if ta.Offset != tb.Offset {
			return ta.Offset < tb.Offset
		}
		return ta.Size < tb.Size
	})
	sorted := make([]TensorInfo, len(tensors))
	var cursor int64
	prev := ""
	for i, k := range order {
		t := tensors[k]
		if t.Offset+t.Size > payload {
			return nil, nil, formatErr(t.Name, RulePayloadTruncated, "data_offsets end at %d but the payload after the header holds %d bytes", t.Offset+t.Size, payload)
		}
		switch {
		case t.Offset < cursor:
			return nil, nil, formatErr(t.Name, RuleOverlap, "starts at %d, inside %q which ends at %d", t.Offset, prev, cursor)
		case t.Offset > cursor && prev == "":
			return nil, nil, formatErr(t.Name, RuleGap, "first tensor starts at %d, not 0", t.Offset)
		case t.Offset > cursor:
			return nil, nil, formatErr(t.Name, RuleGap, "starts at %d but %q ends at %d", t.Offset, prev, cursor)
		}
		cursor = t.Offset + t.Size
		prev = t.Name
		sorted[i] = t
	}
	if cursor != payload {
		return nil, nil, formatErr(prev, RuleTrailingBytes, "tensors end at %d, the payload holds %d bytes", cursor, payload)
	}
	return sorted, metadata, nil
}

func readMetadata(s *jsonScanner) (map[string]string, error) {
	m := map[string]string{}
	err := s.object(metadataKey, RuleMetadata, func(key string) error {
		v, err := s.str(metadataKey, RuleMetadata)
		if err != nil {
			return err
		}
		m[key] = v
		return nil
	})
	return m, err
}

// readEntry reads {"dtype":..., "shape":[...], "data_offsets":[start,end]}; the returned
// TensorInfo has Offset = start, relative to the payload.
func readEntry(s *jsonScanner, name string) (TensorInfo, error) {
	t := TensorInfo{Name: name}
	var offsets, shape []int64
	var haveDType, haveShape, haveOffsets bool
	err := s.object(name, RuleEntry, func(key string) error {
		var err error
		switch key {
		case "dtype":
			var d string
			d, err = s.str(name, RuleDType)
			t.DType, haveDType = DType(d), true
		case "shape":
			shape, err = s.intList(name, RuleShape)
			haveShape = true
		case "data_offsets":
			offsets, err = s.intList(name, RuleOffsets)
			haveOffsets = true
		default:
			return formatErr(name, RuleEntry, "unknown field %q", key)
		}
		return err
	})
	if err != nil {
		return t, err
	}
	if name == "" {
		return t, formatErr(name, RuleName, "")
	}
	if !haveDType || !haveShape || !haveOffsets {
		return t, formatErr(name, RuleEntry, "missing field (dtype %v, shape %v, data_offsets %v)", haveDType, haveShape, haveOffsets)
	}
	if !t.DType.Valid() {
		return t, formatErr(name, RuleDType, "%q", truncate(string(t.DType), 40))
	}
	t.Shape = make([]int, len(shape))
	var elems uint64 = 1
	overflow, zero := false, false
	for i, d := range shape {
		if d < 0 {
			return t, formatErr(name, RuleShape, "dimension %d is %d", i, d)
		}
		t.Shape[i] = int(d)
		if d == 0 {
			zero = true
		}
		hi, lo := bits.Mul64(elems, uint64(d))
		if hi != 0 || lo > 1<<56 {
			overflow = true
		}
		elems = lo
	}
	if zero {
		elems = 0
	} else if overflow {
		return t, formatErr(name, RuleShape, "shape %v has too many elements", shape)
	}
	if len(offsets) != 2 {
		return t, formatErr(name, RuleOffsets, "%d values, want [start, end]", len(offsets))
	}
	start, end := offsets[0], offsets[1]
	if start < 0 || end < 0 {
		return t, formatErr(name, RuleOffsets, "[%d, %d]", start, end)
	}
	if end < start {
		return t, formatErr(name, RuleReversedOffsets, "[%d, %d]", start, end)
	}
	bitsTotal := elems * uint64(t.DType.Bits()) // elems <= 2^56, Bits <= 64: no overflow
	if bitsTotal%8 != 0 || bitsTotal/8 != uint64(end-start) {
		return t, formatErr(name, RuleByteCount, "%s %v needs %d bits, data_offsets [%d, %d] hold %d bytes", t.DType, shape, bitsTotal, start, end, end-start)
	}
	t.Offset, t.Size = start, end-start
	return t, nil
}
