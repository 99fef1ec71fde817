package octlm

// The differentiable training forward: the same layers the step graph runs (one layer loop,
// blocks.go's attention and norms), built on whole right-padded rows without a cache, with the
// weights as nodes in the checkpoint's layout, so that graph.Gradient differentiates it. See
// /docs/decoder.md for which engines can run the gradient.

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
)

// Decoder is an architecture read from a checkpoint folder's config.json (Qwen3 or Qwen3.5),
// without weights: its shape, its weight table in checkpoint layout, and its graph builders.
type Decoder struct {
	// RecomputeLayers makes TrainingLogits mark each decoder layer's input as a gradient
	// checkpoint (GoMLX's Node.Checkpoint, --gradient-checkpointing): the backward pass
	// recomputes a layer's activations instead of keeping every one. It needs an engine with
	// OptimizationBarrier (the pure-Go backend; ONNX Runtime's has none).
	RecomputeLayers bool

	arch  architecture
	specs []weightSpec
}

// ReadDecoder reads dir/config.json (its sizes checked by the architecture's parser).
func ReadDecoder(dir string) (*Decoder, error) {
	arch, err := readArchitecture(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	return &Decoder{arch: arch, specs: arch.weights()}, nil
}

// Shape is the decoder's shape as the shared machinery reads it.
func (d *Decoder) Shape() Shape { return d.arch.shape() }

// WeightInfo is one checkpoint tensor the model reads, in checkpoint layout and name.
type WeightInfo struct {
	Name  string // checkpoint name: model.layers.0.self_attn.q_proj.weight
	Shape []int  // as stored: Linear weights [out, in], the embedding [vocab, d]
	// Linear is an nn.Linear weight: a LoRA target candidate.
	Linear bool
	// Module is PEFT's module path of a Linear weight (model.layers.0.self_attn.q_proj); "" for
	// others.
	Module string
	// Float32 is kept in float32 whatever the model's dtype (norms, recurrent parameters).
	Float32 bool
}

// Weights is the checkpoint's tensors the model reads, in the order TrainingLogits takes them. A
// tied head appears once, as the embedding.
func (d *Decoder) Weights() []WeightInfo {
	out := make([]WeightInfo, len(d.specs))
	for i, s := range d.specs {
		out[i] = WeightInfo{Name: s.Name, Shape: append([]int(nil), s.Shape...), Linear: s.Kind == linearWeight, Float32: s.Float32}
		if out[i].Linear {
			out[i].Module = strings.TrimSuffix(s.Name, ".weight")
		}
	}
	return out
}

// TrainingLogits builds, in ids' graph, the decoder on whole right-padded rows with no cache:
// ids int32 [B, S], lengths int32 [B] (the real tokens of each row; a row's real positions never
// see its padding), weights one node per Weights() entry in that order (float32, or float64 for
// gradient checks; checkpoint layout), lora the adapters applied unmerged (nil: none). It returns
// the logits [B, S, vocab] in float32 (float64 with float64 weights). Padding positions get
// logits too, which the caller masks. A frozen base in bfloat16 (--base-dtype bf16) is bfloat16
// nodes for every weight but the Float32 ones, with the adapters in float32: the activations then
// run in bfloat16 as the bfloat16 model's step graph does, the adapters' products in float32.
//
// It is differentiable by graph.Gradient on GoMLX's pure-Go backend: the norms divide by a
// square root (Rsqrt has no VJP), nothing is written into a cache (no DynamicUpdateSlice, whose
// VJP needs DynamicSlice), the embedding is one Gather of rows.
func (d *Decoder) TrainingLogits(ids, lengths *Node, weights []*Node, lora *LoRANodes) *Node {
	if len(weights) != len(d.specs) {
		panic(fmt.Sprintf("octlm: TrainingLogits: %d weight nodes, want %d (Decoder.Weights)", len(weights), len(d.specs)))
	}
	for i, s := range d.specs {
		if got := weights[i].Shape().Dimensions; !shapes.Make(dtypes.Float32, got...).Equal(shapes.Make(dtypes.Float32, s.Shape...)) {
			panic(fmt.Sprintf("octlm: TrainingLogits: weight %q is %v, want %v", s.Name, got, s.Shape))
		}
	}
	if ids.Rank() != 2 || lengths.Rank() != 1 || lengths.Shape().Dimensions[0] != ids.Shape().Dimensions[0] {
		panic(fmt.Sprintf("octlm: TrainingLogits: ids %s and lengths %s: want [B, S] and [B]", ids.Shape(), lengths.Shape()))
	}
	batch, seqLen := ids.Shape().Dimensions[0], ids.Shape().Dimensions[1]
	shape := d.arch.shape()
	// The layout's logistic function as the engine's step graph computes it (ONNX Runtime's own
	// Sigmoid is inaccurate for small results); everything else as stored.
	o := ops{layout: Layout{SigmoidByExp: layoutOf(ids.Graph().Backend()).SigmoidByExp}, vocab: shape.Vocab, asStored: true}
	w := newWeightSet(d.specs, o.layout, weights)
	w.adapter = lora
	start := Zeros(ids.Graph(), shapes.Make(dtypes.Int32, batch))
	s := newStep(o, ConvertDType(ids, dtypes.Int32), start, ConvertDType(lengths, dtypes.Int32), 0, false)
	s.recompute = d.RecomputeLayers
	hidden, _ := forward(d.arch, s, w, nil)
	logits := d.arch.logits(s, w, Reshape(hidden, batch*seqLen, shape.Width))
	return Reshape(wide(logits), batch, seqLen, shape.Vocab)
}
