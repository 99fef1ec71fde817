package octlm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm/synth"
	"github.com/octlm/octlm/xla"
)

// piecesLayout is the pure-Go engine's layout with pieces small enough for the tiny fixtures
// (hidden 64): at most 32 rows for a 64-wide input, sized for 8-row products, in panels of 16
// columns.
func piecesLayout() Layout {
	l := LayoutFor(xla.EngineGo)
	l.PieceMACs = 8*64*32 + 1
	l.PiecePanels = 16
	return l
}

// TestPieceSpecs checks the split of each Linear weight and table stored as rows: pieces of
// whole rows in order, every one within PieceMACs for PieceRows rows, all as high as the first
// (a multiple of 16) but the last, heights whose buffers the pure-Go backend does not round up
// (1 MiB for q's, 1.5 MiB for down's 128 columns of 3,072); other weights, Linear weights that
// fit and tables stored as columns stay whole.
func TestPieceSpecs(t *testing.T) {
	l := Layout{LinearRows: true, PieceMACs: 4 << 20, PieceRows: 8}
	specs := []weightSpec{
		{Name: "norm", Shape: []int{1024}, Kind: vectorWeight},
		{Name: "q", Shape: []int{2048, 1024}, Kind: linearWeight},
		{Name: "down", Shape: []int{1024, 3072}, Kind: linearWeight},
		{Name: "small", Shape: []int{64, 1024}, Kind: linearWeight},
		{Name: "odd", Shape: []int{1000, 1024}, Kind: linearWeight},
		{Name: "table", Shape: []int{151936, 1024}, Kind: tableWeight},
	}
	columns := l
	columns.TableColumns = true
	if got := columns.pieceSpecs(specs, Float32); !slices.ContainsFunc(got, func(s weightSpec) bool { return s.Name == "table" }) {
		t.Errorf("a table stored as columns was split")
	}
	got := l.pieceSpecs(specs, Float32)
	whole := map[string]bool{}
	rows := map[string]int{}
	for _, s := range got {
		if s.Of == "" {
			whole[s.Name] = true
			continue
		}
		in := s.Shape[1]
		if s.First != rows[s.Of] {
			t.Errorf("%s starts at row %d, want %d", s.Name, s.First, rows[s.Of])
		}
		if macs := l.PieceRows * s.Shape[0] * in; macs >= l.PieceMACs {
			t.Errorf("%s: %d rows × %v = %d MACs, want < %d", s.Name, l.PieceRows, s.Shape, macs, l.PieceMACs)
		}
		rows[s.Of] += s.Shape[0]
	}
	for _, name := range []string{"norm", "small"} {
		if !whole[name] {
			t.Errorf("%s was split", name)
		}
	}
	for _, s := range specs[1:] {
		if s.Name != "small" && rows[s.Name] != s.Shape[0] {
			t.Errorf("%s: pieces hold %d rows, want %d", s.Name, rows[s.Name], s.Shape[0])
		}
	}
	// In panels of 64 columns every piece but a weight's last is whole panels, resident
	// [n/64, in, 64]; a last piece of another height keeps the layout's form.
	panels := l
	panels.PiecePanels = 64
	for _, s := range panels.pieceSpecs(specs, Float32) {
		if s.Of == "" {
			continue
		}
		shape := s.residentShape(panels)
		if s.Shape[0]%64 == 0 {
			if want := []int{s.Shape[0] / 64, s.Shape[1], 64}; !slices.Equal(shape, want) {
				t.Errorf("%s: resident %v, want %v", s.Name, shape, want)
			}
			continue
		}
		if spec := specs[slices.IndexFunc(specs, func(w weightSpec) bool { return w.Name == s.Of })]; s.First+s.Shape[0] != spec.Shape[0] {
			t.Errorf("%s: %d rows, not whole panels, and not its weight's last piece", s.Name, s.Shape[0])
		}
		if !slices.Equal(shape, s.Shape) {
			t.Errorf("%s: resident %v, want %v as stored (LinearRows)", s.Name, shape, s.Shape)
		}
	}
	heights := func(of string) []int {
		var h []int
		for _, s := range got {
			if s.Of == of {
				h = append(h, s.Shape[0])
			}
		}
		return h
	}
	for _, tt := range []struct {
		of   string
		want []int
	}{{"q", []int{256, 256, 256, 256, 256, 256, 256, 256}}, {"down", []int{128, 128, 128, 128, 128, 128, 128, 128}},
		{"odd", []int{96, 96, 96, 96, 96, 96, 96, 96, 96, 96, 40}}} {
		if h := heights(tt.of); !slices.Equal(h, tt.want) {
			t.Errorf("%s: heights %v, want %v", tt.of, h, tt.want)
		}
	}
}

// TestLinearPieces runs tiny-qwen3 and tiny-qwen35 with every Linear weight in pieces of rows
// on the pure-Go backend: the full path (prompt rows, the large kernel per piece), the cached
// path split at the half, token by token (one row padded to four, the small kernel) and four
// sequences decoded together (four rows, the last ≡ 3 mod 4), each against the reference.
func TestLinearPieces(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		fixture string
		gate    float64 // what the fixture reaches with whole weights: 1e-4, and Qwen3.5's gate
		panels  int     // Layout.PiecePanels
	}{{"tiny-qwen3", 1e-4, 0}, {"tiny-qwen35", qwen35Gate, 0}, {"tiny-qwen3", 1e-4, 16}, {"tiny-qwen35", qwen35Gate, 16}} {
		fixture := tt.fixture
		t.Run(fmt.Sprintf("%s/panels=%d", fixture, tt.panels), func(t *testing.T) {
			t.Parallel()
			layout := piecesLayout()
			layout.PiecePanels = tt.panels
			m, err := Load(fixtureDir(fixture), LoadOptions{Backend: goBackend(t), Layout: &layout})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m.Close)
			if n := countPieces(m); n == 0 {
				t.Fatalf("no weight was split: the test runs nothing new")
			}
			if n := countPanels(m); (n == 0) != (tt.panels == 0) {
				t.Fatalf("%d pieces as panels with PiecePanels %d", n, tt.panels)
			}
			refs := readReference(t, fixture)
			for n, ref := range refs {
				results := map[string]Logits{}
				var err error
				if results["full"], err = m.Forward(ref.ids); err != nil {
					t.Fatal(err)
				}
				if results["token-by-token"], err = tokenByToken(m, ref.ids); err != nil {
					t.Fatal(err)
				}
				cache, err := m.NewCache(len(ref.ids))
				if err != nil {
					t.Fatal(err)
				}
				split := max(1, len(ref.ids)/2)
				first, err := m.ForwardCached(ref.ids[:split], cache)
				if err == nil && split < len(ref.ids) {
					var second Logits
					second, err = m.ForwardCached(ref.ids[split:], cache)
					first = concatLogits(first, second)
				}
				cache.Close()
				if err != nil {
					t.Fatal(err)
				}
				results["cached"] = first
				for path, got := range results {
					if worst := maxAbsError(t, got, ref.logits); worst > tt.gate {
						t.Errorf("case %d %s: max abs error %.3g > %g", n, path, worst, tt.gate)
					}
				}
				// 12 rows: products of two chunks of PieceRows rows or fewer (ops.smallPieces).
				const prefix = 12
				if len(ref.ids) >= prefix {
					got, err := m.Forward(ref.ids[:prefix])
					if err != nil {
						t.Fatal(err)
					}
					want := Logits{Rows: prefix, Vocab: ref.logits.Vocab, Data: ref.logits.Data[:prefix*ref.logits.Vocab]}
					if worst := maxAbsError(t, got, want); worst > tt.gate {
						t.Errorf("case %d, its first %d tokens: max abs error %.3g > %g", n, prefix, worst, tt.gate)
					}
				}
			}
			checkBatchDecode(t, m, refs, tt.gate)
		})
	}
}

// countPieces is how many resident weights of m are pieces of a Linear weight.
func countPieces(m *Model) int {
	n := 0
	for _, s := range m.specs {
		if s.Of != "" {
			n++
		}
	}
	return n
}

// countPanels is how many resident weights of m are Linear pieces as panels.
func countPanels(m *Model) int {
	n := 0
	for i, s := range m.specs {
		if s.panels(m.layout) && m.weights[i].Rank() == 3 {
			n++
		}
	}
	return n
}

// checkBatchDecode decodes four sequences together, the two longest reference cases in turn,
// one token each per step, for as many steps as the shorter has (at most 24), and checks each
// step's logits against the reference within gate.
func checkBatchDecode(t *testing.T, m *Model, refs []referenceCase, gate float64) {
	t.Helper()
	const batch = 4
	longest := slices.SortedFunc(slices.Values(refs), func(a, b referenceCase) int { return len(b.ids) - len(a.ids) })
	seqs := make([]referenceCase, batch)
	steps := 24
	for b := range seqs {
		seqs[b] = longest[b%min(2, len(longest))]
		steps = min(steps, len(seqs[b].ids))
	}
	caches := make([]*Cache, batch)
	for b := range caches {
		c, err := m.NewCache(steps)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		caches[b] = c
	}
	worst := 0.0
	for step := range steps {
		ids := make([][]int, batch)
		for b := range ids {
			ids[b] = []int{seqs[b].ids[step]}
		}
		next, err := m.NextBatch(ids, caches)
		if err != nil {
			t.Fatal(err)
		}
		for b, row := range next {
			for c, w := range seqs[b].logits.Row(step) {
				worst = max(worst, math.Abs(float64(row[c]-w)))
			}
		}
	}
	t.Logf("%d sequences decoded together, %d steps: max abs error %.3g", batch, steps, worst)
	if worst > gate {
		t.Errorf("%d sequences decoded together: max abs error %.3g > %g", batch, worst, gate)
	}
}

// TestPanelPieces multiplies rows by a weight W [80, 32] held as a piece of panels (its first
// 64 rows, [4, 32, 16]) and a piece of columns or of rows (the last 16, a height that is not a
// multiple of the panels' width keeps the layout's form), against x·Wᵀ on the host: one row and
// five (the small kernel, padded to 8), and 40 (a prompt's product, each piece whole).
func TestPanelPieces(t *testing.T) {
	t.Parallel()
	const n, in, width, split = 80, 32, 16, 64
	r := rand.New(rand.NewPCG(3, 4))
	w := make([]float32, n*in)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	panels := make([]float32, split*in) // [split/width, in, width]
	for q := range split / width {
		for k := range in {
			for j := range width {
				panels[(q*in+k)*width+j] = w[(q*width+j)*in+k]
			}
		}
	}
	last := func(columns bool) *tensors.Tensor {
		v := make([]float32, (n-split)*in)
		for j := range n - split {
			for k := range in {
				if columns {
					v[k*(n-split)+j] = w[(split+j)*in+k]
				} else {
					v[j*in+k] = w[(split+j)*in+k]
				}
			}
		}
		if columns {
			return tensors.FromFlatDataAndDimensions(v, in, n-split)
		}
		return tensors.FromFlatDataAndDimensions(v, n-split, in)
	}
	for _, host := range []int{0, xla.HostRows()} {
		testPanelPieces(t, host, w, panels, last, r)
	}
}

// testPanelPieces is TestPanelPieces with Layout.HostRows host: a product of that many rows or
// fewer must run in Go (internal/hostproduct), whose backend xla.Open gives.
func testPanelPieces(t *testing.T, host int, w, panels []float32, last func(columns bool) *tensors.Tensor, r *rand.Rand) {
	const n, in, width, split = 80, 32, 16, 64
	layout := piecesLayout()
	layout.PiecePanels = width
	layout.HostRows = host
	for _, columns := range []bool{true, false} {
		for _, rows := range []int{1, 3, 5, 40} {
			x := make([]float32, rows*in) // drawn here: the parallel subtests must not share r
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			t.Run(fmt.Sprintf("host=%d/columns=%v/rows=%d", host, columns, rows), func(t *testing.T) {
				t.Parallel()
				backend := ownHostBackend(t)
				exec, err := NewExec(backend, func(x, p, q *Node) *Node {
					return ops{layout: layout}.linearPieces(x, []*Node{p, q}, columns)
				})
				if err != nil {
					t.Fatal(err)
				}
				defer exec.Finalize()
				out, err := exec.Call(tensors.FromFlatDataAndDimensions(x, rows, in),
					tensors.FromFlatDataAndDimensions(panels, split/width, in, width), last(columns))
				if err != nil {
					t.Fatal(err)
				}
				if inGo := backend.ProductsRun() > 0; inGo != (rows <= host) {
					t.Errorf("a product ran in Go: %v, want %v", inGo, rows <= host)
				}
				got := tensors.MustCopyFlatData[float32](out[0])
				if len(got) != rows*n {
					t.Fatalf("got %v, want [%d %d]", out[0].Shape(), rows, n)
				}
				for i := range rows {
					for j := range n {
						want := 0.0
						for k := range in {
							want += float64(x[i*in+k]) * float64(w[j*in+k])
						}
						if math.Abs(float64(got[i*n+j])-want) > 1e-4*(1+math.Abs(want)) {
							t.Fatalf("row %d output %d: %g, want %g", i, j, got[i*n+j], want)
						}
					}
				}
			})
		}
	}
}

// TestHalfPieces decodes a synthetic model in bfloat16 with its Linear weights in pieces, one
// sequence and four together (the small kernel's half-precision products, rows ≡ 3 mod 4
// included, unspread), against the same model in float32 with whole weights.
func TestHalfPieces(t *testing.T) {
	t.Parallel()
	cfg := synth.QwenLike{VocabSize: 512, HiddenSize: 64, NumLayers: 2, NumHeads: 4, NumKVHeads: 2, HeadDim: 16,
		IntermediateSize: 128, MaxPositionEmbeddings: 512, RopeTheta: 1_000_000, RMSNormEps: 1e-6, EOSTokenID: 1}
	dir := synthModel(t, cfg, 7)
	const steps, batch = 12, 4
	ids := make([][]int, batch)
	for b := range ids {
		ids[b] = make([]int, steps)
		for i := range ids[b] {
			ids[b][i] = (i*977 + b*131 + 13) % cfg.VocabSize
		}
	}
	decode := func(dtype DType, layout *Layout, sequences int) [][]float32 {
		m, err := Load(dir, LoadOptions{Backend: goBackend(t), DType: dtype, Layout: layout})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if layout != nil && countPieces(m) == 0 {
			t.Fatalf("no weight was split")
		}
		caches := make([]*Cache, sequences)
		for b := range caches {
			if caches[b], err = m.NewCache(steps); err != nil {
				t.Fatal(err)
			}
			defer caches[b].Close()
		}
		var out [][]float32
		for i := range steps {
			step := make([][]int, sequences)
			for b := range step {
				step[b] = []int{ids[b][i]}
			}
			next, err := m.NextBatch(step, caches)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, next...)
		}
		return out
	}
	layout := piecesLayout()
	for _, sequences := range []int{1, batch} {
		want := decode(Float32, nil, sequences)
		got := decode(BFloat16, &layout, sequences)
		worst, agree := 0.0, 0
		for r := range want {
			for c, w := range want[r] {
				worst = max(worst, math.Abs(float64(got[r][c]-w)))
			}
			if Argmax(got[r]) == Argmax(want[r]) {
				agree++
			}
		}
		t.Logf("%d sequences: bfloat16 in pieces vs float32: max abs logit error %.3g, top-1 agreement %d/%d", sequences, worst, agree, len(want))
		if worst > 0.05 {
			t.Errorf("%d sequences: max abs logit error %.3g > 0.05", sequences, worst)
		}
	}
}

// TestPieceLoadErrors: a split weight missing from the checkpoint, or mis-shaped, is an error
// naming the checkpoint tensor, and nothing stays allocated.
func TestPieceLoadErrors(t *testing.T) {
	t.Parallel()
	const up = "model.layers.0.mlp.up_proj.weight"
	for _, tt := range []struct {
		name    string
		edit    func([]loader.WriteTensor) []loader.WriteTensor
		wantErr string
	}{
		{"missing", func(ts []loader.WriteTensor) []loader.WriteTensor {
			return withoutTensor(ts, up)
		}, `missing checkpoint tensor "` + up + `"`},
		{"one row short", func(ts []loader.WriteTensor) []loader.WriteTensor {
			return oneRowShort(ts, up)
		}, `"` + up + `": shape [95 64] does not match the config's [96 64]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			layout := piecesLayout()
			_, err := Load(rewriteFixture(t, "tiny-qwen3", tt.edit), LoadOptions{Backend: goBackend(t), Layout: &layout})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestGoBufferBytes: the sizes the pure-Go backend rounds a buffer up to, a power of two or one
// and a half times one.
func TestGoBufferBytes(t *testing.T) {
	for _, tt := range []struct{ n, want int }{
		{1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 6}, {6, 6}, {7, 8}, {9, 12}, {13, 16},
		{1 << 20, 1 << 20}, {352 * 4096, 3 << 19}, {496 * 4096, 2 << 20}, {3 << 19, 3 << 19},
	} {
		if got := goBufferBytes(tt.n); got != tt.want {
			t.Errorf("goBufferBytes(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}
