package octlm

import (
	"slices"
	"testing"

	"github.com/gomlx/compute"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/xla"
)

// TestFusedProjections loads tiny-qwen3 with q/k/v and gate/up fused into one resident weight
// each, from checkpoints edited so that the parts arrive out of order, one is missing or one
// is mis-shaped: the first passes parity, the others are errors naming the tensor. On the
// pure-Go backend the fused weight is filled in place; on ONNX Runtime (where its library is
// found) in host memory and uploaded when its last part is in.
func TestFusedProjections(t *testing.T) {
	t.Parallel()
	ref := readReference(t, "tiny-qwen3")[1]
	const q, k, v = "model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight", "model.layers.1.self_attn.v_proj.weight"
	const up = "model.layers.0.mlp.up_proj.weight"
	tests := []struct {
		name    string
		edit    func([]loader.WriteTensor) []loader.WriteTensor
		wantErr string // "" loads and passes parity
	}{
		{"parts in reverse order, apart", func(ts []loader.WriteTensor) []loader.WriteTensor {
			iq, iv := tensorIndex(ts, q), tensorIndex(ts, v)
			ts[iq], ts[iv] = ts[iv], ts[iq]
			last := ts[tensorIndex(ts, k)] // k last of all
			ts = withoutTensor(ts, k)
			return append(ts, last)
		}, ""},
		{"k_proj missing", func(ts []loader.WriteTensor) []loader.WriteTensor {
			return withoutTensor(ts, k)
		}, `missing checkpoint tensor "` + k + `"`},
		{"up_proj one row short", func(ts []loader.WriteTensor) []loader.WriteTensor {
			return oneRowShort(ts, up)
		}, `"` + up + `": shape [95 64] does not match the config's [96 64]`},
	}
	engines := []struct {
		name    string
		backend func(testing.TB) compute.Backend
		layout  Layout
	}{
		{"go", goBackend, Layout{TableColumns: true, PadMACs: goPadMACs, FuseProjections: true}},
		{"onnx", onnxBackend, Layout{TableColumns: true, TableBlocks: 2, EmbedSlices: true, FuseProjections: true}},
		{"onnx, linear rows", onnxBackend, Layout{TableColumns: true, TableBlocks: 2, EmbedSlices: true, FuseProjections: true, LinearRows: true}},
	}
	for _, engine := range engines {
		for _, tt := range tests {
			t.Run(engine.name+"/"+tt.name, func(t *testing.T) {
				opts := LoadOptions{Backend: engine.backend(t), Layout: &engine.layout}
				m := loadEdited(t, "tiny-qwen3", tt.edit, opts, tt.wantErr, ref)
				if m == nil {
					return
				}
				want := []int{64, 128 + 2*64}
				if engine.layout.LinearRows {
					want = []int{128 + 2*64, 64}
				}
				if got := m.residentDims("model.layers.1.self_attn.qkv"); !slices.Equal(got, want) {
					t.Errorf("q/k/v resident as %v, want %v", got, want)
				}
			})
		}
	}
}

// TestQwen35Fused runs the Qwen3.5 fixtures with their projections fused (the DeltaNet's
// in_proj_qkv/z/b/a, the gated attention's q/k/v, the MLP's gate/up), on the pure-Go backend
// and in ONNX Runtime's layout on its engine where found, full path against the reference.
func TestQwen35Fused(t *testing.T) {
	t.Parallel()
	engines := []struct {
		name    string
		backend func(testing.TB) compute.Backend
		layout  Layout
	}{
		{"go", goBackend, Layout{TableColumns: true, PadMACs: goPadMACs, FuseProjections: true}},
		{"onnx", onnxBackend, LayoutFor(xla.EngineONNX)},
	}
	for _, engine := range engines {
		t.Run(engine.name, func(t *testing.T) {
			backend := engine.backend(t)
			for _, name := range qwen35Fixtures {
				m := loadLayoutOn(t, backend, name, engine.layout)
				fused := 0
				for _, s := range m.specs {
					if len(s.Parts) > 0 {
						fused++
					}
				}
				if want := 2 * m.Shape().Layers; fused != want { // every layer: its mixer's inputs and gate/up
					t.Errorf("%s: %d fused weights, want %d", name, fused, want)
				}
				for n, ref := range readReference(t, name) {
					got, err := m.Forward(ref.ids)
					if err != nil {
						t.Fatal(err)
					}
					if e := maxAbsError(t, got, ref.logits); e > qwen35Gate {
						t.Errorf("%s case %d: max abs error %.3g > %g", name, n, e, qwen35Gate)
					}
				}
			}
		})
	}
}
