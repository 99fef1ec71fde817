package octlm

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified

	"github.com/octlm/octlm/loader"
)

// countingQwen3 is a second architecture for the seam's tests: Qwen3 with one more, fixed-size
// cache state (a float32 counter of the real rows run so far, as a recurrent state advances
// only on real rows), a tensor namespace it skips (model.visual.*) and its final norm kept in
// float32.
type countingQwen3 struct{ qwen3 }

func (a countingQwen3) skip(name string) bool { return strings.HasPrefix(name, "model.visual.") }

func (a countingQwen3) weights() []weightSpec {
	specs := a.qwen3.weights()
	for i := range specs {
		if specs[i].Name == "model.norm.weight" {
			specs[i].Float32 = true
		}
	}
	return specs
}

func (a countingQwen3) state() []stateSpec {
	return append(a.qwen3.state(), stateSpec{Name: "count", Dims: []int{1}, PosAxis: -1, Float32: true})
}

func (a countingQwen3) layers(s *step, w weightSet, state []*Node) ([]*Node, []*Node) {
	n := len(state) - 1
	hiddens, newState := a.qwen3.layers(s, w, state[:n])
	real := ReduceSum(ConvertDType(s.real, dtypes.Float32), 1) // [B]: each sequence's real rows
	return hiddens, append(newState, Add(state[n], InsertAxes(real, -1)))
}

func (a countingQwen3) logits(s *step, w weightSet, hidden *Node) *Node {
	// The float32 norm weight meets float32 activations here (the parity dtype).
	return a.qwen3.logits(s, w, hidden)
}

// count reads the counter state of a countingQwen3 cache.
func count(t *testing.T, c *Cache) float32 {
	t.Helper()
	v, err := stateFlat(c, len(c.state)-1)
	if err != nil {
		t.Fatal(err)
	}
	return v[0]
}

// TestSecondArchitecture runs a second architecture through the shared machinery: loading
// (skipped tensors, a float32 weight), the step graph with a fixed-size state that must see only
// the real rows of padded chunks and survive the cache's growth, Truncate refusing to go back,
// and GenerateOn falling back to running the whole prompt.
func TestSecondArchitecture(t *testing.T) {
	t.Parallel()
	dir := rewriteFixture(t, "tiny-qwen3", func(ts []loader.WriteTensor) []loader.WriteTensor {
		return append(ts, loader.WriteTensor{Name: "model.visual.patch_embed.weight", DType: loader.F32, Shape: []int{2}, Data: make([]byte, 8)})
	})
	if _, err := Load(dir, LoadOptions{Backend: goBackend(t)}); err == nil || !strings.Contains(err.Error(), `"model.visual.patch_embed.weight": unexpected checkpoint tensor`) {
		t.Fatalf("Qwen3 loaded a checkpoint with a vision tensor: %v", err)
	}
	ckpt, err := loader.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ckpt.Close()
	cfg, err := ReadQwen3Config(fixtureDir("tiny-qwen3") + "/config.json")
	if err != nil {
		t.Fatal(err)
	}
	arch := countingQwen3{qwen3{cfg}}

	bf16, err := load(arch, ckpt, LoadOptions{Backend: goBackend(t), DType: BFloat16})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range bf16.specs {
		want := dtypes.BFloat16
		if s.Name == "model.norm.weight" {
			want = dtypes.Float32
		}
		if got := bf16.weights[i].DType(); got != want {
			t.Errorf("%s resident as %s, want %s", s.Name, got, want)
		}
	}
	bf16.Close()

	m, err := load(arch, ckpt, LoadOptions{Backend: goBackend(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Parameters() != cfg.Parameters() {
		t.Errorf("the weight table holds %d parameters, the config counts %d", m.Parameters(), cfg.Parameters())
	}
	cases := readReference(t, "tiny-qwen3")
	ref := cases[len(cases)-1] // more than 64 positions: the cache grows
	if len(ref.ids) <= minCacheCapacity {
		t.Fatalf("case has %d ids, want more than %d", len(ref.ids), minCacheCapacity)
	}
	cache, err := m.NewCache(1)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	if cache.CanTruncate() || cache.FixedBytes() != 4 {
		t.Fatalf("CanTruncate %v, FixedBytes %d: want false, 4", cache.CanTruncate(), cache.FixedBytes())
	}
	split := 5 // a chunk of 5 real rows padded to 8
	first, err := m.ForwardCached(ref.ids[:split], cache)
	if err != nil {
		t.Fatal(err)
	}
	if got := count(t, cache); got != float32(split) {
		t.Fatalf("after %d tokens in a padded chunk the state counted %v rows", split, got)
	}
	rest, err := m.ForwardCached(ref.ids[split:], cache)
	if err != nil {
		t.Fatal(err)
	}
	if got := count(t, cache); got != float32(len(ref.ids)) || cache.Capacity() <= minCacheCapacity {
		t.Fatalf("after %d tokens (capacity %d) the state counted %v", len(ref.ids), cache.Capacity(), got)
	}
	all := Logits{Rows: len(ref.ids), Vocab: first.Vocab, Data: append(slices.Clone(first.Data), rest.Data...)}
	if worst := maxAbsError(t, all, ref.logits); worst > 1e-4 {
		t.Errorf("max abs error %.3g", worst)
	}

	if err := cache.Truncate(split); !errors.Is(err, ErrCannotTruncate) {
		t.Fatalf("Truncate(%d) on a recurrent state: %v, want ErrCannotTruncate", split, err)
	}
	if cache.Len() != len(ref.ids) {
		t.Fatalf("a refused Truncate changed the cache to %d positions", cache.Len())
	}
	// A prompt that shares only part of the cache runs again from the start.
	prompt := slices.Clone(ref.ids[:split+1])
	g, err := m.GenerateOn(cache, prompt, GenerateOptions{MaxNewTokens: 2, Sampling: Greedy()})
	if err != nil {
		t.Fatal(err)
	}
	if g.Reused != 0 || count(t, cache) != float32(len(prompt)+1) {
		t.Fatalf("GenerateOn reused %d positions, state counted %v: want 0 and %d", g.Reused, count(t, cache), len(prompt)+1)
	}
	// A prompt that extends what the cache holds reuses all of it.
	prompt = append(slices.Clone(cache.IDs()), 7, 8)
	held := cache.Len()
	if g, err = m.GenerateOn(cache, prompt, GenerateOptions{MaxNewTokens: 1, Sampling: Greedy()}); err != nil {
		t.Fatal(err)
	}
	if g.Reused != held || count(t, cache) != float32(len(prompt)) {
		t.Fatalf("GenerateOn reused %d of %d positions, state counted %v: want %d", g.Reused, held, count(t, cache), len(prompt))
	}
}
