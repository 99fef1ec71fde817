package train

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified

	"github.com/octlm/octlm/octlm"
)

// decoderModel is the decoder's training forward (octlm.Decoder.TrainingLogits) as a Model.
type decoderModel struct{ d *octlm.Decoder }

// ModelOptions tune the decoder's training forward.
type ModelOptions struct {
	// RecomputeLayers makes each decoder layer a gradient checkpoint: the backward pass
	// recomputes its activations instead of keeping them (--gradient-checkpointing; needs an
	// engine with OptimizationBarrier, the pure-Go backend).
	RecomputeLayers bool
}

// OpenModel reads the architecture of the checkpoint folder dir (Qwen3 or Qwen3.5, no weights)
// as a differentiable Model.
func OpenModel(dir string, opts ModelOptions) (Model, error) {
	d, err := octlm.ReadDecoder(dir)
	if err != nil {
		return nil, err
	}
	d.RecomputeLayers = opts.RecomputeLayers
	return decoderModel{d}, nil
}

func (m decoderModel) Params() []Param { return m.d.Weights() }

func (m decoderModel) Logits(ids, lengths *Node, weights []*Node, adapters *Adapters) *Node {
	return m.d.TrainingLogits(ids, lengths, weights, adapters)
}
