package figures

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gomlx/compute"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/synth"
	"github.com/octlm/octlm/parity"
	"github.com/octlm/octlm/units"
)

// hybridConfig is the part of a Qwen3.5 config.json (the multimodal wrapper's text_config, or
// the text-only form) that HybridStack reads.
type hybridConfig struct {
	LayerTypes   []string `json:"layer_types"`
	Layers       int      `json:"num_hidden_layers"`
	KVHeads      int      `json:"num_key_value_heads"`
	HeadDim      int      `json:"head_dim"`
	KeyHeads     int      `json:"linear_num_key_heads"`
	ValueHeads   int      `json:"linear_num_value_heads"`
	KeyHeadDim   int      `json:"linear_key_head_dim"`
	ValueHeadDim int      `json:"linear_value_head_dim"`
	ConvKernel   int      `json:"linear_conv_kernel_dim"`
}

func readHybridConfig(dir string) (hybridConfig, error) {
	path := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return hybridConfig{}, fmt.Errorf("figures: %w", err)
	}
	var wrapper struct {
		Text *hybridConfig `json:"text_config"`
	}
	var c hybridConfig
	if err := json.Unmarshal(data, &wrapper); err != nil {
		return c, fmt.Errorf("figures: %s: %w", path, err)
	}
	if wrapper.Text != nil {
		c = *wrapper.Text
	} else if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("figures: %s: %w", path, err)
	}
	if len(c.LayerTypes) == 0 || len(c.LayerTypes) != c.Layers {
		return c, fmt.Errorf("figures: %s: %d layer_types for %d layers: not a Qwen3.5 config", path, len(c.LayerTypes), c.Layers)
	}
	return c, nil
}

// HybridStack tabulates a Qwen3.5 checkpoint layer by layer: the layer type, its token mixer's
// weights as stored (names under linear_attn or self_attn, with shapes) and what the cache keeps
// for it in float32 after `positions` positions: keys and values for an attention layer (growing
// with the positions), a convolution state and a recurrent state per value head for a DeltaNet
// layer (fixed).
func HybridStack(dir string, positions int) (Table, error) {
	c, err := readHybridConfig(dir)
	if err != nil {
		return Table{}, err
	}
	ck, err := loader.OpenCheckpoint(dir)
	if err != nil {
		return Table{}, err
	}
	defer ck.Close()
	prefix := "model.language_model.layers."
	if _, ok := ck.Lookup(prefix + "0.input_layernorm.weight"); !ok {
		prefix = "model.layers."
	}
	t := Table{Name: "05-hybrid-stack", Caption: fmt.Sprintf("%s: the stack, and the float32 cache after %s positions", filepath.Base(dir), units.Commas(int64(positions))),
		Header: []string{"layer", "type", "token mixer weights", "cache holds", "cache bytes"}}
	for i, kind := range c.LayerTypes {
		mixer := "self_attn."
		if kind == "linear_attention" {
			mixer = "linear_attn."
		}
		var ws []string
		for e, err := range ck.Tensors() {
			if err != nil {
				return Table{}, err
			}
			name, ok := strings.CutPrefix(e.Info.Name, prefix+strconv.Itoa(i)+"."+mixer)
			if ok {
				ws = append(ws, fmt.Sprintf("%s %v", name, e.Info.Shape))
			}
		}
		slices.Sort(ws)
		var holds string
		var bytes int64
		switch kind {
		case "full_attention":
			holds = fmt.Sprintf("K and V [%d positions, %d kv heads, %d]", positions, c.KVHeads, c.HeadDim)
			bytes = int64(2*positions*c.KVHeads*c.HeadDim) * 4
		case "linear_attention":
			conv := 2*c.KeyHeads*c.KeyHeadDim + c.ValueHeads*c.ValueHeadDim
			holds = fmt.Sprintf("convolution state [%d, %d] + S [%d value heads, %d, %d]", c.ConvKernel-1, conv, c.ValueHeads, c.KeyHeadDim, c.ValueHeadDim)
			bytes = int64((c.ConvKernel-1)*conv+c.ValueHeads*c.KeyHeadDim*c.ValueHeadDim) * 4
		default:
			return Table{}, fmt.Errorf("figures: %s: layer %d: layer type %q", dir, i, kind)
		}
		t.Rows = append(t.Rows, []string{strconv.Itoa(i), kind, strings.Join(ws, ", "), holds, units.Bytes(bytes)})
	}
	return t, nil
}

// cacheModels are the two decoders CacheGrowth compares, at their Hub shapes.
var cacheModels = []struct {
	label  string
	config func() []byte
	max    int // context length
}{
	{"Qwen3-0.6B (28 attention layers)", func() []byte { return synth.Qwen3_0_6B().ConfigJSON() }, 40960},
	{"Qwen3.5-0.8B (6 attention + 18 DeltaNet layers)", func() []byte { return synth.Qwen35_0_8B().ConfigJSON() }, 262144},
}

// CacheGrowth draws the bytes octlm's float32 cache holds against the number of positions, for
// Qwen3-0.6B and Qwen3.5-0.8B at their exact shapes (octlm.MemoryNeededDir's cache size for each
// capacity, from config.json alone: no weights are read), and tabulates a few lengths. tmp is a
// folder for the two config.json files.
func CacheGrowth(backend compute.Backend, tmp string) (Figure, Table, error) {
	var positions []int
	for p := 256; p <= 262144; p *= 2 {
		positions = append(positions, p)
		if p == 32768 {
			positions = append(positions, 40960) // Qwen3's whole context
		}
	}
	tabulate := []int{256, 4096, 32768, 40960, 131072, 262144}
	c := chart{Title: "cache bytes against positions (float32)", Width: 760,
		X: axis{Label: "positions", Log: true}, Y: axis{Label: "MiB", Log: true}}
	t := Table{Name: "05-cache-growth", Caption: "float32 cache after N positions",
		Header: []string{"positions"}}
	at := map[int][]string{}
	for _, m := range cacheModels {
		dir := filepath.Join(tmp, strings.Fields(m.label)[0])
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return Figure{}, Table{}, fmt.Errorf("figures: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "config.json"), m.config(), 0o644); err != nil {
			return Figure{}, Table{}, fmt.Errorf("figures: %w", err)
		}
		s := series{Label: m.label}
		t.Header = append(t.Header, m.label)
		for _, p := range positions {
			if p > m.max {
				at[p] = append(at[p], "beyond its context")
				continue
			}
			mem, err := octlm.MemoryNeededDir(dir, octlm.Float32, backend, p)
			if err != nil {
				return Figure{}, Table{}, err
			}
			s.X = append(s.X, float64(p))
			s.Y = append(s.Y, float64(mem.KVCache)/(1<<20))
			at[p] = append(at[p], units.Bytes(mem.KVCache))
		}
		c.Series = append(c.Series, s)
	}
	for _, p := range tabulate {
		t.Rows = append(t.Rows, append([]string{units.Commas(int64(p))}, at[p]...))
	}
	c.Note = "a DeltaNet layer's state is the same at every length; an attention layer adds one K and one V row per position"
	return Figure{Name: "05-cache-growth", Title: c.Title, SVG: c.render()}, t, nil
}

// TraceTable tabulates one case's trace (parity.Trace): the largest error of every hidden state
// against the reference's activations, and where it parts.
func TraceTable(label string, tr parity.CaseTrace) Table {
	t := Table{Name: "05-trace", Caption: fmt.Sprintf("%s, case %d: hidden states against the reference's activations", label, tr.Case),
		Header: []string{"hidden state", "type", "max |Δ|", "at position", "scaled", "first position past the tolerance"}}
	for _, l := range tr.Layers {
		name := "embedding"
		if l.Layer >= 0 {
			name = "after layer " + strconv.Itoa(l.Layer)
		}
		first := "—"
		if l.FirstParted >= 0 {
			first = strconv.Itoa(l.FirstParted)
		}
		t.Rows = append(t.Rows, []string{name, l.Type, fmt.Sprintf("%.2e", l.MaxAbsoluteError), strconv.Itoa(l.MaxPosition), fmt.Sprintf("%.2e", l.Scaled), first})
	}
	return t
}
