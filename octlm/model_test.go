package octlm

import (
	"fmt"
	"github.com/octlm/octlm/octlm/synth"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gomlx/compute"
	_ "github.com/gomlx/compute/gobackend"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/xla"
)

// fixtures are the tiny random Qwen3 checkpoints with float32 reference logits.
var fixtures = []string{"tiny-qwen3", "tiny-qwen3-mha", "tiny-qwen3-untied"}

// parityTolerance is the gate fixed in advance by the parity protocol.
const parityTolerance = 1e-3

var (
	backendOnce sync.Once
	testBackend compute.Backend
)

func goBackend(t testing.TB) compute.Backend {
	backendOnce.Do(func() {
		b, _, err := xla.Open(xla.Go) // with the executors octlm's commands run it with
		if err != nil {
			t.Fatalf("go backend: %v", err)
		}
		testBackend = b
	})
	return testBackend
}

// synthModel writes a synthetic model of cfg's shape (weights from seed, no tokenizer) into a
// temporary folder of tb's and returns the folder.
func synthModel(tb testing.TB, cfg synth.QwenLike, seed int64) string {
	tb.Helper()
	dir := tb.TempDir()
	if err := synth.WriteWith(dir, cfg, synth.Options{Seed: seed, NoTokenizer: true}); err != nil {
		tb.Fatal(err)
	}
	return dir
}

func fixtureDir(name string) string { return filepath.Join("..", "testdata", name) }

func loadFixture(t testing.TB, name string, dtype DType) *Model {
	t.Helper()
	m, err := Load(fixtureDir(name), LoadOptions{Backend: goBackend(t), DType: dtype})
	if err != nil {
		t.Fatalf("loading %s: %v", name, err)
	}
	t.Cleanup(m.Close)
	return m
}

type referenceCase struct {
	ids    []int
	logits Logits
}

// readReference reads reference/reference-logits-N.safetensors for every case of a fixture.
func readReference(t testing.TB, name string) []referenceCase {
	t.Helper()
	var cases []referenceCase
	for n := 0; ; n++ {
		path := filepath.Join(fixtureDir(name), "reference", fmt.Sprintf("reference-logits-%d.safetensors", n))
		if _, err := os.Stat(path); err != nil {
			break
		}
		f, err := loader.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		idsInfo, ok1 := f.Lookup("ids")
		logitsInfo, ok2 := f.Lookup("logits")
		if !ok1 || !ok2 {
			t.Fatalf("%s: missing ids or logits", path)
		}
		ids64 := make([]int64, idsInfo.NumElements())
		if err := f.ReadInt64(idsInfo, ids64); err != nil {
			t.Fatal(err)
		}
		c := referenceCase{ids: make([]int, len(ids64))}
		for i, id := range ids64 {
			c.ids[i] = int(id)
		}
		c.logits = Logits{Rows: logitsInfo.Shape[0], Vocab: logitsInfo.Shape[1], Data: make([]float32, logitsInfo.NumElements())}
		if err := f.ReadFloat32(logitsInfo, c.logits.Data); err != nil {
			t.Fatal(err)
		}
		f.Close()
		cases = append(cases, c)
	}
	if len(cases) == 0 {
		t.Fatalf("%s: no reference cases", name)
	}
	return cases
}

// maxAbsError is the largest |got - want| over all logits; NaN or Inf counts as infinite.
func maxAbsError(t testing.TB, got, want Logits) float64 {
	t.Helper()
	if got.Rows != want.Rows || got.Vocab != want.Vocab {
		t.Fatalf("logits shape [%d, %d], reference [%d, %d]", got.Rows, got.Vocab, want.Rows, want.Vocab)
	}
	worst := 0.0
	for i, g := range got.Data {
		d := math.Abs(float64(g) - float64(want.Data[i]))
		if math.IsNaN(d) || math.IsInf(float64(g), 0) {
			return math.Inf(1)
		}
		worst = max(worst, d)
	}
	return worst
}

func concatLogits(parts ...Logits) Logits {
	out := Logits{Vocab: parts[0].Vocab}
	for _, p := range parts {
		out.Rows += p.Rows
		out.Data = append(out.Data, p.Data...)
	}
	return out
}

// TestParity runs every reference case through the full path, the cached path split at the
// half, and token-by-token decoding, and holds each to the 1e-3 gate (aiming for 1e-4).
func TestParity(t *testing.T) {
	for _, name := range fixtures {
		m := loadFixture(t, name, Float32)
		for n, ref := range readReference(t, name) {
			paths := map[string]func() (Logits, error){
				"full": func() (Logits, error) { return m.Forward(ref.ids) },
				"cached": func() (Logits, error) {
					split := max(1, len(ref.ids)/2)
					cache, err := m.NewCache(split)
					if err != nil {
						return Logits{}, err
					}
					defer cache.Close()
					first, err := m.ForwardCached(ref.ids[:split], cache)
					if err != nil || split == len(ref.ids) {
						return first, err
					}
					second, err := m.ForwardCached(ref.ids[split:], cache)
					return concatLogits(first, second), err
				},
				"token-by-token": func() (Logits, error) { return tokenByToken(m, ref.ids) },
			}
			for path, run := range paths {
				t.Run(fmt.Sprintf("%s/case%d/%s", name, n, path), func(t *testing.T) {
					got, err := run()
					if err != nil {
						t.Fatal(err)
					}
					worst := maxAbsError(t, got, ref.logits)
					t.Logf("%d positions: max abs error %.3g", len(ref.ids), worst)
					if worst > parityTolerance {
						t.Fatalf("max abs error %.3g exceeds the gate %g", worst, parityTolerance)
					}
					if worst > 1e-4 {
						t.Errorf("max abs error %.3g: within the gate but above the 1e-4 this decoder reaches", worst)
					}
				})
			}
		}
	}
}

// TestParityGateCatchesBugs shows the gate can fail: the wrong RoPE pairing and a perturbed
// weight both push the error far past 1e-3.
func TestParityGateCatchesBugs(t *testing.T) {
	ref := readReference(t, "tiny-qwen3")[2]
	tests := []struct {
		name   string
		mutate func(m *Model)
	}{
		{"neighbour RoPE pairing", func(m *Model) { m.editConfig(func(c *Config) { c.RopeSplit = false }) }},
		{"perturbed q_proj", func(m *Model) { m.perturb("model.layers.1.self_attn.q_proj.weight", 0.01) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := loadFixture(t, "tiny-qwen3", Float32)
			tt.mutate(m)
			got, err := m.Forward(ref.ids)
			if err != nil {
				t.Fatal(err)
			}
			worst := maxAbsError(t, got, ref.logits)
			t.Logf("max abs error %.3g", worst)
			if worst <= parityTolerance {
				t.Fatalf("a broken model passed the gate: max abs error %.3g", worst)
			}
		})
	}
}

// TestGreedy reproduces reference/greedy.json: 24 greedy tokens from each prompt.
func TestGreedy(t *testing.T) {
	for _, name := range fixtures {
		m := loadFixture(t, name, Float32)
		for n, c := range readGreedy(t, name) {
			t.Run(fmt.Sprintf("%s/%d", name, n), func(t *testing.T) {
				res, err := m.Generate(c.PromptIDs, GenerateOptions{MaxNewTokens: len(c.GeneratedIDs), Sampling: Greedy()})
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(res.GeneratedIDs) != fmt.Sprint(c.GeneratedIDs) {
					t.Fatalf("generated %v\nreference %v (min top-2 gap %.3g)", res.GeneratedIDs, c.GeneratedIDs, c.MinTop2Gap)
				}
			})
		}
	}
}

func TestBadInput(t *testing.T) {
	m := loadFixture(t, "tiny-qwen3", Float32)
	tests := []struct {
		name string
		ids  []int
	}{
		{"empty", nil},
		{"negative id", []int{1, -1}},
		{"id past the vocabulary", []int{m.Shape().Vocab}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := m.Forward(tt.ids); err == nil {
				t.Fatalf("Forward(%v) succeeded", tt.ids)
			}
		})
	}
	m.shape.Context = 4
	if _, err := m.Forward([]int{1, 2, 3, 4, 5}); err == nil {
		t.Fatal("a prompt longer than the context was accepted")
	}
}

// perturb adds delta to every element of the named weight.
func (m *Model) perturb(name string, delta float32) {
	for i, s := range m.specs {
		if s.Name == name {
			if err := m.weights[i].MutableFlatData(func(flat any) {
				for j := range flat.([]float32) {
					flat.([]float32)[j] += delta
				}
			}); err != nil {
				panic(err)
			}
			return
		}
	}
	panic("no weight " + name)
}

// tokenByToken runs ids one at a time on a growing KV cache, as decoding does, and returns the
// logits of every position.
func tokenByToken(m *Model, ids []int) (Logits, error) {
	cache, err := m.NewCache(1)
	if err != nil {
		return Logits{}, err
	}
	defer cache.Close()
	parts := make([]Logits, 0, len(ids))
	for _, id := range ids {
		l, err := m.ForwardCached([]int{id}, cache)
		if err != nil {
			return Logits{}, err
		}
		parts = append(parts, l)
	}
	return concatLogits(parts...), nil
}

// editConfig changes a loaded Qwen3 model's config (a test's deliberate bug) before its first run.
func (m *Model) editConfig(edit func(*Config)) {
	c := m.arch.(qwen3).c
	edit(&c)
	m.arch = qwen3{c}
}

// qwen3Of is a loaded Qwen3 model's config; it fails the test for another architecture.
func qwen3Of(tb testing.TB, m *Model) Config {
	tb.Helper()
	c, ok := m.Qwen3Config()
	if !ok {
		tb.Fatalf("model is not Qwen3")
	}
	return c
}
