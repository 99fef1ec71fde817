package octlm

import (
	"math"
	"testing"

	"github.com/octlm/octlm/octlm/synth"
)

// TestHalfPromptPanels runs a bfloat16 prompt longer than the rows from which a prompt's
// products stop widening their rows one at a time (hostproduct's widenRows, 32) through a
// synthetic model whose Linear weights are pieces of 64-column panels, the shape the pure-Go
// engine's prompt products take (on a CPU with AVX512_BF16, hostproduct's VDPBF16PS kernels),
// and checks every position's logits against the same model in float32 with whole weights.
func TestHalfPromptPanels(t *testing.T) {
	t.Parallel()
	cfg := synth.QwenLike{VocabSize: 512, HiddenSize: 128, NumLayers: 2, NumHeads: 4, NumKVHeads: 2, HeadDim: 32,
		IntermediateSize: 256, MaxPositionEmbeddings: 512, RopeTheta: 1_000_000, RMSNormEps: 1e-6, EOSTokenID: 1}
	dir := synthModel(t, cfg, 9)
	ids := make([]int, 45)
	for i := range ids {
		ids[i] = (i*977 + 13) % cfg.VocabSize
	}
	forward := func(dtype DType, layout *Layout) Logits {
		m, err := Load(dir, LoadOptions{Backend: goBackend(t), DType: dtype, Layout: layout})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if layout != nil && countPieces(m) == 0 {
			t.Fatalf("no weight was split")
		}
		logits, err := m.Forward(ids)
		if err != nil {
			t.Fatal(err)
		}
		return logits
	}
	layout := piecesLayout()
	layout.PiecePanels = 64
	layout.PieceMACs = layout.PieceRows*cfg.HiddenSize*64 + 1 // q, k, v, gate and up in pieces of one panel
	want, got := forward(Float32, nil), forward(BFloat16, &layout)
	worst, agree := 0.0, 0
	for p := range ids {
		for c, w := range want.Row(p) {
			worst = max(worst, math.Abs(float64(got.Row(p)[c]-w)))
		}
		if Argmax(got.Row(p)) == Argmax(want.Row(p)) {
			agree++
		}
	}
	t.Logf("bfloat16 in 64-column panels vs float32: max abs logit error %.3g, top-1 agreement %d/%d", worst, agree, len(ids))
	if worst > 0.05 {
		t.Errorf("max abs logit error %.3g > 0.05", worst)
	}
	if agree*100 < 95*len(ids) {
		t.Errorf("top-1 agreement %d/%d < 95%%", agree, len(ids))
	}
}
