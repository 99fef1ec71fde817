package octlm

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/octlm/octlm/loader"
)

// randomAdapter is a LoRA of rank 3 on the Linear weights of d whose names end in one of suffixes.
func randomAdapter(t *testing.T, d *Decoder, suffixes ...string) *LoRA {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	l := &LoRA{Scale: 1.5, Modules: map[string]LoRAMatrices{}}
	for _, info := range d.Weights() {
		for _, s := range suffixes {
			if !info.Linear || !strings.HasSuffix(info.Name, s) {
				continue
			}
			m := LoRAMatrices{Rank: 3, Out: info.Shape[0], In: info.Shape[1]}
			for range m.Rank * m.In {
				m.A = append(m.A, float32(rng.NormFloat64()*0.05))
			}
			for range m.Out * m.Rank {
				m.B = append(m.B, float32(rng.NormFloat64()*0.05))
			}
			l.Modules[info.Name] = m
		}
	}
	if len(l.Modules) == 0 {
		t.Fatalf("no Linear weight ends in %v", suffixes)
	}
	return l
}

// mergedFixture writes the fixture with the adapter merged into its weights, in float32:
// W + scale·B·A.
func mergedFixture(t *testing.T, name string, l *LoRA) string {
	t.Helper()
	return rewriteFixture(t, name, func(ts []loader.WriteTensor) []loader.WriteTensor {
		for i, tensor := range ts {
			m, ok := l.Modules[tensor.Name]
			if !ok {
				continue
			}
			if tensor.DType != loader.BF16 {
				t.Fatalf("%s: %s, want BF16", tensor.Name, tensor.DType)
			}
			data := make([]byte, 4*m.Out*m.In)
			for o := range m.Out {
				for in := range m.In {
					j := o*m.In + in
					w := float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(tensor.Data[2*j:])) << 16))
					for r := range m.Rank {
						w += l.Scale * float64(m.B[o*m.Rank+r]) * float64(m.A[r*m.In+in])
					}
					binary.LittleEndian.PutUint32(data[4*j:], math.Float32bits(float32(w)))
				}
			}
			ts[i] = loader.WriteTensor{Name: tensor.Name, DType: loader.F32, Shape: tensor.Shape, Data: data}
		}
		return ts
	})
}

// TestAdapterUnmerged: a LoRA applied unmerged in the step graph (LoadOptions.Adapter) gives the
// logits of the checkpoint with the adapter merged, on the full and the cached paths, on both
// engines (ONNX Runtime fuses q/k/v, gate/up and the DeltaNet's input projections: the adapter is
// applied per part).
func TestAdapterUnmerged(t *testing.T) {
	skipNumericsUnderRace(t)
	t.Parallel()
	ids := []int{5, 9, 2, 77, 31, 8, 8, 140, 3, 60, 11}
	for _, tt := range []struct {
		fixture  string
		suffixes []string
	}{
		{"tiny-qwen3", []string{"q_proj.weight", "v_proj.weight", "o_proj.weight", "up_proj.weight", "layers.1.mlp.down_proj.weight"}},
		{"tiny-qwen35", []string{"in_proj_qkv.weight", "in_proj_z.weight", "in_proj_a.weight", "out_proj.weight", "self_attn.q_proj.weight", "gate_proj.weight"}},
	} {
		for _, engine := range []string{"go", "onnx"} {
			t.Run(tt.fixture+"/"+engine, func(t *testing.T) {
				backend := engineBackend(t, engine)
				d, err := ReadDecoder(fixtureDir(tt.fixture))
				if err != nil {
					t.Fatal(err)
				}
				adapter := randomAdapter(t, d, tt.suffixes...)
				unmerged, err := Load(fixtureDir(tt.fixture), LoadOptions{Backend: backend, Adapter: adapter})
				if err != nil {
					t.Fatal(err)
				}
				defer unmerged.Close()
				merged, err := Load(mergedFixture(t, tt.fixture, adapter), LoadOptions{Backend: backend})
				if err != nil {
					t.Fatal(err)
				}
				defer merged.Close()
				base := loadFixture(t, tt.fixture, Float32)
				want, err := merged.Forward(ids)
				if err != nil {
					t.Fatal(err)
				}
				plain, err := base.Forward(ids)
				if err != nil {
					t.Fatal(err)
				}
				effect, _ := maxAbsDiff(plain.Data, want.Data)
				if effect < 1e-2 {
					t.Fatalf("the adapter changes the logits by only %.3g: the test would not see it missing", effect)
				}
				got, err := unmerged.Forward(ids)
				if err != nil {
					t.Fatal(err)
				}
				cache, err := unmerged.NewCache(len(ids))
				if err != nil {
					t.Fatal(err)
				}
				defer cache.Close()
				first, err := unmerged.ForwardCached(ids[:4], cache)
				if err != nil {
					t.Fatal(err)
				}
				rest, err := unmerged.ForwardCached(ids[4:], cache)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range []struct {
					path string
					data []float32
				}{{"full", got.Data}, {"cached", append(first.Data, rest.Data...)}} {
					diff, scale := maxAbsDiff(c.data, want.Data)
					t.Logf("%s: unmerged vs merged max abs difference %.2g (max |logit| %.3g; the adapter moves them by %.3g)", c.path, diff, scale, effect)
					if diff > 1e-5*max(1, scale) {
						t.Errorf("%s: unmerged and merged logits differ by %.3g", c.path, diff)
					}
				}
			})
		}
	}
}

// maxAbsDiff is max |a−b| and max |b|.
func maxAbsDiff(a, b []float32) (diff, scale float64) {
	for i := range b {
		diff = max(diff, math.Abs(float64(a[i]-b[i])))
		scale = max(scale, math.Abs(float64(b[i])))
	}
	return diff, scale
}

// TestAdapterRefusals: an adapter on a weight the model lacks, or of the wrong size, is refused
// by name.
func TestAdapterRefusals(t *testing.T) {
	t.Parallel()
	d, err := ReadDecoder(fixtureDir("tiny-qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	good := randomAdapter(t, d, "layers.0.self_attn.q_proj.weight").Modules["model.layers.0.self_attn.q_proj.weight"]
	short := good
	short.A = short.A[1:]
	wide := good
	wide.In++
	for _, tt := range []struct {
		name    string
		modules map[string]LoRAMatrices
		want    string
	}{
		{"unknown", map[string]LoRAMatrices{"model.layers.0.self_attn.x_proj.weight": good}, "x_proj.weight\": not a Linear weight"},
		{"norm", map[string]LoRAMatrices{"model.norm.weight": good}, "model.norm.weight\": not a Linear weight"},
		{"values", map[string]LoRAMatrices{"model.layers.0.self_attn.q_proj.weight": short}, "q_proj.weight\": rank 3 with"},
		{"size", map[string]LoRAMatrices{"model.layers.0.self_attn.q_proj.weight": wide}, "q_proj.weight\": 65 → 128"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(fixtureDir("tiny-qwen3"), LoadOptions{Backend: goBackend(t), Adapter: &LoRA{Scale: 1, Modules: tt.modules}})
			if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one matching ErrBadInput containing %q", err, tt.want)
			}
		})
	}
}
