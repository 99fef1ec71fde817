package figures

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/octlm/octlm/eval"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/tokenizer"
	"github.com/octlm/octlm/xla"
)

// TestEvalAgainstExpected scores the eval fixture's quiz as lm-eval did (max length 32) and
// compares with its expected numbers: every log-likelihood within 1e-4, the metrics equal; a
// folder without the task's file is an error.
func TestEvalAgainstExpected(t *testing.T) {
	const dir = "../testdata/tiny-qwen3-eval"
	b, _, err := xla.Open("go")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	m, err := octlm.Load(dir+"/model", octlm.LoadOptions{Backend: b})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.LoadDir(dir + "/model")
	if err != nil {
		t.Fatal(err)
	}
	r, err := eval.NewRunner(m, tok, 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	task, err := eval.LoadTask(dir + "/tasks/quiz.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in, err := task.Build(eval.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), in, nil); err != nil {
		t.Fatal(err)
	}
	results := []eval.TaskResult{{Instances: in, Result: in.Aggregate()}}
	tbl, err := EvalAgainstExpected(results, dir+"/expected")
	if err != nil {
		t.Fatal(err)
	}
	if len(tbl.Rows) != 5 || !strings.Contains(tbl.Rows[0][1], "18 requests") {
		t.Fatalf("rows %v: want the log-likelihood row and 4 metrics", tbl.Rows)
	}
	for _, row := range tbl.Rows {
		gap, err := strconv.ParseFloat(row[4], 64)
		if err != nil || !(gap <= 1e-4) {
			t.Errorf("%s %s: |Δ| %q", row[0], row[1], row[4])
		}
	}
	if _, err := EvalAgainstExpected(results, t.TempDir()); err == nil || !strings.Contains(err.Error(), "tiny_quiz") {
		t.Errorf("no expected file: error %v, want one naming the task", err)
	}
}

// TestKLDrift: the table has a row per run with its statistics, and the figures draw.
func TestKLDrift(t *testing.T) {
	runs := []KLDrift{
		{Label: "bfloat16", Result: eval.KLResult{Positions: 10, MeanKLD: 1e-3, MedianKLD: 5e-4, KLD99: 4e-3, MaxKLD: 5e-3, SameTop: 0.9}},
		{Label: "float16", Result: eval.KLResult{Positions: 10, MeanKLD: 1e-5, MedianKLD: 5e-6, KLD99: 4e-5, MaxKLD: 5e-5, SameTop: 1}},
	}
	tbl := KLDriftTable("float32", runs)
	if len(tbl.Rows) != 2 || tbl.Rows[1][0] != "float16" || tbl.Rows[0][8] != "90.00%" || tbl.Rows[1][7] != "5e-05" {
		t.Errorf("rows %v", tbl.Rows)
	}
	for _, f := range []Figure{KLDriftFigure("float32", runs), SameTopFigure("float32", runs)} {
		if s := string(f.SVG); !strings.HasPrefix(s, "<svg") || !strings.Contains(s, "float16") {
			t.Errorf("%s: not an SVG naming the runs", f.Name)
		}
	}
}
