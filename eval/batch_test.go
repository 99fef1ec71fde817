package eval

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// runTask builds task (a YAML path) and runs it with batch sequences per call.
func runTask(t *testing.T, path string, maxLength, batch int, share bool) *Instances {
	t.Helper()
	m, tok := fixtureModel(t)
	task, err := LoadTask(path)
	if err != nil {
		t.Fatal(err)
	}
	in, err := task.Build(BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRunner(m, tok, maxLength, nil)
	if err != nil {
		t.Fatal(err)
	}
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
	for _, task := range tasks {
		want := runTask(t, task.path, task.maxLength, 1, true)
		wantMetrics := want.Aggregate()
		for _, run := range runs {
			t.Run(filepath.Base(task.path)+"/"+run.name, func(t *testing.T) {
				got := runTask(t, task.path, task.maxLength, run.batch, run.share)
				worst := 0.0
				for i, d := range got.Docs {
					for j, g := range d.Requests {
						w := want.Docs[i].Requests[j]
						diff := math.Abs(g.LogLikelihood - w.LogLikelihood)
						worst = max(worst, diff)
						if !(diff <= 1e-5) || g.IsGreedy != w.IsGreedy || g.Generated != w.Generated {
							t.Errorf("document %d, request %d: (%v, %v, %q), one at a time (%v, %v, %q)", d.ID, j,
								g.LogLikelihood, g.IsGreedy, g.Generated, w.LogLikelihood, w.IsGreedy, w.Generated)
						}
					}
				}
				t.Logf("log-likelihoods within %.2g of batch 1", worst)
				metrics := got.Aggregate()
				for _, k := range wantMetrics.Keys {
					g, w := metrics.Values[k], wantMetrics.Values[k]
					gf, gok := g.(float64)
					wf, wok := w.(float64)
					tol := 0.0
					if strings.Contains(k, "perplexity") || strings.Contains(k, "bits_per_byte") {
						tol = 1e-5 * math.Abs(wf)
					}
					if gok && wok && !(math.Abs(gf-wf) <= tol) || gok != wok || !gok && g != w {
						t.Errorf("%s = %v, one at a time %v", k, g, w)
					}
				}
			})
		}
	}
}
