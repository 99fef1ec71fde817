// Package octlm runs Hugging Face decoders as GoMLX graphs: Qwen3 (octlm's own Config, with the
// switches that let it run the Qwen3 family; qwen3.go) and Qwen3.5 (its hybrid of Gated DeltaNet
// and gated full-attention layers; qwen35.go, qwen35_graph.go), behind one architecture seam
// (arch.go). It owns what they share: the map from checkpoint tensor names to resident weights
// in each engine's layout, the step graph (chunked prefill, the cache's buckets, batches of
// sequences, LoRA adapters applied unmerged), generation and sampling, and the differentiable
// training forward (training.go) built from the same layer code.
//
// It reads checkpoints only through package loader and runs graphs on whatever compute.Backend
// it is given (package xla chooses one); it knows nothing of files' byte layout or of PJRT.
package octlm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
)

// Config describes a decoder. The first block is the classic octlm decoder (head width d/heads,
// the two-thirds feed-forward rule, RoPE base 10,000 on neighbouring channel pairs, no q/k
// norm, the output head tied to the embedding); the switches below it (HeadDim, FFHidden,
// RopeBase, RopeSplit, QKNorm, UntiedHead) generalise it to the Qwen3 family's shapes and are
// all off at their zero value, so a Config without them is the classic decoder and keeps its
// fingerprint.
type Config struct {
	VocabSize     int     `json:"vocab_size"`
	ContextLength int     `json:"context_length"`
	DModel        int     `json:"d_model"`
	NHeads        int     `json:"n_heads"`
	NLayers       int     `json:"n_layers"`
	KVHeads       int     `json:"kv_heads"`
	NormEps       float64 `json:"norm_eps,omitempty"` // RMSNorm epsilon; 0 means DefaultNormEps.

	// HeadDim is the width of one attention head; 0 means DModel / NHeads.
	HeadDim int `json:"head_dim,omitempty"`
	// FFHidden is the SwiGLU hidden width; 0 means the two-thirds rule (see FFWidth).
	FFHidden int `json:"ff_hidden,omitempty"`
	// RopeBase is RoPE's base; 0 means 10,000.
	RopeBase float64 `json:"rope_base,omitempty"`
	// RopeSplit pairs channel i with i+HeadDim/2 (Hugging Face's rotate_half) instead of
	// neighbouring channels 2i and 2i+1.
	RopeSplit bool `json:"rope_split,omitempty"`
	// QKNorm applies an RMSNorm to every query and key head before RoPE (Qwen3).
	QKNorm bool `json:"qk_norm,omitempty"`
	// UntiedHead gives the output head its own weight (lm_head.weight, [vocab, d]) instead of
	// reusing the embedding table (Qwen3-8B and larger: tie_word_embeddings false).
	UntiedHead bool `json:"untied_head,omitempty"`
}

// Defaults of the classic decoder, used where a switch is off.
const (
	DefaultRopeBase = 10_000.0
	DefaultNormEps  = 1e-5
)

// HeadWidth is the width of one attention head.
func (c Config) HeadWidth() int {
	if c.HeadDim != 0 {
		return c.HeadDim
	}
	return c.DModel / c.NHeads
}

// FFWidth is the SwiGLU hidden width: FFHidden, or by the two-thirds rule 2/3 · 4 · DModel,
// rounded up to a multiple of 64.
func (c Config) FFWidth() int {
	if c.FFHidden != 0 {
		return c.FFHidden
	}
	w := 8 * c.DModel / 3
	return (w + 63) / 64 * 64
}

// Base is RoPE's base.
func (c Config) Base() float64 {
	if c.RopeBase != 0 {
		return c.RopeBase
	}
	return DefaultRopeBase
}

// Eps is the RMSNorm epsilon.
func (c Config) Eps() float64 {
	if c.NormEps != 0 {
		return c.NormEps
	}
	return DefaultNormEps
}

// Bounds on the sizes a config may declare, checked when it is read, before anything whose size
// comes from it is allocated (a weight table, a cache, a memory estimate), so that a corrupt or
// hostile config.json is refused at once. Each is far above every released decoder (in brackets,
// the largest known to us in 2026: Llama 3.1 405B, Qwen3-235B, Gemma 3, Llama 4 Scout,
// Qwen3.5), and together they keep every product the package forms (weights, a cache of the
// whole context) well inside int64.
const (
	MaxLayers       = 1024    // num_hidden_layers [126]
	MaxHeads        = 1024    // attention, key/value and linear-attention heads [128]
	MaxHeadDim      = 4096    // head_dim and the linear-attention head widths [256]
	MaxHidden       = 1 << 16 // hidden_size, 65,536 [16,384]
	MaxIntermediate = 1 << 20 // intermediate_size, 1,048,576 [53,248]
	MaxVocab        = 1 << 24 // vocab_size, 16,777,216 [262,144]
	MaxContext      = 1 << 24 // max_position_embeddings, 16,777,216 [10,485,760]
	MaxHeadsWidth   = 1 << 17 // heads × head_dim of any projection, 131,072 [16,384]
	MaxConvKernel   = 256     // linear_conv_kernel_dim [4]
)

// sizeBound is one config size and the largest value accepted.
type sizeBound struct {
	name       string
	value, max int
}

// checkBounds reports the first size that is not in 1…its bound, by name.
func checkBounds(sizes []sizeBound) error {
	for _, s := range sizes {
		switch {
		case s.value <= 0:
			return fmt.Errorf("%s must be positive, got %d", s.name, s.value)
		case s.value > s.max:
			return fmt.Errorf("%s = %d is beyond the largest this decoder accepts, %d (far above any released model)", s.name, s.value, s.max)
		}
	}
	return nil
}

// Validate reports the first field that makes c unusable, by its JSON name.
func (c Config) Validate() error {
	if err := checkBounds([]sizeBound{
		{"vocab_size", c.VocabSize, MaxVocab}, {"context_length", c.ContextLength, MaxContext},
		{"d_model", c.DModel, MaxHidden}, {"n_heads", c.NHeads, MaxHeads}, {"n_layers", c.NLayers, MaxLayers},
		{"kv_heads", c.KVHeads, MaxHeads},
	}); err != nil {
		return fmt.Errorf("octlm: config: %w", err)
	}
	switch {
	case c.HeadDim < 0:
		return fmt.Errorf("octlm: config: head_dim must be positive, got %d", c.HeadDim)
	case c.HeadDim == 0 && c.DModel%c.NHeads != 0:
		return fmt.Errorf("octlm: config: d_model %d is not divisible by n_heads %d (set head_dim)", c.DModel, c.NHeads)
	case c.HeadWidth()%2 != 0:
		return fmt.Errorf("octlm: config: head width %d must be even for RoPE", c.HeadWidth())
	case c.NHeads%c.KVHeads != 0:
		return fmt.Errorf("octlm: config: n_heads %d is not divisible by kv_heads %d", c.NHeads, c.KVHeads)
	case c.HeadDim > MaxHeadDim:
		return fmt.Errorf("octlm: config: head_dim = %d is beyond the largest this decoder accepts, %d", c.HeadDim, MaxHeadDim)
	case c.NHeads*c.HeadWidth() > MaxHeadsWidth:
		return fmt.Errorf("octlm: config: n_heads × head width = %d × %d is beyond the largest this decoder accepts, %d", c.NHeads, c.HeadWidth(), MaxHeadsWidth)
	case c.FFHidden < 0:
		return fmt.Errorf("octlm: config: ff_hidden must be positive, got %d", c.FFHidden)
	case c.FFWidth() > MaxIntermediate:
		return fmt.Errorf("octlm: config: ff_hidden = %d is beyond the largest this decoder accepts, %d", c.FFWidth(), MaxIntermediate)
	case c.RopeBase < 0 || math.IsNaN(c.RopeBase) || math.IsInf(c.RopeBase, 0) || (c.RopeBase != 0 && c.RopeBase <= 1):
		return fmt.Errorf("octlm: config: rope_base must be greater than 1, got %v", c.RopeBase)
	case c.NormEps < 0 || math.IsNaN(c.NormEps) || math.IsInf(c.NormEps, 0):
		return fmt.Errorf("octlm: config: norm_eps must be a small positive number, got %v", c.NormEps)
	}
	return nil
}

// Fingerprint is a stable hash of the configuration. Switches at their default are left out of
// the hashed form, so adding the switches changed no earlier config's fingerprint.
func (c Config) Fingerprint() string {
	// encoding/json writes struct fields in declaration order and omits empty switches.
	data, err := json.Marshal(c)
	if err != nil {
		panic(err) // unreachable: Config holds only numbers and booleans
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// Parameters is the number of unique parameters of the Qwen3 decoder c describes (a tied output
// head counted once, with the embedding): its weight table's. A loaded model of any architecture
// counts its own with Model.Parameters.
func (c Config) Parameters() int64 { return parameterCount(qwen3{c}.weights()) }
