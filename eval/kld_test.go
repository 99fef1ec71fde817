package eval

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKLDivergenceSelf writes a llama-perplexity base file from the fixture model and compares
// the same model against it: the layout's sizes, a divergence at the quantization's floor, the
// same top token everywhere and the base's perplexity read back.
func TestKLDivergenceSelf(t *testing.T) {
	m, tok := fixtureModel(t)
	text, err := os.ReadFile(filepath.Join(fixtureDir, "tasks", "prose.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := tok.Encode(string(text))
	const ctx = 32
	vocab := m.Shape().Vocab
	var buf bytes.Buffer
	ppl, err := WriteKLBase(&buf, m, tokens, vocab, KLBaseOptions{Ctx: ctx, Chunks: 3})
	if err != nil {
		t.Fatal(err)
	}
	chunks := 3
	want := 8 + 3*4 + chunks*ctx*4 + chunks*(ctx-1-ctx/2)*kldRecord(vocab)*2
	if buf.Len() != want {
		t.Errorf("base file of %d bytes, want %d", buf.Len(), want)
	}
	var header [3]int32
	binary.Read(bytes.NewReader(buf.Bytes()[8:20]), binary.LittleEndian, &header)
	if header != [3]int32{ctx, int32(vocab), int32(chunks)} {
		t.Errorf("header %v", header)
	}
	res, err := KLDivergence(bytes.NewReader(buf.Bytes()), m, vocab)
	if err != nil {
		t.Fatal(err)
	}
	if res.Positions != chunks*(ctx-1-ctx/2) {
		t.Errorf("%d positions compared", res.Positions)
	}
	if res.MeanKLD < 0 || res.MeanKLD > 1e-4 || res.MaxKLD > 1e-3 {
		t.Errorf("a model against its own base: mean KLD %g, max %g", res.MeanKLD, res.MaxKLD)
	}
	if res.SameTop != 1 {
		t.Errorf("same top %v, want 1", res.SameTop)
	}
	if math.Abs(res.MeanPPL-ppl) > 1e-6*ppl || math.Abs(res.MeanPPLBase-ppl) > 1e-3*ppl {
		t.Errorf("PPL %v, base %v; written %v", res.MeanPPL, res.MeanPPLBase, ppl)
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"magic", append([]byte("_wrong__"), buf.Bytes()[8:]...), "no _logits_ magic"},
		{"truncated", buf.Bytes()[:buf.Len()-10], "ends early"},
		{"vocabulary", buf.Bytes(), "not usable"},
	} {
		limit := vocab
		if c.name == "vocabulary" {
			limit = vocab - 1
		}
		if _, err := KLDivergence(bytes.NewReader(c.data), m, limit); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if _, err := WriteKLBase(&buf, m, tokens[:40], vocab, KLBaseOptions{Ctx: ctx}); err == nil {
		t.Error("fewer than two chunks of tokens were accepted")
	}
}

// TestNearestInt checks llama.cpp's float rounding trick (round half to even).
func TestNearestInt(t *testing.T) {
	for f, want := range map[float32]int32{0: 0, 0.4: 0, 0.5: 0, 1.5: 2, 2.5: 2, 65534.6: 65535, 3.49: 3} {
		if got := nearestInt(f); got != want {
			t.Errorf("nearestInt(%v) = %d, want %d", f, got, want)
		}
	}
}
