package octlm

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/xla"
)

// loadLayout loads a fixture in float32 with the given layout.
func loadLayout(t testing.TB, name string, layout Layout) *Model {
	t.Helper()
	return loadLayoutOn(t, goBackend(t), name, layout)
}

// loadLayoutOn is loadLayout on the given backend.
func loadLayoutOn(t testing.TB, backend compute.Backend, name string, layout Layout) *Model {
	t.Helper()
	m, err := Load(fixtureDir(name), LoadOptions{Backend: backend, Layout: &layout})
	if err != nil {
		t.Fatalf("loading %s: %v", name, err)
	}
	t.Cleanup(m.Close)
	return m
}

var (
	onnxOnce    sync.Once
	onnxTest    compute.Backend
	onnxOpenErr error
)

// onnxBackend is ONNX Runtime, or skips the test where its library is not found.
func onnxBackend(t testing.TB) compute.Backend {
	t.Helper()
	onnxOnce.Do(func() {
		if _, _, err := xla.DefaultPlaces().FindONNX(); err != nil {
			onnxOpenErr = err
			return
		}
		onnxTest, _, onnxOpenErr = xla.Open("onnx")
	})
	if onnxTest == nil {
		t.Skipf("ONNX Runtime: %v (install it with: %s)", onnxOpenErr, xla.ONNXInstallCommand)
	}
	return onnxTest
}

// residentDims is the resident shape of the weight named name.
func (m *Model) residentDims(name string) []int {
	for i, s := range m.specs {
		if s.Name == name {
			return m.weights[i].Shape().Dimensions
		}
	}
	return nil
}

// TestLayouts holds every engine's layout to the same parity: the table as rows (one gather,
// or one slice per token) or as columns (loaded a few rows at a time), products padded or not,
// on the full and token-by-token paths.
func TestLayouts(t *testing.T) {
	t.Parallel()
	// Resident shapes in tiny-qwen3 (vocab 320, d 64, 4 heads over 2 kv heads of 32, MLP 96).
	rows, columns := []int{320, 64}, []int{64, 320}
	tests := []struct {
		name   string
		layout Layout
		embed  []int
		onnx   bool // on ONNX Runtime (skipped where its library is not found): the pure-Go backend has no DynamicSlice
	}{
		{"xla", LayoutFor(xla.EngineXLA), rows, false},
		{"rows, unpadded", Layout{}, rows, false},
		{"rows, slices", Layout{EmbedSlices: true}, rows, true},
		{"go", LayoutFor(xla.EngineGo), rows, false},                                                    // tiny-qwen3 fits whole: no weight is split (TestLinearPieces splits them)
		{"go, 96 rows at a time, unpadded", Layout{TableColumns: true, ColumnRows: 96}, columns, false}, // 320 rows load in four pieces, the last one short
		// 320 tokens in 3 blocks of 107 (the last padded by one column), loaded 96 rows at a
		// time so that pieces straddle blocks; looked up by one gather, then by slices.
		{"columns in 3 blocks", Layout{TableColumns: true, TableBlocks: 3, ColumnRows: 96}, []int{3, 64, 107}, false},
		{"columns in 3 blocks, slices, padded rows", Layout{TableColumns: true, TableBlocks: 3, EmbedSlices: true, PadMACs: 16 * 64 * 64}, []int{3, 64, 107}, true},
		{"onnx", LayoutFor(xla.EngineONNX), LayoutFor(xla.EngineONNX).tableShape(320, 64), true},
		{"go, fused projections", Layout{TableColumns: true, PadMACs: goPadMACs, FuseProjections: true}, columns, false},
		{"rows, fused projections", Layout{FuseProjections: true}, rows, false},
		// Linear weights as stored, several rows multiplied weight-first (ops.linear).
		{"go, linear rows, fused projections", Layout{TableColumns: true, PadMACs: goPadMACs, FuseProjections: true, LinearRows: true}, columns, false},
		{"linear rows", Layout{LinearRows: true}, rows, false},
		// 320 tokens as rows in 3 blocks of 107 (the last padded by one row).
		{"rows in 3 blocks, linear rows", Layout{TableBlocks: 3, LinearRows: true}, []int{3, 107, 64}, false},
		{"rows in 3 blocks, slices, fused, linear rows", Layout{TableBlocks: 3, EmbedSlices: true, FuseProjections: true, LinearRows: true}, []int{3, 107, 64}, true},
		// The embeddings looked up on the host, in each table layout (both backends share
		// their buffers with Go, so Load keeps HostEmbed).
		{"rows, host lookup", Layout{HostEmbed: true}, rows, false},
		{"go, host lookup", Layout{TableColumns: true, PadMACs: goPadMACs, HostEmbed: true}, columns, false},
		{"columns in 3 blocks, host lookup", Layout{TableColumns: true, TableBlocks: 3, ColumnRows: 96, HostEmbed: true}, []int{3, 64, 107}, false},
		{"rows in 3 blocks, host lookup, fused, linear rows", Layout{TableBlocks: 3, HostEmbed: true, FuseProjections: true, LinearRows: true}, []int{3, 107, 64}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			backend := goBackend(t)
			if tt.onnx {
				backend = onnxBackend(t)
			}
			for _, name := range fixtures {
				m := loadLayoutOn(t, backend, name, tt.layout)
				if m.layout.HostEmbed != tt.layout.HostEmbed {
					t.Errorf("loaded with HostEmbed %v, want %v", m.layout.HostEmbed, tt.layout.HostEmbed)
				}
				if name == "tiny-qwen3" {
					// A Linear weight in → out is resident [in, out], or [out, in] as stored.
					linear := func(in, out int) []int {
						if tt.layout.LinearRows {
							return []int{out, in}
						}
						return []int{in, out}
					}
					for _, w := range []struct {
						name string
						want []int
					}{
						{EmbeddingName, tt.embed},
						{"model.layers.0.self_attn.o_proj.weight", linear(128, 64)},
						{"model.layers.0.mlp.down_proj.weight", linear(96, 64)},
					} {
						if got := m.residentDims(w.name); !slices.Equal(got, w.want) {
							t.Errorf("%s resident as %v, want %v", w.name, got, w.want)
						}
					}
					// q/k/v and gate/up: one weight each where the layout fuses them.
					fusedDims := map[string][]int{"model.layers.0.self_attn.q_proj.weight": linear(64, 128),
						"model.layers.0.self_attn.qkv": nil, "model.layers.0.mlp.gate_proj.weight": linear(64, 96), "model.layers.0.mlp.gate_up": nil}
					if tt.layout.FuseProjections {
						fusedDims = map[string][]int{"model.layers.0.self_attn.q_proj.weight": nil,
							"model.layers.0.self_attn.qkv": linear(64, 128+2*64), "model.layers.0.mlp.gate_proj.weight": nil, "model.layers.0.mlp.gate_up": linear(64, 2*96)}
					}
					for name, want := range fusedDims {
						if got := m.residentDims(name); !slices.Equal(got, want) {
							t.Errorf("%s resident as %v, want %v", name, got, want)
						}
					}
				}
				if name == "tiny-qwen3-untied" { // lm_head.weight in the tied head's layout
					if head, embed := m.residentDims(TiedHeadName), m.residentDims(EmbeddingName); !slices.Equal(head, embed) {
						t.Errorf("lm_head.weight resident as %v, the embedding as %v", head, embed)
					}
				}
				for n, ref := range readReference(t, name) {
					full, err := m.Forward(ref.ids)
					if err != nil {
						t.Fatal(err)
					}
					results := map[string]Logits{"full": full}
					if len(ref.ids) > 64 { // long cases: the full path only, to keep the test short
						checkParity(t, name, n, results, ref)
						continue
					}
					steps, err := tokenByToken(m, ref.ids)
					if err != nil {
						t.Fatal(err)
					}
					results["token-by-token"] = steps
					checkParity(t, name, n, results, ref)
				}
			}
		})
	}
}

func checkParity(t *testing.T, name string, n int, results map[string]Logits, ref referenceCase) {
	t.Helper()
	for path, got := range results {
		if worst := maxAbsError(t, got, ref.logits); worst > 1e-4 {
			t.Errorf("%s case %d %s: max abs error %.3g > 1e-4", name, n, path, worst)
		}
	}
}

// tensorIndex is the index of the tensor named name in ts, or -1.
func tensorIndex(ts []loader.WriteTensor, name string) int {
	return slices.IndexFunc(ts, func(w loader.WriteTensor) bool { return w.Name == name })
}

// withoutTensor is ts without the tensor named name.
func withoutTensor(ts []loader.WriteTensor, name string) []loader.WriteTensor {
	i := tensorIndex(ts, name)
	return slices.Delete(ts, i, i+1)
}

// oneRowShort is ts with the [rows, in] tensor named name cut to its first rows − 1 rows.
func oneRowShort(ts []loader.WriteTensor, name string) []loader.WriteTensor {
	w := &ts[tensorIndex(ts, name)]
	w.Data = w.Data[:len(w.Data)-len(w.Data)/w.Shape[0]]
	w.Shape = []int{w.Shape[0] - 1, w.Shape[1]}
	return ts
}

// rewriteFixture writes a copy of a fixture's checkpoint (single file or shards) as one
// model.safetensors with edit applied to its tensors.
func rewriteFixture(t *testing.T, name string, edit func([]loader.WriteTensor) []loader.WriteTensor) string {
	t.Helper()
	src := fixtureDir(name)
	ckpt, err := loader.OpenCheckpoint(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ckpt.Close()
	var ts []loader.WriteTensor
	for e, err := range ckpt.Tensors() {
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, e.Info.Size)
		if err := e.File.ReadRaw(e.Info, data); err != nil {
			t.Fatal(err)
		}
		ts = append(ts, loader.WriteTensor{Name: e.Info.Name, DType: e.Info.DType, Shape: e.Info.Shape, Data: data})
	}
	dir := t.TempDir()
	config, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), config, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := loader.WriteFile(filepath.Join(dir, "model.safetensors"), edit(ts), nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestTiedHead checks the stored copy of the tied output head: equal bytes load, either copy
// alone loads, a copy that differs by one value is refused with both names; with the embedding
// as rows and as columns (the check must compare each value with its transposed place).
// loadEdited loads fixture as edit rewrites it, with opts. With wantErr set the load must fail
// with an error containing it, and nil is returned; otherwise the model (closed when the test
// ends) must reproduce ref's logits on the full path within 1e-4.
func loadEdited(t *testing.T, fixture string, edit func([]loader.WriteTensor) []loader.WriteTensor, opts LoadOptions, wantErr string, ref referenceCase) *Model {
	t.Helper()
	m, err := Load(rewriteFixture(t, fixture, edit), opts)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("got error %v, want one containing %q", err, wantErr)
		}
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	got, err := m.Forward(ref.ids)
	if err != nil {
		t.Fatal(err)
	}
	if worst := maxAbsError(t, got, ref.logits); worst > 1e-4 {
		t.Fatalf("max abs error %.3g", worst)
	}
	return m
}

func TestTiedHead(t *testing.T) {
	t.Parallel()
	for _, layout := range []Layout{{}, {TableColumns: true}, {TableColumns: true, TableBlocks: 3}, piecesLayout()} {
		t.Run(fmt.Sprintf("columns=%v,blocks=%d,pieces=%v", layout.TableColumns, layout.TableBlocks, layout.PieceMACs > 0), func(t *testing.T) {
			t.Parallel()
			testTiedHead(t, layout)
		})
	}
}

func testTiedHead(t *testing.T, layout Layout) {
	ref := readReference(t, "tiny-qwen3")[1]
	tests := []struct {
		name    string
		edit    func([]loader.WriteTensor) []loader.WriteTensor
		wantErr string
	}{
		{"both copies equal", func(ts []loader.WriteTensor) []loader.WriteTensor { return ts }, ""},
		{"head only", func(ts []loader.WriteTensor) []loader.WriteTensor {
			return withoutTensor(ts, EmbeddingName)
		}, ""},
		{"embedding only", func(ts []loader.WriteTensor) []loader.WriteTensor {
			return withoutTensor(ts, TiedHeadName)
		}, ""},
		{"head stored as F32, the same values", func(ts []loader.WriteTensor) []loader.WriteTensor {
			// Not the same bytes: the copies are compared value by value, resident element by
			// checkpoint element (rows, columns, blocks, pieces or panels).
			i := tensorIndex(ts, TiedHeadName)
			h := ts[i]
			if h.DType != loader.BF16 {
				panic(fmt.Sprintf("%s is %s, want BF16", TiedHeadName, h.DType))
			}
			wide := make([]byte, 0, 2*len(h.Data))
			for j := 0; j < len(h.Data); j += 2 {
				wide = binary.LittleEndian.AppendUint32(wide, uint32(binary.LittleEndian.Uint16(h.Data[j:]))<<16)
			}
			h.DType, h.Data = loader.F32, wide
			ts[i] = h
			return ts
		}, ""},
		{"head differs in its last value", func(ts []loader.WriteTensor) []loader.WriteTensor {
			h := ts[tensorIndex(ts, TiedHeadName)]
			h.Data = slices.Clone(h.Data)
			h.Data[len(h.Data)-1] ^= 0x40
			ts[tensorIndex(ts, TiedHeadName)] = h
			return ts
		}, "tied weights differ"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Load(rewriteFixture(t, "tiny-qwen3", tt.edit), LoadOptions{Backend: goBackend(t), Layout: &layout})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "lm_head.weight") && !strings.Contains(err.Error(), EmbeddingName) {
					t.Fatalf("got error %v, want one saying %q and naming the tensor", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			got, err := m.Forward(ref.ids)
			if err != nil {
				t.Fatal(err)
			}
			if worst := maxAbsError(t, got, ref.logits); worst > 1e-4 {
				t.Fatalf("max abs error %.3g", worst)
			}
		})
	}
}

// TestPadRows runs the fixtures with the product threshold lowered so that every Linear
// product and the head pad their rows (decode steps of one row become 16), and holds them to
// the parity of the unpadded graph.
func TestPadRows(t *testing.T) {
	t.Parallel()
	// tiny-qwen3's smallest weights (k_proj, v_proj: 64×64) pad to 16 rows, q_proj and o_proj
	// (64×128) to 8, the MLP (64×96) to 11, the head (64×320) to 4.
	layout := Layout{TableColumns: true, PadMACs: 16 * 64 * 64}
	for _, name := range fixtures {
		m := loadLayout(t, name, layout)
		ref := readReference(t, name)[0]
		steps, err := tokenByToken(m, ref.ids)
		if err != nil {
			t.Fatal(err)
		}
		checkParity(t, name, 0, map[string]Logits{"token-by-token": steps}, ref)
	}
}

// TestPadRowsCount checks how many rows ops.padRows gives a product: up to PadMACs
// multiply-adds and PadRows rows (the go layout: 8, so that the pure-Go backend's kernel splits
// a decode product over the cores), never past maxPadRows, and none without PadMACs.
func TestPadRowsCount(t *testing.T) {
	for _, tt := range []struct {
		name             string
		layout           Layout
		rows, weightSize int
		want             int
	}{
		{"go, one row, q_proj", goLayout, 1, 1024 * 2048, 8},
		{"go, one row, the head", goLayout, 1, 1024 * 151936, 8},
		{"go, 5 rows", goLayout, 5, 1024 * 1024, 8},
		{"go, 8 rows", goLayout, 8, 1024 * 1024, 8},
		{"go, 12 rows", goLayout, 12, 1024 * 1024, 12},
		{"go, a tiny model's weight", goLayout, 1, 64 * 64, 1},
		{"go, 16 rows wanted by the threshold", goLayout, 1, 512 * 512, 16},
		{"threshold alone", Layout{PadMACs: goPadMACs}, 1, 1024 * 2048, 2},
		{"threshold alone, large weight", Layout{PadMACs: goPadMACs}, 1, 1024 * 151936, 1},
		{"onnx", LayoutFor(xla.EngineONNX), 1, 1024 * 2048, 1},
	} {
		g := NewGraph(goBackend(t), "padRows")
		x := Parameter(g, "x", shapes.Make(dtypes.Float32, tt.rows, 16))
		got := ops{layout: tt.layout}.padRows(x, tt.weightSize).Shape().Dimensions[0]
		g.Finalize()
		if got != tt.want {
			t.Errorf("%s: %d rows padded to %d, want %d", tt.name, tt.rows, got, tt.want)
		}
	}
}

// TestTranspose32 checks the (vector) transpose against the definition, for sizes with and
// without whole 8×8 blocks and edges on either side, inside larger strided matrices.
func TestTranspose32(t *testing.T) {
	for _, sz := range [][2]int{{1, 1}, {3, 5}, {8, 8}, {9, 8}, {8, 13}, {17, 23}, {64, 64}, {70, 35}} {
		rows, cols := sz[0], sz[1]
		srcStride, dstStride := cols+3, rows+5
		src := make([]float32, rows*srcStride)
		for i := range src {
			src[i] = float32(i)
		}
		dst := make([]float32, cols*dstStride)
		for i := range dst {
			dst[i] = -1
		}
		transpose32(dst, dstStride, src, srcStride, rows, cols)
		for c := range cols {
			for r := range dstStride {
				want := float32(-1) // outside the matrix: untouched
				if r < rows {
					want = src[r*srcStride+c]
				}
				if got := dst[c*dstStride+r]; got != want {
					t.Fatalf("%d×%d: dst[%d][%d] = %v, want %v", rows, cols, c, r, got, want)
				}
			}
		}
	}
}
