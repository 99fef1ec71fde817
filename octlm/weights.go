package octlm

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/dtypes/float16"
	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/octlm/octlm/loader"
)

// TiedHeadName is the stored copy of the output head that Qwen3 checkpoints carry although the
// head is tied to the embedding; it is accepted only if it equals model.embed_tokens.weight.
const (
	TiedHeadName  = "lm_head.weight"
	EmbeddingName = "model.embed_tokens.weight"
)

// weightSpec maps one Hugging Face tensor to one resident weight.
type weightSpec struct {
	Name      string // Hub name
	HubShape  []int  // shape in the checkpoint: Linear weights are [out, in]
	Transpose bool   // stored resident as [in, out], the layout the matmul kernels like
}

// residentShape is the shape the weight has on the backend.
func (s weightSpec) residentShape() []int {
	if s.Transpose {
		return []int{s.HubShape[1], s.HubShape[0]}
	}
	return s.HubShape
}

// weightSpecs lists the model's weights in the order the graph takes them.
func weightSpecs(c Config) []weightSpec {
	d, hd, ff := c.DModel, c.HeadWidth(), c.FFWidth()
	linear := func(name string, out, in int) weightSpec {
		return weightSpec{Name: name, HubShape: []int{out, in}, Transpose: true}
	}
	vector := func(name string, n int) weightSpec { return weightSpec{Name: name, HubShape: []int{n}} }
	specs := []weightSpec{
		{Name: EmbeddingName, HubShape: []int{c.VocabSize, d}},
		vector("model.norm.weight", d),
	}
	for i := range c.NLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		specs = append(specs,
			vector(p+"input_layernorm.weight", d),
			linear(p+"self_attn.q_proj.weight", c.NHeads*hd, d),
			linear(p+"self_attn.k_proj.weight", c.KVHeads*hd, d),
			linear(p+"self_attn.v_proj.weight", c.KVHeads*hd, d),
			linear(p+"self_attn.o_proj.weight", d, c.NHeads*hd),
		)
		if c.QKNorm {
			specs = append(specs, vector(p+"self_attn.q_norm.weight", hd), vector(p+"self_attn.k_norm.weight", hd))
		}
		specs = append(specs,
			vector(p+"post_attention_layernorm.weight", d),
			linear(p+"mlp.gate_proj.weight", ff, d),
			linear(p+"mlp.up_proj.weight", ff, d),
			linear(p+"mlp.down_proj.weight", d, ff),
		)
	}
	return specs
}

// HubNames returns the tensor names a checkpoint for c holds (without the tied head copy).
func HubNames(c Config) []string {
	specs := weightSpecs(c)
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return names
}

// LoadOptions choose where and how a model is loaded.
type LoadOptions struct {
	Backend compute.Backend
	DType   DType // resident weights and activations; "" means Float32
	// Progress, when set, is called after each tensor with the bytes loaded so far and in all.
	Progress func(name string, done, total int64)
}

// Load reads a Hugging Face Qwen3 checkpoint folder (config.json and model.safetensors, or a
// sharded index) into a model.
func Load(dir string, opts LoadOptions) (*Model, error) {
	cfg, err := ReadQwenConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	ckpt, err := loader.OpenCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	defer ckpt.Close()
	return LoadCheckpoint(cfg, ckpt, opts)
}

// LoadCheckpoint builds a model for cfg with no weights, then streams every tensor of ckpt into
// resident backend buffers, one tensor at a time, with one copy each. Unexpected, missing and
// mis-shaped tensors, and a stored tied head that differs from the embedding, are errors naming
// the tensor; on any error nothing stays allocated.
func LoadCheckpoint(cfg Config, ckpt *loader.Checkpoint, opts LoadOptions) (m *Model, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Backend == nil {
		return nil, fmt.Errorf("octlm: load: no backend given")
	}
	dtype := opts.DType
	if dtype == "" {
		dtype = Float32
	}
	specs := weightSpecs(cfg)
	index := make(map[string]int, len(specs))
	for i, s := range specs {
		index[s.Name] = i
	}
	m = &Model{Config: cfg, DType: dtype, Backend: opts.Backend, specs: specs, weights: make([]*tensors.Tensor, len(specs))}
	defer func() {
		if err != nil {
			m.Close()
			m = nil
		}
	}()
	var total, done int64
	for e, ierr := range ckpt.Tensors() {
		if ierr != nil {
			return nil, ierr
		}
		total += e.Info.Size
	}
	var scratch []float32
	for e, ierr := range ckpt.Tensors() {
		if ierr != nil {
			return nil, ierr
		}
		name := e.Info.Name
		where := fmt.Sprintf("%s: tensor %q", e.File.Path(), name)
		if name == TiedHeadName {
			// The tied head: whichever of the two copies comes first fills the embedding; the
			// other must equal it.
			name = EmbeddingName
		}
		i, ok := index[name]
		if !ok {
			return nil, fmt.Errorf("octlm: %s: unexpected checkpoint tensor", where)
		}
		spec := specs[i]
		if !slices.Equal(e.Info.Shape, spec.HubShape) {
			return nil, fmt.Errorf("octlm: %s: shape %v does not match the config's %v", where, e.Info.Shape, spec.HubShape)
		}
		n := e.Info.NumElements()
		if cap(scratch) < n {
			scratch = make([]float32, n)
		}
		values := scratch[:n]
		if err := e.File.ReadFloat32(e.Info, values); err != nil {
			return nil, fmt.Errorf("octlm: %s: %w", where, err)
		}
		if m.weights[i] != nil {
			if name != EmbeddingName {
				return nil, fmt.Errorf("octlm: %s: stored twice", where)
			}
			if err := checkTiedCopy(m.weights[i], values); err != nil {
				return nil, fmt.Errorf("octlm: %s: checkpoint tied weights differ: %w", where, err)
			}
		} else {
			t, err := residentTensor(opts.Backend, spec, values, dtype)
			if err != nil {
				return nil, fmt.Errorf("octlm: %s: %w", where, err)
			}
			m.weights[i] = t
		}
		done += e.Info.Size
		if opts.Progress != nil {
			opts.Progress(e.Info.Name, done, total)
		}
	}
	for i, t := range m.weights {
		if t == nil {
			return nil, fmt.Errorf("octlm: %s: missing checkpoint tensor %q", ckpt.Dir(), specs[i].Name)
		}
	}
	return m, nil
}

// residentTensor allocates a weight on the backend and fills it from float32 values in the
// Hub's layout, transposing Linear weights to [in, out] and converting to dtype in one pass.
func residentTensor(backend compute.Backend, spec weightSpec, values []float32, dtype DType) (*tensors.Tensor, error) {
	shape := shapes.Make(dtype.gomlx(), spec.residentShape()...)
	t, err := tensors.FromShapeForBackend(backend, 0, shape)
	if err != nil {
		return nil, fmt.Errorf("allocating %s: %w", shape, err)
	}
	rows, cols := 1, len(values)
	if spec.Transpose {
		rows, cols = spec.HubShape[0], spec.HubShape[1] // hub [rows=out, cols=in] -> resident [in, out]
	}
	at := func(j int) float32 { return values[j] } // resident flat index -> value
	if spec.Transpose {
		at = func(j int) float32 { in, out := j/rows, j%rows; return values[out*cols+in] }
	}
	err = t.MutableFlatData(func(flat any) {
		switch dst := flat.(type) {
		case []float32:
			if !spec.Transpose {
				copy(dst, values)
				return
			}
			transposeInto(dst, values, rows, cols)
		case []float16.Float16:
			for j := range dst {
				dst[j] = float16.FromFloat32(at(j))
			}
		case []bfloat16.BFloat16:
			for j := range dst {
				dst[j] = bfloat16.FromFloat32(at(j))
			}
		}
	})
	if err != nil {
		_ = t.FinalizeAll()
		return nil, err
	}
	if !backend.HasSharedBuffers() {
		// Move it to the device now and drop the host copy, so only one copy stays resident.
		if err := t.MaterializeOnDevice(backend, false, 0); err != nil {
			_ = t.FinalizeAll()
			return nil, fmt.Errorf("moving to the device: %w", err)
		}
		t.FinalizeLocal()
	}
	return t, nil
}

// transposeInto writes src [rows, cols] transposed into dst [cols, rows], in cache-sized tiles.
func transposeInto(dst, src []float32, rows, cols int) {
	const tile = 64
	for r0 := 0; r0 < rows; r0 += tile {
		for c0 := 0; c0 < cols; c0 += tile {
			for r := r0; r < min(r0+tile, rows); r++ {
				for c := c0; c < min(c0+tile, cols); c++ {
					dst[c*rows+r] = src[r*cols+c]
				}
			}
		}
	}
}

// checkTiedCopy compares a second stored copy of the embedding with the resident one.
func checkTiedCopy(resident *tensors.Tensor, values []float32) error {
	var mismatch error
	err := resident.ConstFlatData(func(flat any) {
		for j, v := range values {
			var got float32
			switch f := flat.(type) {
			case []float32:
				got = f[j]
			case []float16.Float16:
				got, v = f[j].Float32(), float16.FromFloat32(v).Float32()
			case []bfloat16.BFloat16:
				got, v = f[j].Float32(), bfloat16.FromFloat32(v).Float32()
			}
			if got != v {
				mismatch = fmt.Errorf("first difference at element %d: %g vs %g", j, got, v)
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return mismatch
}
