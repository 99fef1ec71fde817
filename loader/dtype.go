package loader

// DType is a safetensors element type, spelled as in the header ("BF16", "F32", ...).
type DType string

// The safetensors dtypes. Sub-byte types (F4, F6_*) are accepted by the header reader and
// counted in bits; only whole-byte types can be decoded.
const (
	BOOL   DType = "BOOL"
	F4     DType = "F4"
	F6E2M3 DType = "F6_E2M3"
	F6E3M2 DType = "F6_E3M2"
	U8     DType = "U8"
	I8     DType = "I8"
	F8E5M2 DType = "F8_E5M2"
	F8E4M3 DType = "F8_E4M3"
	F8E8M0 DType = "F8_E8M0"
	I16    DType = "I16"
	U16    DType = "U16"
	F16    DType = "F16"
	BF16   DType = "BF16"
	I32    DType = "I32"
	U32    DType = "U32"
	F32    DType = "F32"
	C64    DType = "C64"
	F64    DType = "F64"
	I64    DType = "I64"
	U64    DType = "U64"
)

// dtypeOrder lists the dtypes in the order of the Rust safetensors Dtype enum; the writer lays
// tensors out by descending rank, then by name, as safetensors does.
var dtypeOrder = []DType{BOOL, F4, F6E2M3, F6E3M2, U8, I8, F8E5M2, F8E4M3, F8E8M0, I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64}

var dtypeBits = map[DType]int{
	BOOL: 8, F4: 4, F6E2M3: 6, F6E3M2: 6, U8: 8, I8: 8, F8E5M2: 8, F8E4M3: 8, F8E8M0: 8,
	I16: 16, U16: 16, F16: 16, BF16: 16, I32: 32, U32: 32, F32: 32, C64: 64, F64: 64, I64: 64, U64: 64,
}

var dtypeRank = func() map[DType]int {
	m := make(map[DType]int, len(dtypeOrder))
	for i, d := range dtypeOrder {
		m[d] = i
	}
	return m
}()

// Valid reports whether d is a known safetensors dtype.
func (d DType) Valid() bool { _, ok := dtypeBits[d]; return ok }

// Bits is the size of one element in bits (4 for F4, 6 for F6_*), or 0 for an unknown dtype.
func (d DType) Bits() int { return dtypeBits[d] }

// Size is the size of one element in bytes; 0 for sub-byte and unknown dtypes.
func (d DType) Size() int {
	b := dtypeBits[d]
	if b%8 != 0 {
		return 0
	}
	return b / 8
}

// DTypes returns every known dtype in the safetensors enum order.
func DTypes() []DType { return append([]DType(nil), dtypeOrder...) }
