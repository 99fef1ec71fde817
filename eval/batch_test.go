package eval

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/tokenizer"
)

// buildTask loads the task at path (a YAML file) and builds its instances with no options.
func buildTask(t testing.TB, path string) *Instances {
	t.Helper()
	task, err := LoadTask(path)
	if err != nil {
		t.Fatal(err)
	}
	in, err := task.Build(BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// taskRunner builds task (a YAML path) and a runner for it on m.
func taskRunner(t *testing.T, m LM, tok *tokenizer.Tokenizer, path string, maxLength int) (*Instances, *Runner) {
	t.Helper()
	in := buildTask(t, path)
	r, err := NewRunner(m, tok, maxLength, nil)
	if err != nil {
		t.Fatal(err)
	}
	return in, r
}

// runTask builds task (a YAML path) and runs it on m with batch sequences per call.
func runTask(t *testing.T, m LM, tok *tokenizer.Tokenizer, path string, maxLength, batch int, share bool) *Instances {
	t.Helper()
	in, r := taskRunner(t, m, tok, path, maxLength)
	r.Batch, r.ShareContexts = batch, share
	scored := 0
	if err := r.Run(context.Background(), in, func(*Document) error { scored++; return nil }); err != nil {
		t.Fatal(err)
	}
	if scored != len(in.Docs) {
		t.Fatalf("%d documents scored, want %d", scored, len(in.Docs))
	}
	return in
}

// TestBatchSameNumbers runs the fixture tasks and testdata/eval-tasks (multiple choice with
// left-truncated few-shot contexts, cloze, rolling perplexity, generation until a newline) one
// sequence at a time and in batches: every request's log-likelihood within 1e-5, the same
// greedy flags and generated texts, and the same metrics (those computed from log-likelihoods
// alone, perplexities, within 1e-5 relative).
func TestBatchSameNumbers(t *testing.T) {
	tasks := []struct {
		path      string
		maxLength int
	}{
		{filepath.Join(fixtureDir, "tasks", "quiz.yaml"), fixtureMaxLength},
		{filepath.Join(fixtureDir, "tasks", "prose.yaml"), fixtureMaxLength},
		{"../testdata/eval-tasks/fewshot_mc.yaml", referenceMaxLength},
		{"../testdata/eval-tasks/cloze.yaml", referenceMaxLength},
		{"../testdata/eval-tasks/gen.yaml", referenceMaxLength},
	}
	runs := []struct {
		name  string
		batch int
		share bool
	}{
		{"batch 4, shared contexts", 4, true},
		{"batch 4, every context", 4, false},
		{"batch 3, shared contexts", 3, true},
		{"batch 16, shared contexts", 16, true},
	}
	m, tok := fixtureModel(t)
	for _, task := range tasks {
		want := runTask(t, m, tok, task.path, task.maxLength, 1, true)
		for _, run := range runs {
			t.Run(filepath.Base(task.path)+"/"+run.name, func(t *testing.T) {
				got := runTask(t, m, tok, task.path, task.maxLength, run.batch, run.share)
				compareRuns(t, got, want, 1e-5)
			})
		}
	}
}

// TestBatchQwen35 runs testdata/eval-tasks on tiny-qwen35 (a recurrent cache, which cannot
// go back to a shared context) with octlm/tokenizer's small byte-level tokenizer, whose IDs fit
// its vocabulary: batch 4 gives batch 1's numbers (to float32 rounding).
func TestBatchQwen35(t *testing.T) {
	backend, err := testBackend()
	if err != nil {
		t.Fatal(err)
	}
	m, err := octlm.Load("../testdata/tiny-qwen35", octlm.LoadOptions{Backend: backend, DType: octlm.Float32})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dir := t.TempDir()
	data, err := os.ReadFile("../octlm/tokenizer/testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "tokenizer.json"), data, 0o644)
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"eos_token": "<s>"}`), 0o644)
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	tasks, _ := filepath.Glob("../testdata/eval-tasks/*.yaml")
	for _, path := range tasks {
		t.Run(filepath.Base(path), func(t *testing.T) {
			want := runTask(t, m, tok, path, referenceMaxLength, 1, true)
			got := runTask(t, m, tok, path, referenceMaxLength, 4, true)
			// The random model gives the cloze continuations log-likelihoods near -209 (float32
			// rounding of 2e-5): their perplexity agrees to 1e-4 relative.
			compareRuns(t, got, want, 1e-4)
		})
	}
}

// compareRuns checks that got, a run of the same task as want, has every request's
// log-likelihood within 1e-5 of want's (or 2e-7 relative, about two float32 epsilons, for a
// sum past -50), the same greedy flags and generated texts, and the same metrics (perplexities,
// the exponential of a mean log-likelihood, within metricRel relative).
func compareRuns(t *testing.T, got, want *Instances, metricRel float64) {
	t.Helper()
	worst := 0.0
	for i, d := range got.Docs {
		for j, g := range d.Requests {
			w := want.Docs[i].Requests[j]
			diff := math.Abs(g.LogLikelihood - w.LogLikelihood)
			worst = max(worst, diff)
			if !(diff <= max(1e-5, 2e-7*math.Abs(w.LogLikelihood))) || g.IsGreedy != w.IsGreedy || g.Generated != w.Generated {
				t.Errorf("document %d, request %d: (%v, %v, %q), one at a time (%v, %v, %q)", d.ID, j,
					g.LogLikelihood, g.IsGreedy, g.Generated, w.LogLikelihood, w.IsGreedy, w.Generated)
			}
		}
	}
	t.Logf("log-likelihoods within %.2g of batch 1", worst)
	metrics, wantMetrics := got.Aggregate(), want.Aggregate()
	for _, k := range wantMetrics.Keys {
		g, w := metrics.Values[k], wantMetrics.Values[k]
		gf, gok := g.(float64)
		wf, wok := w.(float64)
		tol := 0.0
		if strings.Contains(k, "perplexity") || strings.Contains(k, "bits_per_byte") {
			tol = metricRel * math.Abs(wf)
		}
		if gok && wok && !(math.Abs(gf-wf) <= tol) || gok != wok || !gok && g != w {
			t.Errorf("%s = %v, one at a time %v", k, g, w)
		}
	}
}
