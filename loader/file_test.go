package loader

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func fixture(t testing.TB, parts ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{"..", "testdata"}, parts...)...)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return p
}

func TestOpenFixture(t *testing.T) {
	f, err := Open(fixture(t, "tiny-qwen3", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ts := f.Tensors()
	// 2 layers x 11 tensors + embed + norm + lm_head.
	if len(ts) != 25 {
		t.Fatalf("got %d tensors, want 25", len(ts))
	}
	for i := 1; i < len(ts); i++ {
		if ts[i].Offset != ts[i-1].Offset+ts[i-1].Size {
			t.Fatalf("tensors not contiguous in offset order at %s", ts[i].Name)
		}
	}
	emb, ok := f.Lookup("model.embed_tokens.weight")
	if !ok || emb.DType != BF16 || !slices.Equal(emb.Shape, []int{320, 64}) || emb.Size != 320*64*2 {
		t.Fatalf("embed: %+v %v", emb, ok)
	}
	head, _ := f.Lookup("lm_head.weight")
	a := make([]float32, emb.NumElements())
	b := make([]float32, head.NumElements())
	if err := f.ReadFloat32(emb, a); err != nil {
		t.Fatal(err)
	}
	if err := f.ReadFloat32(head, b); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, b) {
		t.Errorf("fixture lm_head.weight differs from the embedding")
	}
	// Compare the decoded values with a direct decode of the raw bytes.
	raw := make([]byte, emb.Size)
	if err := f.ReadRaw(emb, raw); err != nil {
		t.Fatal(err)
	}
	var nonzero int
	for i, v := range a {
		want := math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		if v != want {
			t.Fatalf("element %d: %v, want %v", i, v, want)
		}
		if v != 0 {
			nonzero++
		}
	}
	if nonzero < len(a)/2 {
		t.Errorf("only %d of %d embedding values are non-zero", nonzero, len(a))
	}
	if f.Metadata()["format"] != "pt" {
		t.Errorf("metadata %v", f.Metadata())
	}
}

func TestReadInt64Fixture(t *testing.T) {
	f, err := Open(fixture(t, "tiny-qwen3", "reference", "reference-logits-1.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ids, ok := f.Lookup("ids")
	if !ok || ids.DType != I64 {
		t.Fatalf("ids: %+v", ids)
	}
	got := make([]int64, ids.NumElements())
	if err := f.ReadInt64(ids, got); err != nil {
		t.Fatal(err)
	}
	for _, v := range got {
		if v < 0 || v >= 320 {
			t.Errorf("token id %d outside the vocabulary", v)
		}
	}
	logits, _ := f.Lookup("logits")
	if err := f.ReadFloat32(logits, make([]float32, logits.NumElements())); err != nil {
		t.Fatal(err)
	}
}

// le encodes values little-endian with put.
func le[T any](vals []T, size int, put func([]byte, T)) []byte {
	b := make([]byte, len(vals)*size)
	for i, v := range vals {
		put(b[i*size:], v)
	}
	return b
}

func TestReadConversions(t *testing.T) {
	floats := []float32{0, 1, -2.5, 0.15625, 65504, -1e-3, float32(math.Inf(1))}
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]float32, 3*chunkBytes/2+17) // several chunks: exercises the parallel path
	for i := range big {
		big[i] = float32(rng.NormFloat64())
	}
	bigBF16 := make([]uint16, len(big))
	for i, v := range big {
		bigBF16[i] = Float32ToBFloat16(v)
	}
	u16 := func(b []byte, v uint16) { binary.LittleEndian.PutUint16(b, v) }
	tensors := []WriteTensor{
		{"f32", F32, []int{7}, le(floats, 4, func(b []byte, v float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(v)) })},
		{"f64", F64, []int{7}, le(floats, 8, func(b []byte, v float32) { binary.LittleEndian.PutUint64(b, math.Float64bits(float64(v))) })},
		{"f16", F16, []int{7}, le(floats, 2, func(b []byte, v float32) { u16(b, Float32ToFloat16(v)) })},
		{"bf16", BF16, []int{1, 7}, le(floats, 2, func(b []byte, v float32) { u16(b, Float32ToBFloat16(v)) })},
		{"big", BF16, []int{len(big)}, le(bigBF16, 2, u16)},
		{"e4m3", F8E4M3, []int{4}, []byte{0x38, 0xb8, 0x7e, 0x01}},
		{"e5m2", F8E5M2, []int{3}, []byte{0x3c, 0xc0, 0x7c}},
		{"i64", I64, []int{3}, le([]int64{-1, 0, 1 << 40}, 8, func(b []byte, v int64) { binary.LittleEndian.PutUint64(b, uint64(v)) })},
		{"i32", I32, []int{3}, le([]int32{-7, 0, 7}, 4, func(b []byte, v int32) { binary.LittleEndian.PutUint32(b, uint32(v)) })},
		{"u8", U8, []int{3}, []byte{0, 200, 255}},
		{"i8", I8, []int{3}, []byte{0, 200, 255}},
		{"bool", BOOL, []int{2}, []byte{0, 1}},
		{"u64big", U64, []int{1}, le([]uint64{1 << 63}, 8, func(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) })},
	}
	path := filepath.Join(t.TempDir(), "conv.safetensors")
	if err := WriteFile(path, tensors, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	readF := func(name string) []float32 {
		t.Helper()
		ti, ok := f.Lookup(name)
		if !ok {
			t.Fatalf("%s missing", name)
		}
		out := make([]float32, ti.NumElements())
		if err := f.ReadFloat32(ti, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	readI := func(name string) []int64 {
		t.Helper()
		ti, _ := f.Lookup(name)
		out := make([]int64, ti.NumElements())
		if err := f.ReadInt64(ti, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := readF("f32"); !slices.Equal(got, floats) {
		t.Errorf("f32: %v", got)
	}
	if got := readF("f64"); !slices.Equal(got, floats) {
		t.Errorf("f64: %v", got)
	}
	wantF16 := []float32{0, 1, -2.5, 0.15625, 65504, -0.0010004044, float32(math.Inf(1))}
	if got := readF("f16"); !slices.Equal(got, wantF16) {
		t.Errorf("f16: %v, want %v", got, wantF16)
	}
	wantBF16 := []float32{0, 1, -2.5, 0.15625, 65536, -0.0009994507, float32(math.Inf(1))}
	if got := readF("bf16"); !slices.Equal(got, wantBF16) {
		t.Errorf("bf16: %v, want %v", got, wantBF16)
	}
	gotBig := readF("big")
	for i, v := range gotBig {
		if v != BFloat16ToFloat32(bigBF16[i]) {
			t.Fatalf("big[%d] = %v, want %v", i, v, BFloat16ToFloat32(bigBF16[i]))
		}
	}
	bti, _ := f.Lookup("big")
	rawBig := make([]uint16, bti.NumElements())
	if err := f.ReadBFloat16(bti, rawBig); err != nil || !slices.Equal(rawBig, bigBF16) {
		t.Errorf("ReadBFloat16 differs (err %v)", err)
	}
	if got := readF("e4m3"); !slices.Equal(got, []float32{1, -1, 448, 0.001953125}) {
		t.Errorf("e4m3: %v", got)
	}
	if got := readF("e5m2"); !slices.Equal(got, []float32{1, -2, float32(math.Inf(1))}) {
		t.Errorf("e5m2: %v", got)
	}
	if got := readI("i64"); !slices.Equal(got, []int64{-1, 0, 1 << 40}) {
		t.Errorf("i64: %v", got)
	}
	if got := readI("i32"); !slices.Equal(got, []int64{-7, 0, 7}) {
		t.Errorf("i32: %v", got)
	}
	if got := readI("u8"); !slices.Equal(got, []int64{0, 200, 255}) {
		t.Errorf("u8: %v", got)
	}
	if got := readI("i8"); !slices.Equal(got, []int64{0, -56, -1}) {
		t.Errorf("i8: %v", got)
	}
	if got := readI("bool"); !slices.Equal(got, []int64{0, 1}) {
		t.Errorf("bool: %v", got)
	}

	// Misuse is an error naming the file and tensor, never a panic.
	f32, _ := f.Lookup("f32")
	i64, _ := f.Lookup("i64")
	u64, _ := f.Lookup("u64big")
	other := f32
	other.Offset++
	errs := map[string]error{
		"short dst":        f.ReadFloat32(f32, make([]float32, 6)),
		"int as float":     f.ReadFloat32(i64, make([]float32, 3)),
		"float as int":     f.ReadInt64(f32, make([]int64, 7)),
		"u64 overflow":     f.ReadInt64(u64, make([]int64, 1)),
		"foreign tensor":   f.ReadRaw(other, make([]byte, 28)),
		"raw wrong size":   f.ReadRaw(f32, make([]byte, 27)),
		"bf16 of f32":      f.ReadBFloat16(f32, make([]uint16, 7)),
		"unknown in file":  f.ReadFloat32(TensorInfo{Name: "nope", DType: F32}, nil),
		"sub-byte decoded": f.ReadFloat32(TensorInfo{Name: "f32", DType: F4, Offset: f32.Offset, Size: f32.Size}, nil),
	}
	for name, err := range errs {
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: got %v, want an error naming %s", name, err, path)
		}
	}
}

func TestWriteFileLayout(t *testing.T) {
	// Layout follows the Rust safetensors writer: dtype rank descending, then name.
	tensors := []WriteTensor{
		{"b", U8, []int{1}, []byte{1}},
		{"a", U8, []int{1}, []byte{2}},
		{"z", F32, []int{1}, make([]byte, 4)},
		{"m", I64, []int{1}, make([]byte, 8)},
	}
	path := filepath.Join(t.TempDir(), "x.safetensors")
	if err := WriteFile(path, tensors, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(data)
	if (8+n)%8 != 0 {
		t.Errorf("data starts at %d, not a multiple of 8", 8+n)
	}
	if !bytes.HasPrefix(data[8:], []byte(`{"__metadata__":{"format":"pt"},"m":`)) {
		t.Errorf("header starts %q", data[8:48])
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	for _, ti := range f.Tensors() {
		names = append(names, ti.Name)
	}
	if want := []string{"m", "z", "a", "b"}; !slices.Equal(names, want) {
		t.Errorf("layout %v, want %v", names, want)
	}
	bad := [][]WriteTensor{
		{{"a", U8, []int{2}, []byte{1}}},                            // too little data
		{{"a", U8, []int{1}, []byte{1, 2}}},                         // too much
		{{"a", "X", []int{1}, []byte{1}}},                           // dtype
		{{"a", U8, []int{1}, []byte{1}}, {"a", U8, nil, []byte{1}}}, // duplicate
		{{"__metadata__", U8, []int{1}, []byte{1}}},                 // reserved
		{{"a", U8, []int{-1}, nil}},                                 // negative
	}
	for i, ts := range bad {
		p := filepath.Join(t.TempDir(), "bad.safetensors")
		if err := WriteFile(p, ts, nil); err == nil {
			t.Errorf("case %d: WriteFile accepted %+v", i, ts)
		}
		if _, err := os.Stat(p); err == nil {
			t.Errorf("case %d: a failed write left %s behind", i, p)
		}
	}
}

// TestRewriteFixture reads every tensor of the tiny fixture and writes it back: the writer's
// header must be the same length (the Hub's layout and padding) and the data identical.
func TestRewriteFixture(t *testing.T) {
	src := fixture(t, "tiny-qwen3", "model.safetensors")
	f, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ws []WriteTensor
	for _, ti := range f.Tensors() {
		b := make([]byte, ti.Size)
		if err := f.ReadRaw(ti, b); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, WriteTensor{ti.Name, ti.DType, ti.Shape, b})
	}
	out := filepath.Join(t.TempDir(), "model.safetensors")
	if err := WriteFile(out, ws, f.Metadata()); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(src)
	b, _ := os.ReadFile(out)
	if len(a) != len(b) {
		t.Fatalf("rewritten size %d, fixture %d", len(b), len(a))
	}
	start := 8 + binary.LittleEndian.Uint64(a)
	if !bytes.Equal(a[start:], b[start:]) {
		t.Errorf("tensor data differs after a rewrite")
	}
}

func TestFloat16Exhaustive(t *testing.T) {
	for h := range 1 << 16 {
		f := Float16ToFloat32(uint16(h))
		back := Float32ToFloat16(f)
		if math.IsNaN(float64(f)) {
			if back&0x7c00 != 0x7c00 || back&0x3ff == 0 {
				t.Fatalf("NaN %#04x came back as %#04x", h, back)
			}
			continue
		}
		if back != uint16(h) {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, back)
		}
	}
}

// TestFloat32ToFloat16Rounding compares against a nearest-value search over all halves.
func TestFloat32ToFloat16Rounding(t *testing.T) {
	pos := make([]float64, 0x7c00) // finite non-negative halves, increasing with the bits
	for h := range pos {
		pos[h] = float64(Float16ToFloat32(uint16(h)))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	cases := []float32{65519.99, 65520, 1 + 1.0/2048, 1 + 3.0/2048, 2.9802322e-08, 2.9802326e-08, 5.9604645e-08}
	for range 20000 {
		cases = append(cases, float32(math.Ldexp(rng.Float64(), rng.IntN(44)-28)))
	}
	for _, f := range cases {
		got := Float32ToFloat16(f)
		var want uint16
		x := float64(f)
		if x >= 65520 {
			want = 0x7c00
		} else {
			i, _ := slices.BinarySearch(pos, x) // first >= x
			switch {
			case i < len(pos) && pos[i] == x:
				want = uint16(i)
			case i == len(pos):
				want = 0x7bff
			default:
				lo, hi := pos[i-1], pos[i]
				switch {
				case x-lo < hi-x:
					want = uint16(i - 1)
				case x-lo > hi-x:
					want = uint16(i)
				case (i-1)%2 == 0:
					want = uint16(i - 1)
				default:
					want = uint16(i)
				}
			}
		}
		if got != want {
			t.Fatalf("Float32ToFloat16(%g) = %#04x, want %#04x", f, got, want)
		}
	}
}

func TestFloat32ToBFloat16(t *testing.T) {
	tests := []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0x3f808000, 0x3f80}, // tie, even stays
		{0x3f818000, 0x3f82}, // tie, odd rounds up
		{0x3f808001, 0x3f81}, // above tie
		{0x3f807fff, 0x3f80}, // below tie
		{0xbf808001, 0xbf81}, // sign kept
		{0x7f7fffff, 0x7f80}, // max float32 overflows to +Inf
		{0x7f800000, 0x7f80}, // +Inf
		{0x7f800001, 0x7fc0}, // signalling NaN is quieted, stays NaN
		{0xffc00000, 0xffc0}, // -NaN
		{0x00000001, 0x0000}, // tiny subnormal rounds to 0
		{0x80000000, 0x8000}, // -0
	}
	for _, tc := range tests {
		if got := Float32ToBFloat16(math.Float32frombits(tc.in)); got != tc.want {
			t.Errorf("Float32ToBFloat16(%#08x) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
	for h := range 1 << 16 {
		f := BFloat16ToFloat32(uint16(h))
		if !math.IsNaN(float64(f)) && Float32ToBFloat16(f) != uint16(h) {
			t.Fatalf("bf16 %#04x does not round-trip", h)
		}
	}
}

// TestReadFloat32Range reads pieces of a BF16 tensor of several chunks (the parallel path) and
// of a small F32 one, each against the whole tensor read at once, and refuses ranges outside.
func TestReadFloat32Range(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	big := make([]uint16, 5*chunkBytes/4+33)
	for i := range big {
		big[i] = Float32ToBFloat16(float32(rng.NormFloat64()))
	}
	small := []float32{1, 2, 3, 4, 5}
	path := filepath.Join(t.TempDir(), "range.safetensors")
	if err := WriteFile(path, []WriteTensor{
		{"big", BF16, []int{len(big)}, le(big, 2, func(b []byte, v uint16) { binary.LittleEndian.PutUint16(b, v) })},
		{"small", F32, []int{5}, le(small, 4, func(b []byte, v float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(v)) })},
	}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tests := []struct {
		name         string
		first, count int
		wantErr      bool
	}{
		{"big", 0, len(big), false},
		{"big", 1, chunkBytes, false}, // odd start, crosses chunk boundaries
		{"big", len(big) - 7, 7, false},
		{"big", len(big), 0, false},
		{"big", len(big) - 7, 8, true},
		{"big", -1, 2, true},
		{"small", 2, 3, false},
		{"small", 5, 1, true},
	}
	for _, tt := range tests {
		ti, _ := f.Lookup(tt.name)
		whole := make([]float32, ti.NumElements())
		if err := f.ReadFloat32(ti, whole); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, tt.count)
		err := f.ReadFloat32Range(ti, tt.first, got)
		if tt.wantErr {
			if err == nil || !strings.Contains(err.Error(), tt.name) {
				t.Errorf("%s[%d:+%d]: got error %v, want one naming the tensor", tt.name, tt.first, tt.count, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s[%d:+%d]: %v", tt.name, tt.first, tt.count, err)
		}
		if !slices.Equal(got, whole[tt.first:tt.first+tt.count]) {
			t.Errorf("%s[%d:+%d]: values differ from the whole read", tt.name, tt.first, tt.count)
		}
	}
}
