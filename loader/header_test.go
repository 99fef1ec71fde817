package loader

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rawFile builds a safetensors file from a literal header and a zero payload of n bytes.
func rawFile(header string, payload int) []byte {
	b := make([]byte, 8, 8+len(header)+payload)
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, payload)...)
}

// withLength builds a file whose length prefix is n regardless of the header's real size.
func withLength(n uint64, rest string) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, n)
	return append(b, rest...)
}

const goodEntry = `"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`

func TestReadHeaderRejects(t *testing.T) {
	tests := []struct {
		name   string
		file   []byte
		rule   Rule
		tensor string
	}{
		{"empty file", nil, RuleTruncated, ""},
		{"shorter than length prefix", []byte{1, 0, 0}, RuleTruncated, ""},
		{"header length past end", withLength(100, `{}`), RuleHeaderLength, ""},
		{"header length zero", withLength(0, `{}`), RuleHeaderLength, ""},
		{"header length one", withLength(1, `{}`), RuleHeaderLength, ""},
		{"header length huge", withLength(1<<62, `{}`), RuleHeaderLength, ""},
		{"not JSON", rawFile(`not json at all`, 0), RuleJSON, ""},
		{"unterminated JSON", rawFile(`{"a":{"dtype":"F32"`, 0), RuleJSON, "a"},
		{"JSON array", rawFile(`[]`, 0), RuleNotObject, ""},
		{"JSON string", rawFile(`"abc"`, 0), RuleNotObject, ""},
		{"invalid UTF-8", rawFile("{\"\xff\":1}", 0), RuleUTF8, ""},
		{"data after the object", rawFile(`{} {}`, 0), RuleJSON, ""},
		{"trailing comma", rawFile(`{`+goodEntry+`,}`, 8), RuleJSON, ""},
		{"duplicate tensor", rawFile(`{`+goodEntry+`,`+goodEntry+`}`, 8), RuleDuplicateKey, "a"},
		{"duplicate tensor via escape", rawFile(`{`+goodEntry+`,"\u0061":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`, 16), RuleDuplicateKey, "a"},
		{"duplicate field", rawFile(`{"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8), RuleDuplicateKey, "a"},
		{"duplicate metadata key", rawFile(`{"__metadata__":{"k":"v","k":"w"}}`, 0), RuleDuplicateKey, "__metadata__"},
		{"duplicate metadata", rawFile(`{"__metadata__":{},"__metadata__":{}}`, 0), RuleDuplicateKey, "__metadata__"},
		{"metadata number", rawFile(`{"__metadata__":{"k":1}}`, 0), RuleMetadata, "__metadata__"},
		{"metadata nested", rawFile(`{"__metadata__":{"k":{"x":"y"}}}`, 0), RuleMetadata, "__metadata__"},
		{"metadata array", rawFile(`{"__metadata__":["x"]}`, 0), RuleMetadata, "__metadata__"},
		{"metadata null", rawFile(`{"__metadata__":null}`, 0), RuleMetadata, "__metadata__"},
		{"entry not object", rawFile(`{"a":[1,2]}`, 0), RuleEntry, "a"},
		{"unknown field", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}`, 8), RuleEntry, "a"},
		{"missing dtype", rawFile(`{"a":{"shape":[2],"data_offsets":[0,8]}}`, 8), RuleEntry, "a"},
		{"missing offsets", rawFile(`{"a":{"dtype":"F32","shape":[2]}}`, 8), RuleEntry, "a"},
		{"empty name", rawFile(`{"":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8), RuleName, ""},
		{"unknown dtype", rawFile(`{"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}}`, 8), RuleDType, "a"},
		{"lowercase dtype", rawFile(`{"a":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}}`, 8), RuleDType, "a"},
		{"dtype not string", rawFile(`{"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}}`, 8), RuleDType, "a"},
		{"negative dim", rawFile(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, 8), RuleShape, "a"},
		{"fractional dim", rawFile(`{"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}`, 8), RuleShape, "a"},
		{"string dim", rawFile(`{"a":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}}`, 8), RuleShape, "a"},
		{"shape not list", rawFile(`{"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}}`, 8), RuleShape, "a"},
		{"shape overflow", rawFile(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, 8), RuleShape, "a"},
		{"one offset", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[8]}}`, 8), RuleOffsets, "a"},
		{"three offsets", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}}`, 8), RuleOffsets, "a"},
		{"negative offset", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}}`, 8), RuleOffsets, "a"},
		{"reversed offsets", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}`, 8), RuleReversedOffsets, "a"},
		{"byte count short", rawFile(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8), RuleByteCount, "a"},
		{"byte count dtype", rawFile(`{"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,8]}}`, 8), RuleByteCount, "a"},
		{"sub-byte not whole", rawFile(`{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`, 2), RuleByteCount, "a"},
		{"overlap", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12), RuleOverlap, "b"},
		{"same offsets", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8), RuleOverlap, "b"},
		{"gap", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}}`, 20), RuleGap, "b"},
		{"gap at start", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12), RuleGap, "a"},
		{"trailing bytes", rawFile(`{`+goodEntry+`}`, 9), RuleTrailingBytes, "a"},
		{"trailing bytes no tensors", rawFile(`{}`, 1), RuleTrailingBytes, ""},
		{"payload truncated", rawFile(`{`+goodEntry+`}`, 7), RulePayloadTruncated, "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ReadHeader(bytes.NewReader(tc.file), int64(len(tc.file)))
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("ReadHeader: got %v, want a *FormatError", err)
			}
			if fe.Rule != tc.rule || fe.Tensor != tc.tensor {
				t.Fatalf("ReadHeader: got rule %q tensor %q (%v), want rule %q tensor %q", fe.Rule, fe.Tensor, err, tc.rule, tc.tensor)
			}
			if !errors.Is(err, ErrFormat) {
				t.Errorf("errors.Is(%v, ErrFormat) = false", err)
			}
			// The same bytes on disk: the error must name the file, the tensor and the rule.
			path := filepath.Join(t.TempDir(), "bad.safetensors")
			if err := os.WriteFile(path, tc.file, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := Open(path)
			if err == nil {
				f.Close()
				t.Fatalf("Open accepted the file")
			}
			msg := err.Error()
			if !strings.Contains(msg, path) || !strings.Contains(msg, string(tc.rule)) || (tc.tensor != "" && !strings.Contains(msg, `"`+tc.tensor+`"`)) {
				t.Errorf("Open error %q does not name path, tensor %q and rule %q", msg, tc.tensor, tc.rule)
			}
		})
	}
}

func TestReadHeaderTruncatedReader(t *testing.T) {
	// The reader ends before the size the caller claims: a truncated download.
	file := rawFile(`{`+goodEntry+`}`, 8)
	_, _, err := ReadHeader(bytes.NewReader(file[:20]), int64(len(file)))
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Rule != RuleTruncated {
		t.Fatalf("got %v, want %q", err, RuleTruncated)
	}
}

func TestReadHeaderAccepts(t *testing.T) {
	tests := []struct {
		name     string
		file     []byte
		names    []string // offset order
		offsets  []int64  // relative to the payload
		metadata map[string]string
	}{
		{"empty", rawFile(`{}`, 0), nil, nil, map[string]string{}},
		{"padded", rawFile(`{`+goodEntry+`}   `, 8), []string{"a"}, []int64{0}, map[string]string{}},
		{"metadata", rawFile(`{"__metadata__":{"format":"pt"},`+goodEntry+`}`, 8), []string{"a"}, []int64{0}, map[string]string{"format": "pt"}},
		{"out of order",
			rawFile(`{"b":{"dtype":"I64","shape":[1],"data_offsets":[8,16]},"a":{"dtype":"U8","shape":[2,4],"data_offsets":[0,8]}}`, 16),
			[]string{"a", "b"}, []int64{0, 8}, map[string]string{}},
		{"scalar and zero-size",
			rawFile(`{"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]},"z":{"dtype":"F32","shape":[0,5],"data_offsets":[8,8]},"y":{"dtype":"F16","shape":[1],"data_offsets":[8,10]}}`, 10),
			[]string{"s", "z", "y"}, []int64{0, 8, 8}, map[string]string{}},
		{"sub-byte", rawFile(`{"q":{"dtype":"F4","shape":[4],"data_offsets":[0,2]}}`, 2), []string{"q"}, []int64{0}, map[string]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tensors, md, err := ReadHeader(bytes.NewReader(tc.file), int64(len(tc.file)))
			if err != nil {
				t.Fatal(err)
			}
			if len(tensors) != len(tc.names) {
				t.Fatalf("got %d tensors, want %d", len(tensors), len(tc.names))
			}
			dataStart := 8 + int64(binary.LittleEndian.Uint64(tc.file))
			for i, ti := range tensors {
				if ti.Name != tc.names[i] || ti.Offset != dataStart+tc.offsets[i] {
					t.Errorf("tensor %d: got %s@%d, want %s@%d", i, ti.Name, ti.Offset, tc.names[i], dataStart+tc.offsets[i])
				}
			}
			if len(md) != len(tc.metadata) {
				t.Errorf("metadata %v, want %v", md, tc.metadata)
			}
			for k, v := range tc.metadata {
				if md[k] != v {
					t.Errorf("metadata %v, want %v", md, tc.metadata)
				}
			}
		})
	}
}
