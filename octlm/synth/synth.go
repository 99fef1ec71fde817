// Package synth writes random checkpoints in the Hugging Face Hub's exact Qwen3 layout:
// config.json, generation_config.json, BF16 weights with every tensor under the Hub's names
// (including the stored lm_head.weight, a duplicate of the embedding where the head is tied),
// in one model.safetensors or, past the Hub's 4 GB shard size, in model-0000N-of-0000M
// shards with model.safetensors.index.json, and the real Qwen3 tokenizer files. Speed never
// depends on weight values, so a full-size random checkpoint is what benchmarks load;
// correctness checks use the fixtures in testdata/ instead.
//
// Qwen3.5's shapes (qwen35.go) are written in the Hub's multimodal layout, without a tokenizer.
// Create and CreateQwen35 (create.go) write either into a folder atomically: built in a hidden
// folder beside it, renamed into place when whole, nothing left behind on an error or an
// interrupt.
//
// It knows the Qwen3 and Qwen3.5 tensor names and shapes; it knows nothing of graphs or of how
// the model uses the tensors. Files are written through loader and streamed: the model is never
// held in memory, not even once.
package synth

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/octlm/octlm/internal/progress"
	"github.com/octlm/octlm/loader"
)

// QwenLike holds the config.json values of a Qwen3 checkpoint.
type QwenLike struct {
	VocabSize             int
	HiddenSize            int
	NumLayers             int
	NumHeads              int
	NumKVHeads            int
	HeadDim               int
	IntermediateSize      int
	MaxPositionEmbeddings int
	RopeTheta             float64
	RMSNormEps            float64
	BOSTokenID            int
	EOSTokenID            int
	// Untied gives the output head its own lm_head.weight (tie_word_embeddings false, Qwen3-8B
	// and larger); tied, the stored lm_head.weight is a copy of the embedding.
	Untied bool
}

// Qwen3_0_6B is the configuration of Qwen/Qwen3-0.6B on the Hub.
func Qwen3_0_6B() QwenLike {
	return QwenLike{
		VocabSize: 151936, HiddenSize: 1024, NumLayers: 28, NumHeads: 16, NumKVHeads: 8, HeadDim: 128,
		IntermediateSize: 3072, MaxPositionEmbeddings: 40960, RopeTheta: 1_000_000, RMSNormEps: 1e-6,
		BOSTokenID: 151643, EOSTokenID: 151645,
	}
}

// Qwen3_1_7B is the configuration of Qwen/Qwen3-1.7B on the Hub.
func Qwen3_1_7B() QwenLike {
	c := Qwen3_0_6B()
	c.HiddenSize, c.NumLayers, c.NumHeads, c.NumKVHeads, c.IntermediateSize = 2048, 28, 16, 8, 6144
	return c
}

// Qwen3_4B is the configuration of Qwen/Qwen3-4B on the Hub.
func Qwen3_4B() QwenLike {
	c := Qwen3_0_6B()
	c.HiddenSize, c.NumLayers, c.NumHeads, c.NumKVHeads, c.IntermediateSize = 2560, 36, 32, 8, 9728
	return c
}

// Qwen3_8B is the configuration of Qwen/Qwen3-8B on the Hub: the first with an untied head.
func Qwen3_8B() QwenLike {
	c := Qwen3_0_6B()
	c.HiddenSize, c.NumLayers, c.NumHeads, c.NumKVHeads, c.IntermediateSize = 4096, 36, 32, 8, 12288
	c.Untied = true
	return c
}

// Tiny is the shape of the testdata/tiny-qwen3 fixture: grouped-query attention with
// head_dim != hidden/heads, 2 layers, vocabulary 320.
func Tiny() QwenLike {
	return QwenLike{
		VocabSize: 320, HiddenSize: 64, NumLayers: 2, NumHeads: 4, NumKVHeads: 2, HeadDim: 32,
		IntermediateSize: 96, MaxPositionEmbeddings: 40960, RopeTheta: 1_000_000, RMSNormEps: 1e-6,
		BOSTokenID: 0, EOSTokenID: 1,
	}
}

// TinyText is the smallest shape that speaks text: Qwen3's whole vocabulary (151,936 rows, so
// every token of the real tokenizer, chat template included, has an embedding) with hidden size
// 16 and 2 layers: about 10 MB of BF16 weights, most of them the embedding and its stored copy.
// Random weights give random text, fast.
func TinyText() QwenLike {
	c := Qwen3_0_6B()
	c.HiddenSize, c.NumLayers, c.NumHeads, c.NumKVHeads, c.HeadDim, c.IntermediateSize = 16, 2, 2, 1, 16, 48
	return c
}

// LikeNames returns the names Like knows, smallest first.
func LikeNames() []string {
	return []string{"tiny", "tiny-fixture", "qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b"}
}

// Like returns a named configuration: one of LikeNames, or the Hub name of a Qwen3 model
// ("Qwen/Qwen3-8B"). "tiny" is TinyText; "tiny-fixture" is Tiny, the testdata/tiny-qwen3 shape.
func Like(name string) (QwenLike, error) {
	switch strings.ToLower(strings.TrimPrefix(name, "Qwen/")) {
	case "qwen3-0.6b":
		return Qwen3_0_6B(), nil
	case "qwen3-1.7b":
		return Qwen3_1_7B(), nil
	case "qwen3-4b":
		return Qwen3_4B(), nil
	case "qwen3-8b":
		return Qwen3_8B(), nil
	case "tiny":
		return TinyText(), nil
	case "tiny-fixture":
		return Tiny(), nil
	}
	return QwenLike{}, fmt.Errorf("synth: unknown model %q (want one of %s)", name, strings.Join(LikeNames(), ", "))
}

// Validate checks that every size is positive and the token ids fit the vocabulary.
func (c QwenLike) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumLayers},
		{"num_attention_heads", c.NumHeads}, {"num_key_value_heads", c.NumKVHeads}, {"head_dim", c.HeadDim},
		{"intermediate_size", c.IntermediateSize}, {"max_position_embeddings", c.MaxPositionEmbeddings},
	} {
		if f.v <= 0 {
			return fmt.Errorf("synth: %s must be positive, got %d", f.name, f.v)
		}
	}
	if c.NumHeads%c.NumKVHeads != 0 {
		return fmt.Errorf("synth: num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumHeads, c.NumKVHeads)
	}
	if c.BOSTokenID < 0 || c.BOSTokenID >= c.VocabSize || c.EOSTokenID < 0 || c.EOSTokenID >= c.VocabSize {
		return fmt.Errorf("synth: bos/eos token ids %d/%d outside the vocabulary of %d", c.BOSTokenID, c.EOSTokenID, c.VocabSize)
	}
	if !(c.RopeTheta > 0) || !(c.RMSNormEps > 0) {
		return fmt.Errorf("synth: rope_theta and rms_norm_eps must be positive")
	}
	return nil
}

// Tensors lists every stored tensor with the Hub's name, BF16 dtype and shape, in the order
// they are declared by transformers, which is the order the Hub's checkpoints are sharded in
// (each file itself is laid out by name).
func (c QwenLike) Tensors() []loader.TensorSpec {
	H, I, D := c.HiddenSize, c.IntermediateSize, c.HeadDim
	spec := func(name string, shape ...int) loader.TensorSpec {
		return loader.TensorSpec{Name: name, DType: loader.BF16, Shape: shape}
	}
	out := []loader.TensorSpec{spec("model.embed_tokens.weight", c.VocabSize, H)}
	for i := range c.NumLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		out = append(out,
			spec(p+"self_attn.q_proj.weight", c.NumHeads*D, H),
			spec(p+"self_attn.k_proj.weight", c.NumKVHeads*D, H),
			spec(p+"self_attn.v_proj.weight", c.NumKVHeads*D, H),
			spec(p+"self_attn.o_proj.weight", H, c.NumHeads*D),
			spec(p+"self_attn.q_norm.weight", D),
			spec(p+"self_attn.k_norm.weight", D),
			spec(p+"mlp.gate_proj.weight", I, H),
			spec(p+"mlp.up_proj.weight", I, H),
			spec(p+"mlp.down_proj.weight", H, I),
			spec(p+"input_layernorm.weight", H),
			spec(p+"post_attention_layernorm.weight", H),
		)
	}
	return append(out, spec("model.norm.weight", H), spec("lm_head.weight", c.VocabSize, H))
}

// UniqueParams counts parameters with a tied lm_head.weight counted once.
func (c QwenLike) UniqueParams() int64 {
	var n int64
	for _, t := range c.Tensors() {
		if t.Name == "lm_head.weight" && !c.Untied {
			continue
		}
		e := int64(1)
		for _, d := range t.Shape {
			e *= int64(d)
		}
		n += e
	}
	return n
}

// HubShardBytes is the shard size limit the Hub's Qwen3 checkpoints were saved with
// (save_pretrained's max_shard_size "4GB", decimal).
const HubShardBytes = 4_000_000_000

// Shard is one safetensors file of a checkpoint and the tensors it holds.
type Shard struct {
	Name    string // model.safetensors, or model-0000N-of-0000M.safetensors
	Tensors []loader.TensorSpec
}

// Size is the exact size of the shard's file: header and tensor bytes.
func (s Shard) Size() (int64, error) {
	header, _, err := loader.EncodeHeader(s.Tensors, fileMetadata)
	if err != nil {
		return 0, err
	}
	n := int64(len(header))
	for _, t := range s.Tensors {
		n += t.Bytes()
	}
	return n, nil
}

// fileMetadata is the __metadata__ transformers writes into every safetensors file.
var fileMetadata = map[string]string{"format": "pt"}

// Shards splits the tensors into files as huggingface_hub's split_torch_state_dict_into_shards
// does (save_pretrained): in declaration order, a tensor starts a new shard when it would take
// the current one past maxBytes (0 means HubShardBytes), and one larger than maxBytes gets a
// shard of its own. One shard is the single model.safetensors. For Qwen3-1.7B this gives the
// Hub's two files exactly: everything but the head (3,441,185,608 bytes), then lm_head.weight.
func (c QwenLike) Shards(maxBytes int64) []Shard { return shardSpecs(c.Tensors(), maxBytes) }

// ShardTensors splits any checkpoint's tensors into files as Shards describes (a fine-tuned or
// merged checkpoint is saved with the Hub's split).
func ShardTensors(tensors []loader.TensorSpec, maxBytes int64) []Shard {
	return shardSpecs(tensors, maxBytes)
}

// shardSpecs splits tensors into shards as Shards describes.
func shardSpecs(tensors []loader.TensorSpec, maxBytes int64) []Shard {
	if maxBytes <= 0 {
		maxBytes = HubShardBytes
	}
	var groups [][]loader.TensorSpec
	var current []loader.TensorSpec
	var size int64
	for _, t := range tensors {
		b := t.Bytes()
		if b > maxBytes {
			groups = append(groups, []loader.TensorSpec{t})
			continue
		}
		if size+b > maxBytes && len(current) > 0 {
			groups = append(groups, current)
			current, size = nil, 0
		}
		current = append(current, t)
		size += b
	}
	if len(current) > 0 {
		groups = append(groups, current)
	}
	if len(groups) == 1 {
		return []Shard{{Name: loader.SingleFileName, Tensors: groups[0]}}
	}
	shards := make([]Shard, len(groups))
	for i, g := range groups {
		shards[i] = Shard{Name: fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(groups)), Tensors: g}
	}
	return shards
}

// IndexJSON renders model.safetensors.index.json for shards as transformers writes it: the
// tensor bytes as metadata.total_size and the shard of every tensor, keys sorted, two-space
// indent, trailing newline.
func IndexJSON(shards []Shard) []byte {
	var index struct {
		Metadata struct {
			TotalSize int64 `json:"total_size"`
		} `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	index.WeightMap = map[string]string{}
	for _, s := range shards {
		for _, t := range s.Tensors {
			index.Metadata.TotalSize += t.Bytes()
			index.WeightMap[t.Name] = s.Name
		}
	}
	data, err := json.MarshalIndent(index, "", "  ")
	if err != nil {
		panic(err) // unreachable: strings and integers only
	}
	return append(data, '\n')
}

// ModelFileSize is the exact size of the weight files Write produces with the Hub's shard
// size: model.safetensors, or all the shards (the index not included).
func (c QwenLike) ModelFileSize() (int64, error) {
	var n int64
	for _, s := range c.Shards(0) {
		size, err := s.Size()
		if err != nil {
			return 0, err
		}
		n += size
	}
	return n, nil
}

// ConfigJSON renders config.json exactly as transformers writes it (keys sorted, two-space
// indent, trailing newline), with the keys of the Hub's Qwen3 configs.
func (c QwenLike) ConfigJSON() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{
  "architectures": [
    "Qwen3ForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": %d,
  "eos_token_id": %d,
  "head_dim": %d,
  "hidden_act": "silu",
  "hidden_size": %d,
  "initializer_range": 0.02,
  "intermediate_size": %d,
  "max_position_embeddings": %d,
  "max_window_layers": %d,
  "model_type": "qwen3",
  "num_attention_heads": %d,
  "num_hidden_layers": %d,
  "num_key_value_heads": %d,
  "rms_norm_eps": %s,
  "rope_scaling": null,
  "rope_theta": %s,
  "sliding_window": null,
  "tie_word_embeddings": %t,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": %d
}
`, c.BOSTokenID, c.EOSTokenID, c.HeadDim, c.HiddenSize, c.IntermediateSize, c.MaxPositionEmbeddings,
		c.NumLayers, c.NumHeads, c.NumLayers, c.NumKVHeads, pyFloat(c.RMSNormEps), pyNumber(c.RopeTheta), !c.Untied, c.VocabSize)
	return b.Bytes()
}

// GenerationConfigJSON renders generation_config.json with the Hub's Qwen3 sampling defaults.
func (c QwenLike) GenerationConfigJSON() []byte {
	return fmt.Appendf(nil, `{
  "bos_token_id": %d,
  "do_sample": true,
  "eos_token_id": [
    %d,
    %d
  ],
  "pad_token_id": %d,
  "temperature": 0.6,
  "top_k": 20,
  "top_p": 0.95,
  "transformers_version": "4.51.0"
}
`, c.BOSTokenID, c.EOSTokenID, c.BOSTokenID, c.BOSTokenID)
}

// pyFloat formats like Python's repr of a small float (1e-06, 0.02).
func pyFloat(v float64) string { return fmt.Sprintf("%g", v) }

// pyNumber writes integral values as integers (rope_theta 1000000), others as floats.
func pyNumber(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%d", int64(v))
	}
	return pyFloat(v)
}

//go:embed assets/tokenizer.json.gz
var tokenizerGz []byte

//go:embed assets/tokenizer_config.json
var tokenizerConfig []byte

// The Hub's Qwen3 tokenizer files, as shipped in assets/.
const (
	tokenizerSHA256       = "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
	tokenizerConfigSHA256 = "d5d09f07b48c3086c508b30d1c9114bd1189145b74e982a265350c923acd8101"
)

// TokenizerFiles returns Qwen3's tokenizer.json and tokenizer_config.json, byte-identical to
// the Hub's (checked against their SHA-256).
func TokenizerFiles() (map[string][]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tokenizerGz))
	if err != nil {
		return nil, fmt.Errorf("synth: embedded tokenizer: %w", err)
	}
	tok, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("synth: embedded tokenizer: %w", err)
	}
	files := map[string][]byte{"tokenizer.json": tok, "tokenizer_config.json": tokenizerConfig}
	for name, want := range map[string]string{"tokenizer.json": tokenizerSHA256, "tokenizer_config.json": tokenizerConfigSHA256} {
		if sum := sha256.Sum256(files[name]); hex.EncodeToString(sum[:]) != want {
			return nil, fmt.Errorf("synth: embedded %s has the wrong SHA-256", name)
		}
	}
	return files, nil
}

// Options tune WriteWith.
type Options struct {
	Seed         int64
	Progress     io.Writer // progress lines; nil for silence
	NoTokenizer  bool      // skip tokenizer.json and tokenizer_config.json
	TokenizerDir string    // copy the tokenizer files from this folder instead of the embedded ones
	Manifest     bool      // also write octlm-manifest.json (hashes every file once more)
	// MaxShardBytes splits the weights into shards of at most this many tensor bytes; 0 means
	// HubShardBytes, the Hub's own split.
	MaxShardBytes int64
	// Context, when set, stops the writing once it is done (an interrupt): WriteWith then
	// returns its error and leaves no temporary file behind.
	Context context.Context
}

// Write writes a random checkpoint for cfg into dir (created if needed) with the embedded
// tokenizer files, the Hub's sharding and no manifest. The same seed gives the same bytes.
func Write(dir string, cfg QwenLike, seed int64, progress io.Writer) error {
	return WriteWith(dir, cfg, Options{Seed: seed, Progress: progress})
}

// WriteWith is Write with options.
func WriteWith(dir string, cfg QwenLike, opts Options) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	files := map[string][]byte{
		"config.json":            cfg.ConfigJSON(),
		"generation_config.json": cfg.GenerationConfigJSON(),
	}
	if !opts.NoTokenizer {
		var tok map[string][]byte
		var err error
		if opts.TokenizerDir != "" {
			tok = map[string][]byte{}
			for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
				if tok[name], err = os.ReadFile(filepath.Join(opts.TokenizerDir, name)); err != nil {
					return fmt.Errorf("synth: %w", err)
				}
			}
		} else if tok, err = TokenizerFiles(); err != nil {
			return err
		}
		for k, v := range tok {
			files[k] = v
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	return writeShards(dir, cfg.Shards(opts.MaxShardBytes), opts, func(path string, specs []loader.TensorSpec) error {
		return writeModel(path, specs, cfg, opts)
	})
}

// writeShards writes each shard's file with write, the shard index when there are several (as
// the Hub's sharded checkpoints have), and the manifest when opts asks for one.
func writeShards(dir string, shards []Shard, opts Options, write func(path string, specs []loader.TensorSpec) error) error {
	for _, shard := range shards {
		if err := write(filepath.Join(dir, shard.Name), shard.Tensors); err != nil {
			return err
		}
	}
	if len(shards) > 1 {
		if err := os.WriteFile(filepath.Join(dir, loader.IndexFileName), IndexJSON(shards), 0o644); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	if opts.Manifest {
		if _, err := loader.WriteManifest(dir, "", "", opts.Progress); err != nil {
			return err
		}
	}
	return nil
}

// chunkElems is the number of values generated per work item (2 MiB of BF16).
const chunkElems = 1 << 20

// writeModel writes one safetensors file holding specs, with random values for cfg.
func writeModel(path string, specs []loader.TensorSpec, cfg QwenLike, opts Options) error {
	bar := newFileProgress(opts, path, specs)
	defer bar.close()
	workers := max(1, runtime.GOMAXPROCS(0))
	bufs := make([][]byte, workers)
	for i := range bufs {
		bufs[i] = make([]byte, 2*chunkElems)
	}
	return loader.WriteFileFunc(path, specs, fileMetadata, func(i int, w io.Writer) error {
		s := specs[i]
		n := int(s.Bytes() / 2)
		// A tied head's stored lm_head.weight is the embedding: same stream, same values.
		key := s.Name
		if key == "lm_head.weight" && !cfg.Untied {
			key = "model.embed_tokens.weight"
		}
		isNorm := len(s.Shape) == 1
		chunks := (n + chunkElems - 1) / chunkElems
		for c0 := 0; c0 < chunks; c0 += workers {
			if opts.Context != nil && opts.Context.Err() != nil {
				return context.Cause(opts.Context)
			}
			batch := min(workers, chunks-c0)
			var wg sync.WaitGroup
			for k := range batch {
				wg.Go(func() {
					c := c0 + k
					lo, hi := c*chunkElems, min((c+1)*chunkElems, n)
					fill(bufs[k][:2*(hi-lo)], opts.Seed, key, c, isNorm)
				})
			}
			wg.Wait()
			for k := range batch {
				c := c0 + k
				m := min((c+1)*chunkElems, n) - c*chunkElems
				if _, err := w.Write(bufs[k][:2*m]); err != nil {
					return err
				}
				bar.add(int64(2 * m))
			}
		}
		return nil
	})
}

// fill writes BF16 values for chunk c of the tensor keyed by name: normal with standard
// deviation 0.02 for matrices, 1 + N(0, 0.02) for norm weights.
func fill(buf []byte, seed int64, name string, c int, isNorm bool) {
	rng := chunkRNG(seed, name, c)
	mean := float32(0)
	if isNorm {
		mean = 1
	}
	for i := 0; i < len(buf); i += 2 {
		v := mean + 0.02*float32(rng.NormFloat64())
		binary.LittleEndian.PutUint16(buf[i:], loader.Float32ToBFloat16(v))
	}
}

// chunkRNG is the random stream of chunk c of the tensor keyed by name: seeded from the seed, the
// name and the chunk alone, so chunks can be filled in any order (or in parallel) with the same
// values.
func chunkRNG(seed int64, name string, c int) *rand.Rand {
	h := fnv.New64a()
	io.WriteString(h, name)
	return rand.New(rand.NewPCG(uint64(seed)^h.Sum64(), uint64(c)))
}

// fileProgress is the progress bar of one written file (nil-safe: no bar without opts.Progress).
type fileProgress struct {
	bar         *progress.Bar
	done, total int64
}

func newFileProgress(opts Options, path string, specs []loader.TensorSpec) *fileProgress {
	p := &fileProgress{}
	for _, s := range specs {
		p.total += s.Bytes()
	}
	if opts.Progress != nil {
		p.bar = progress.New(opts.Progress, "synth: "+filepath.Base(path))
	}
	return p
}

// add counts n more bytes written.
func (p *fileProgress) add(n int64) {
	p.done += n
	if p.bar != nil {
		p.bar.Update(p.done, p.total)
	}
}

// close ends the bar: finished when every byte was written, abandoned otherwise (an error, an
// interrupt), so a stopped write makes no claim of completion.
func (p *fileProgress) close() {
	switch {
	case p.bar == nil:
	case p.done < p.total:
		p.bar.Abandon()
	default:
		p.bar.Finish()
	}
}
