package octlm

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/octlm/octlm/loader"
)

// withLayout sets the pure-Go layout for the rest of the test.
func withLayout(t testing.TB, blocks, headRows int) {
	oldBlocks, oldRows := goLinearBlocks, goHeadRows
	goLinearBlocks, goHeadRows = blocks, headRows
	t.Cleanup(func() { goLinearBlocks, goHeadRows = oldBlocks, oldRows })
}

// TestLayouts holds every weight layout to the same parity as the default: Linear weights
// plain or in column blocks, the embedding in one block, in row blocks with zero rows past
// the vocabulary or as columns, on the full and token-by-token paths.
func TestLayouts(t *testing.T) {
	// Resident shapes in tiny-qwen3 (vocab 320, d 64, 4 heads over 2 kv heads of 32, MLP 96):
	// attention splits into at most 2 blocks (its kv heads), the MLP into divisors of 96.
	tests := []struct {
		blocks, headRows  int
		embed, qProj, o   []int
		gateProj, downPrj []int
	}{
		{1, 0, []int{1, 320, 64}, []int{1, 64, 128}, []int{1, 128, 64}, []int{1, 64, 96}, []int{1, 96, 64}},
		{2, 64, []int{5, 64, 64}, []int{2, 64, 64}, []int{2, 64, 64}, []int{2, 64, 48}, []int{2, 48, 64}},
		{4, 96, []int{4, 80, 64}, []int{2, 64, 64}, []int{2, 64, 64}, []int{4, 64, 24}, []int{4, 24, 64}}, // 16 zero rows
		{3, 300, []int{2, 160, 64}, []int{2, 64, 64}, []int{2, 64, 64}, []int{3, 64, 32}, []int{3, 32, 64}},
		{8, 1000, []int{1, 320, 64}, []int{2, 64, 64}, []int{2, 64, 64}, []int{8, 64, 12}, []int{8, 12, 64}},
		{1, headColumns, []int{64, 320}, []int{1, 64, 128}, []int{1, 128, 64}, []int{1, 64, 96}, []int{1, 96, 64}},
		{2, headColumns, []int{64, 320}, []int{2, 64, 64}, []int{2, 64, 64}, []int{2, 64, 48}, []int{2, 48, 64}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("blocks=%d,headRows=%d", tt.blocks, tt.headRows), func(t *testing.T) {
			withLayout(t, tt.blocks, tt.headRows)
			if tt.headRows == headColumns {
				old := columnRows
				columnRows = 96 // 320 rows load in four pieces, the last one short
				t.Cleanup(func() { columnRows = old })
			}
			for _, name := range fixtures {
				m := loadFixture(t, name, Float32)
				if name == "tiny-qwen3" {
					for _, w := range []struct {
						index int
						want  []int
					}{{0, tt.embed}, {3, tt.qProj}, {6, tt.o}, {10, tt.gateProj}, {12, tt.downPrj}} {
						if got := m.weights[w.index].Shape().Dimensions; !slices.Equal(got, w.want) {
							t.Errorf("%s resident as %v, want %v", m.specs[w.index].Name, got, w.want)
						}
					}
				}
				if name == "tiny-qwen3-untied" { // lm_head.weight in the tied head's layout
					if head, embed := m.weights[len(m.weights)-1].Shape().Dimensions, m.weights[0].Shape().Dimensions; !slices.Equal(head, embed) {
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
// in padded row blocks (the check must compare the real rows only) and as columns (it must
// compare each value with its transposed place).
func TestTiedHead(t *testing.T) {
	for _, headRows := range []int{96, headColumns} {
		t.Run(fmt.Sprintf("headRows=%d", headRows), func(t *testing.T) {
			withLayout(t, 4, headRows)
			testTiedHead(t)
		})
	}
}

func testTiedHead(t *testing.T) {
	ref := readReference(t, "tiny-qwen3")[1]
	byName := func(ts []loader.WriteTensor, name string) int {
		return slices.IndexFunc(ts, func(w loader.WriteTensor) bool { return w.Name == name })
	}
	tests := []struct {
		name    string
		edit    func([]loader.WriteTensor) []loader.WriteTensor
		wantErr string
	}{
		{"both copies equal", func(ts []loader.WriteTensor) []loader.WriteTensor { return ts }, ""},
		{"head only", func(ts []loader.WriteTensor) []loader.WriteTensor {
			return slices.Delete(ts, byName(ts, EmbeddingName), byName(ts, EmbeddingName)+1)
		}, ""},
		{"embedding only", func(ts []loader.WriteTensor) []loader.WriteTensor {
			return slices.Delete(ts, byName(ts, TiedHeadName), byName(ts, TiedHeadName)+1)
		}, ""},
		{"head differs in its last value", func(ts []loader.WriteTensor) []loader.WriteTensor {
			h := ts[byName(ts, TiedHeadName)]
			h.Data = slices.Clone(h.Data)
			h.Data[len(h.Data)-1] ^= 0x40
			ts[byName(ts, TiedHeadName)] = h
			return ts
		}, "tied weights differ"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Load(rewriteFixture(t, "tiny-qwen3", tt.edit), LoadOptions{Backend: goBackend(t)})
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
	old := minMatMulMACs
	// tiny-qwen3's smallest weights (k_proj, v_proj: 64×64) pad to 16 rows, q_proj and o_proj
	// (64×128) to 8, the MLP (64×96) to 11, the head (64×320) to 4.
	minMatMulMACs = 16 * 64 * 64
	t.Cleanup(func() { minMatMulMACs = old })
	withLayout(t, 1, headColumns)
	for _, name := range fixtures {
		m := loadFixture(t, name, Float32)
		ref := readReference(t, name)[0]
		steps, err := tokenByToken(m, ref.ids)
		if err != nil {
			t.Fatal(err)
		}
		checkParity(t, name, 0, map[string]Logits{"token-by-token": steps}, ref)
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
