package octlm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// qwen35Fixtures are the Qwen3.5 checkpoints in testdata/ with float64 references: the shared
// one, an untied one in three shards, and one with three value heads per key head whose
// layer_types differ from full_attention_interval.
var qwen35Fixtures = []string{"tiny-qwen35", "tiny-qwen35-sharded", "tiny-qwen35-wide"}

// qwen35Gate is the seed's parity gate; the fixture README puts an independent float32 engine
// at 2–6e-4 on this architecture (the reference's own float32 run is 4.2e-4 from float64).
const qwen35Gate = 1e-3

func loadQwen35Fixture(t testing.TB, name string, chunks ...ChunkOptions) *Model {
	t.Helper()
	opts := LoadOptions{Backend: goBackend(t)}
	if len(chunks) > 0 {
		opts.Chunks = chunks[0]
	}
	m, err := Load(fixtureDir(name), opts)
	if err != nil {
		t.Fatalf("loading %s: %v", name, err)
	}
	t.Cleanup(m.Close)
	return m
}

// TestQwen35Parity runs every reference case through the full path, the cached path in
// uneven chunks on top of a cache, and (for the short cases) token by token, each held to the
// gate. Errors are logged so a change in the float32 floor shows.
func TestQwen35Parity(t *testing.T) {
	for _, name := range qwen35Fixtures {
		m := loadQwen35Fixture(t, name)
		for n, ref := range readReference(t, name) {
			paths := []struct {
				name string
				run  func() (Logits, error)
			}{
				{"full", func() (Logits, error) { return m.Forward(ref.ids) }},
				{"chunks of 5, 37, rest", func() (Logits, error) {
					cache, err := m.NewCache(1)
					if err != nil {
						return Logits{}, err
					}
					defer cache.Close()
					var parts []Logits
					for at, sizes := 0, []int{5, 37, len(ref.ids)}; at < len(ref.ids); sizes = sizes[1:] {
						end := min(at+sizes[0], len(ref.ids))
						l, err := m.ForwardCached(ref.ids[at:end], cache)
						if err != nil {
							return Logits{}, err
						}
						parts = append(parts, l)
						at = end
					}
					return concatLogits(parts...), nil
				}},
			}
			if len(ref.ids) <= 70 {
				paths = append(paths, struct {
					name string
					run  func() (Logits, error)
				}{"token by token", func() (Logits, error) {
					cache, err := m.NewCache(1)
					if err != nil {
						return Logits{}, err
					}
					defer cache.Close()
					var parts []Logits
					for i := range ref.ids {
						l, err := m.ForwardCached(ref.ids[i:i+1], cache)
						if err != nil {
							return Logits{}, err
						}
						parts = append(parts, l)
					}
					return concatLogits(parts...), nil
				}})
			}
			for _, p := range paths {
				got, err := p.run()
				if err != nil {
					t.Fatalf("%s case %d %s: %v", name, n, p.name, err)
				}
				e := maxAbsError(t, got, ref.logits)
				t.Logf("%s case %d (%d tokens) %s: max abs error %.3g", name, n, len(ref.ids), p.name, e)
				if e > qwen35Gate {
					t.Errorf("%s case %d %s: max abs error %.3g > %g", name, n, p.name, e, qwen35Gate)
				}
			}
		}
	}
}

// TestQwen35SmallChunks forces prefill steps of 16 rows, so the 200-token case crosses many
// steps (and the DeltaNet state and convolution state are carried between them, with padding
// rows in the last step).
func TestQwen35SmallChunks(t *testing.T) {
	m := loadQwen35Fixture(t, "tiny-qwen35", ChunkOptions{MinRows: 16, MaxRows: 16})
	ref := readReference(t, "tiny-qwen35")[3]
	got, err := m.Forward(ref.ids)
	if err != nil {
		t.Fatal(err)
	}
	e := maxAbsError(t, got, ref.logits)
	t.Logf("%d tokens in steps of 16: max abs error %.3g", len(ref.ids), e)
	if e > qwen35Gate {
		t.Errorf("max abs error %.3g > %g", e, qwen35Gate)
	}
}

// TestQwen35Greedy reproduces reference/greedy.json with the cached path.
func TestQwen35Greedy(t *testing.T) {
	for _, name := range qwen35Fixtures {
		m := loadQwen35Fixture(t, name)
		data, err := os.ReadFile(filepath.Join(fixtureDir(name), "reference", "greedy.json"))
		if err != nil {
			t.Fatal(err)
		}
		var cases []struct {
			Prompt    []int `json:"prompt_ids"`
			Generated []int `json:"generated_ids"`
		}
		if err := json.Unmarshal(data, &cases); err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			cache, err := m.NewCache(1)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			input := c.Prompt
			for len(got) < len(c.Generated) {
				logits, err := m.Next(input, cache)
				if err != nil {
					t.Fatal(err)
				}
				id := Argmax(logits)
				got = append(got, id)
				input = []int{id}
			}
			cache.Close()
			if !slices.Equal(got, c.Generated) {
				t.Errorf("%s prompt %v: greedy %v, reference %v", name, c.Prompt, got, c.Generated)
			}
		}
	}
}
