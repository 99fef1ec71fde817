package figures

import (
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

// readHybridConfig reads a Qwen3.5 config.json with octlm's parser (bounded read, checked
// fields); the one call to re-point when that parser's name changes.
func readHybridConfig(dir string) (octlm.Qwen35Config, error) {
	return octlm.ReadQwen35Config(filepath.Join(dir, "config.json"))
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
		if kind == octlm.LinearAttention {
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
		case octlm.FullAttention:
			holds = fmt.Sprintf("K and V [%d positions, %d kv heads, %d]", positions, c.KVHeads, c.HeadDim)
			bytes = int64(2*positions*c.KVHeads*c.HeadDim) * 4
		case octlm.LinearAttention:
			conv := c.ConvDim()
			holds = fmt.Sprintf("convolution state [%d, %d] + S [%d value heads, %d, %d]", c.ConvKernel-1, conv, c.LinValueHeads, c.LinKeyDim, c.LinValueDim)
			bytes = int64((c.ConvKernel-1)*conv+c.LinValueHeads*c.LinKeyDim*c.LinValueDim) * 4
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
	return Table{Name: "05-trace", Caption: fmt.Sprintf("%s, case %d: hidden states against the reference's activations", label, tr.Case),
		Header: parity.TraceHeader(), Rows: tr.Rows()}
}
