package octlm

import (
	"slices"
	"testing"

	"github.com/octlm/octlm/loader"
)

// TestUntiedHead loads tiny-qwen3-untied (tie_word_embeddings false) with its lm_head.weight
// edited: the head is required, must have shape [vocab, hidden], and is what the logits are
// computed from.
func TestUntiedHead(t *testing.T) {
	t.Parallel()
	ref := readReference(t, "tiny-qwen3-untied")[1]
	tests := []struct {
		name    string
		edit    func([]loader.WriteTensor) []loader.WriteTensor
		wantErr string // "" loads and passes parity
	}{
		{"as stored, in one file", func(ts []loader.WriteTensor) []loader.WriteTensor { return ts }, ""},
		{"head missing", func(ts []loader.WriteTensor) []loader.WriteTensor {
			return withoutTensor(ts, TiedHeadName)
		}, `missing checkpoint tensor "lm_head.weight"`},
		{"head transposed", func(ts []loader.WriteTensor) []loader.WriteTensor {
			h := &ts[tensorIndex(ts, TiedHeadName)]
			h.Shape = []int{h.Shape[1], h.Shape[0]}
			return ts
		}, `"lm_head.weight": shape [64 512] does not match the config's [512 64]`},
		{"head one row short", func(ts []loader.WriteTensor) []loader.WriteTensor {
			h := &ts[tensorIndex(ts, TiedHeadName)]
			h.Shape = []int{h.Shape[0] - 1, h.Shape[1]}
			h.Data = h.Data[:len(h.Data)-2*h.Shape[1]]
			return ts
		}, `"lm_head.weight": shape [511 64] does not match the config's [512 64]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loadEdited(t, "tiny-qwen3-untied", tt.edit, LoadOptions{Backend: goBackend(t)}, tt.wantErr, ref)
		})
	}
}

// TestUntiedHeadIsUsed shows the logits come from lm_head.weight, not the embedding: reading
// the untied fixture's head as tied fails the parity gate, and so does a perturbed head.
func TestUntiedHeadIsUsed(t *testing.T) {
	ref := readReference(t, "tiny-qwen3-untied")[2]
	for _, tt := range []struct {
		name   string
		mutate func(m *Model)
	}{
		{"embedding as the head", func(m *Model) { m.editConfig(func(c *Config) { c.UntiedHead = false }) }},
		{"perturbed lm_head", func(m *Model) { m.perturb(TiedHeadName, 0.01) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := loadFixture(t, "tiny-qwen3-untied", Float32)
			// The head is laid out as the embedding is (the tied head's layout).
			if head, embedding := m.residentDims(TiedHeadName), m.residentDims(EmbeddingName); head == nil || !slices.Equal(head, embedding) {
				t.Fatalf("lm_head.weight resident as %v, want %v (the embedding's layout)", head, embedding)
			}
			tt.mutate(m)
			got, err := m.Forward(ref.ids)
			if err != nil {
				t.Fatal(err)
			}
			if worst := maxAbsError(t, got, ref.logits); worst <= parityTolerance {
				t.Fatalf("a wrong head passed the gate: max abs error %.3g", worst)
			}
		})
	}
}
