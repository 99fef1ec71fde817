package octlm

import "testing"

// TestStepGraphsBounded runs a prompt in chunks of growing lengths, then a short prompt in
// batches of 1 to maxStepGraphs+1 copies, so that it needs more step graphs (batch × chunk
// length × attended length × logit rows) than a model keeps: the least recently used are freed,
// at most maxStepGraphs stay compiled, and the logits still match the prompt run in one chunk.
func TestStepGraphsBounded(t *testing.T) {
	m := loadFixture(t, "tiny-qwen3", Float32)
	c := readReference(t, "tiny-qwen3")
	ids := c[len(c)-1].ids
	whole, err := m.Forward(ids)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := m.NewCache(len(ids))
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	var got Logits
	for at, n := 0, 1; at < len(ids); at, n = at+n, n+1 {
		n = min(n, len(ids)-at)
		l, err := m.ForwardCached(ids[at:at+n], cache)
		if err != nil {
			t.Fatal(err)
		}
		got.Rows, got.Vocab = got.Rows+l.Rows, l.Vocab
		got.Data = append(got.Data, l.Data...)
	}
	short := ids[:3]
	one, err := m.Forward(short)
	if err != nil {
		t.Fatal(err)
	}
	ref := c[len(c)-1].logits // the float64 reference's first rows are short's (causal)
	ref = Logits{Rows: len(short), Vocab: ref.Vocab, Data: ref.Data[:len(short)*ref.Vocab]}
	for b := 1; b <= maxStepGraphs+1; b++ {
		seqs := make([][]int, b)
		for i := range seqs {
			seqs[i] = short
		}
		out, err := m.ForwardBatch(seqs)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range out {
			// 5e-5: built without GOEXPERIMENT=simd, compute's plain kernels sum the rows of
			// some sequences of a batch (which ones depends on the batch's row count) in
			// another order than the prompt alone: 1.7e-5 on this fixture, each sequence 1.6e-5
			// to 2.4e-5 from the float64 reference; with simd the batch's logits equal the
			// prompt's.
			if d := maxAbsError(t, l, one); d > 5e-5 {
				t.Errorf("batch of %d, sequence %d: logits differ from the prompt alone by %g", b, i, d)
			}
			if d := maxAbsError(t, l, ref); d > 1e-4 {
				t.Errorf("batch of %d, sequence %d: logits differ from the float64 reference by %g", b, i, d)
			}
		}
	}
	if n := m.CompileStats().Graphs; n <= maxStepGraphs {
		t.Fatalf("the chunks compiled %d graphs, want more than %d to exercise freeing", n, maxStepGraphs)
	}
	if len(m.steps) > maxStepGraphs {
		t.Errorf("%d step graphs kept, want at most %d", len(m.steps), maxStepGraphs)
	}
	if d := maxAbsError(t, got, whole); d > 1e-4 {
		t.Errorf("chunked logits differ from one chunk by %g", d)
	}
	// The first shapes were freed: running them again compiles them again, and still agrees.
	again, err := m.Forward(ids)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsError(t, again, whole); d > 0 {
		t.Errorf("the recompiled one-chunk graph differs by %g", d)
	}
}
