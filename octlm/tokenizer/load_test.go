package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// mutate loads testdata/small.json as generic JSON, applies f and writes the result to a
// temporary tokenizer.json, returning its path.
func mutate(t *testing.T, f func(m map[string]any)) string {
	t.Helper()
	data, err := os.ReadFile("testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadErrors(t *testing.T) {
	model := func(m map[string]any) map[string]any { return m["model"].(map[string]any) }
	for _, c := range []struct {
		name string
		f    func(m map[string]any)
		want string
	}{
		{"model type", func(m map[string]any) { model(m)["type"] = "WordPiece" }, `field model.type: "WordPiece"`},
		{"no model", func(m map[string]any) { delete(m, "model") }, "field model: missing"},
		{"no vocab", func(m map[string]any) { delete(model(m), "vocab") }, "field model.vocab: missing"},
		{"no merges", func(m map[string]any) { delete(model(m), "merges") }, "field model.merges: missing"},
		{"dropout", func(m map[string]any) { model(m)["dropout"] = 0.1 }, "field model.dropout"},
		{"suffix", func(m map[string]any) { model(m)["end_of_word_suffix"] = "</w>" }, "field model.end_of_word_suffix"},
		{"normalizer", func(m map[string]any) { m["normalizer"] = map[string]any{"type": "NFKC"} }, "field normalizer"},
		{"regex", func(m map[string]any) {
			m["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["pattern"] = map[string]any{"Regex": `\s+`}
		}, "field pre_tokenizer: split regex"},
		{"no pre-tokenizer", func(m map[string]any) { m["pre_tokenizer"] = nil }, "field pre_tokenizer: missing"},
		{"decoder", func(m map[string]any) { m["decoder"] = map[string]any{"type": "WordPiece"} }, "field decoder"},
		{"vocab not byte-level", func(m map[string]any) { model(m)["vocab"].(map[string]any)["a b"] = 999 }, `field model.vocab: token "a b" is not in the byte-level alphabet`},
		{"vocab ID twice", func(m map[string]any) { model(m)["vocab"].(map[string]any)["zz"] = 5 }, "field model.vocab: ID 5 is given to two tokens"},
		{"vocab negative", func(m map[string]any) { model(m)["vocab"].(map[string]any)["zz"] = -3 }, "negative ID"},
		{"vocab not integer", func(m map[string]any) { model(m)["vocab"].(map[string]any)["zz"] = 1.5 }, "field model.vocab: JSON at byte"},
		{"byte missing", func(m map[string]any) { delete(model(m)["vocab"].(map[string]any), "Ġ") }, "field model.vocab: no token for byte 0x20"},
		{"merge unknown", func(m map[string]any) {
			model(m)["merges"] = append(model(m)["merges"].([]any), []any{"x", "q"})
		}, `field model.merges: merge 19: "xq" is not in the vocabulary`},
		{"merge three", func(m map[string]any) {
			model(m)["merges"] = append(model(m)["merges"].([]any), []any{"x", "q", "r"})
		}, "field model.merges: merge 19 has more than two tokens"},
		{"merge flat", func(m map[string]any) { model(m)["merges"] = []any{"a b c"} }, `merge 0 "a b c" is not two tokens`},
		{"added tokens", func(m map[string]any) { m["added_tokens"] = "x" }, "field added_tokens"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := mutate(t, c.f)
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Load: error %v, want one naming %s and containing %q", err, path, c.want)
			}
		})
	}
	// Not JSON at all, or truncated.
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	data, _ := os.ReadFile("testdata/small.json")
	for _, bad := range [][]byte{[]byte("nope"), data[:len(data)/2], append(append([]byte{}, data...), '}')} {
		os.WriteFile(path, bad, 0o644)
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("Load of bad JSON: error %v", err)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("Load of a missing file: error %v", err)
	}
}

// TestLoadFormats checks that the old merges format ("a b" strings) and a model object whose
// merges come before the vocabulary load the same tokenizer.
func TestLoadFormats(t *testing.T) {
	ref, err := Load("testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	flat := mutate(t, func(m map[string]any) {
		model := m["model"].(map[string]any)
		var merges []any
		for _, p := range model["merges"].([]any) {
			merges = append(merges, p.([]any)[0].(string)+" "+p.([]any)[1].(string))
		}
		model["merges"] = merges
	})
	// encoding/json writes object keys sorted: "merges" comes before "vocab".
	for _, path := range []string{flat, mutate(t, func(map[string]any) {})} {
		tok, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"hello world", "aaaaaaaaa", "1234567 89"} {
			if got, want := tok.Encode(s), ref.Encode(s); firstDiff(got, want) >= 0 {
				t.Errorf("%s: Encode(%q) = %v, want %v", path, s, got, want)
			}
		}
	}
}

func TestLoadDirConfig(t *testing.T) {
	write := func(dir, config string) {
		data, _ := os.ReadFile("testdata/small.json")
		os.WriteFile(filepath.Join(dir, "tokenizer.json"), data, 0o644)
		if config != "" {
			os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(config), 0o644)
		}
	}
	dir := t.TempDir()
	write(dir, `{"eos_token": {"content": "<s>", "special": true}, "pad_token": "[LR]", "bos_token": null}`)
	tok, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := tok.SpecialToken("eos_token"); !ok || id != 276 {
		t.Errorf("eos_token = %d, %v; want 276", id, ok)
	}
	if id, ok := tok.SpecialToken("pad_token"); !ok || id != 280 {
		t.Errorf("pad_token = %d, %v; want 280", id, ok)
	}
	if _, ok := tok.SpecialToken("bos_token"); ok {
		t.Error("bos_token found, want none")
	}
	noConfig := t.TempDir()
	write(noConfig, "")
	if tok, err := LoadDir(noConfig); err != nil {
		t.Error(err)
	} else if _, ok := tok.SpecialToken("eos_token"); ok {
		t.Error("eos_token found without a config")
	}
	for config, want := range map[string]string{
		`{"eos_token": "<nope>"}`: `field eos_token: "<nope>" is not a token`,
		`{"eos_token": 3}`:        "field eos_token: want a string",
		`{`:                       "tokenizer_config.json",
	} {
		d := t.TempDir()
		write(d, config)
		if _, err := LoadDir(d); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config %s: error %v, want %q", config, err, want)
		}
	}
	if _, err := LoadDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("empty dir: error %v", err)
	}
}

func TestConcurrentEncode(t *testing.T) {
	tok, err := LoadDir(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	texts, want := corpus(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < len(texts); i += 2 {
				if got := tok.Encode(texts[i]); firstDiff(got, want[i]) >= 0 {
					t.Errorf("goroutine %d, line %d differs", g, i+1)
				}
			}
		}()
	}
	wg.Wait()
}

// FuzzLoad checks that no tokenizer.json, however broken, makes the loader panic, and that what
// loads can encode.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"small.json", "small-llama3.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{},"merges":[]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := parse(data)
		if err != nil {
			return
		}
		for _, s := range []string{"hello world", "<s> [SW] x", "é\u0301 12"} {
			if _, err := tok.Decode(tok.Encode(s)); err != nil {
				t.Fatalf("Decode(Encode(%q)): %v", s, err)
			}
		}
	})
}
