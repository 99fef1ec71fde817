package figures

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/octlm/octlm/eval"
)

// EvalTable lays out finished tasks' aggregated metrics (package eval, `octlm eval`): one row
// per task, filter and metric, with its standard error where lm-eval computes one.
func EvalTable(caption string, tasks []eval.TaskResult) Table {
	t := Table{Name: "07-eval-results", Caption: caption, Header: []string{"task", "filter", "n-shot", "metric", "value", "stderr"}}
	for _, tr := range tasks {
		keys := append([]string(nil), tr.Result.Keys...)
		sort.Strings(keys)
		for _, k := range keys {
			metric, filter, _ := strings.Cut(k, ",")
			if strings.HasSuffix(metric, "_stderr") {
				continue
			}
			se := ""
			if s, ok := tr.Result.Values[metric+"_stderr,"+filter]; ok {
				se = evalValue(s)
			}
			t.Rows = append(t.Rows, []string{tr.Instances.Task.Name, filter, fmt.Sprint(tr.Instances.NumFewshot), metric, evalValue(tr.Result.Values[k]), se})
		}
	}
	return t
}

// evalValue prints a metric's value with four decimals, as lm-eval's table does.
func evalValue(v any) string {
	if f, ok := v.(float64); ok {
		return fmt.Sprintf("%.4f", f)
	}
	return fmt.Sprint(v)
}

// KLDrift is one model's KL-divergence run against a base (llama-perplexity's statistics).
type KLDrift struct {
	Label  string // e.g. "bfloat16"
	Result eval.KLResult
}

// KLDriftTable tabulates KL-divergence runs against the base named in the caption.
func KLDriftTable(base string, runs []KLDrift) Table {
	t := Table{Name: "07-kld", Caption: "KL divergence against " + base + " (llama-perplexity's statistics)",
		Header: []string{"model", "positions", "PPL", "base PPL", "mean KLD", "median KLD", "KLD 99%", "max KLD", "same top p", "RMS Δp", "max Δp"}}
	for _, r := range runs {
		k := r.Result
		t.Rows = append(t.Rows, []string{r.Label, fmt.Sprint(k.Positions), fmt.Sprintf("%.4f", k.MeanPPL), fmt.Sprintf("%.4f", k.MeanPPLBase),
			fmt.Sprintf("%.3g ± %.2g", k.MeanKLD, k.KLDStderr), fmt.Sprintf("%.3g", k.MedianKLD), fmt.Sprintf("%.3g", k.KLD99), fmt.Sprintf("%.3g", k.MaxKLD),
			fmt.Sprintf("%.2f%%", 100*k.SameTop), fmt.Sprintf("%.3g%%", 100*k.RMSDeltaP), fmt.Sprintf("%.3g%%", 100*k.MaxDeltaP)})
	}
	return t
}

// KLDriftFigure draws the KL divergence's distribution over the scored positions of each run
// (median, mean, 99th percentile, maximum) on a log axis.
func KLDriftFigure(base string, runs []KLDrift) Figure {
	cats := []string{"median", "mean", "99th percentile", "maximum"}
	var ss []series
	for _, r := range runs {
		k := r.Result
		s := series{Label: r.Label, Kind: labelledBars, Format: shortNumber}
		for i, v := range []float64{k.MedianKLD, k.MeanKLD, k.KLD99, k.MaxKLD} {
			s.X, s.Y = append(s.X, float64(i)), append(s.Y, v)
		}
		ss = append(ss, s)
	}
	title := "KL divergence per position against " + base
	c := chart{Title: title, Width: 720, Height: 360, Categories: cats, Series: ss,
		X: axis{Label: "over the scored positions"}, Y: axis{Label: "KL(base ‖ model), nats (log scale)", Log: true},
		Note: "each chunk's second half is scored, as llama-perplexity --kl-divergence scores it"}
	return Figure{Name: "07-kld", Title: title, SVG: c.render()}
}

// SameTopFigure draws how often each run's top token is the base's ("Same top p").
func SameTopFigure(base string, runs []KLDrift) Figure {
	var cats []string
	s := series{Label: "same top token", Kind: labelledBars, Format: func(v float64) string { return fmt.Sprintf("%.1f%%", v) }}
	for i, r := range runs {
		cats = append(cats, r.Label)
		s.X, s.Y = append(s.X, float64(i)), append(s.Y, 100*r.Result.SameTop)
	}
	title := "Same top token as " + base
	note := ""
	if len(runs) > 0 {
		note = fmt.Sprintf("%d scored positions per model", runs[0].Result.Positions)
	}
	c := chart{Title: title, Width: 640, Height: 320, Categories: cats, Series: []series{s},
		X: axis{Label: "model"}, Y: axis{Label: "positions (%)", Min: 0, Max: 100}, Note: note}
	return Figure{Name: "07-same-top", Title: title, SVG: c.render()}
}

// evalExpected is what a fixture's expected/NAME.json holds of lm-eval's run: the task, every
// request's log-likelihood (in lm-eval's order: document by document, request by request) and
// the aggregated metrics.
type evalExpected struct {
	Task     string `json:"task"`
	Requests []struct {
		DocID         int     `json:"doc_id"`
		Continuation  string  `json:"continuation"` // "" for a rolling request's text
		LogLikelihood float64 `json:"loglikelihood"`
	} `json:"requests"`
	Metrics map[string]float64 `json:"metrics"`
}

// EvalAgainstExpected compares finished tasks with lm-eval's numbers in expectedDir (a fixture's
// expected/*.json, one file per task, matched by its "task"): the largest log-likelihood
// difference over the requests, then each metric. A task without a file, or whose requests are
// not the file's, is an error.
func EvalAgainstExpected(tasks []eval.TaskResult, expectedDir string) (Table, error) {
	files, err := filepath.Glob(filepath.Join(expectedDir, "*.json"))
	if err != nil {
		return Table{}, err
	}
	byTask := map[string]evalExpected{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return Table{}, err
		}
		var e evalExpected
		if err := json.Unmarshal(data, &e); err != nil {
			return Table{}, fmt.Errorf("%s: %w", f, err)
		}
		byTask[e.Task] = e
	}
	t := Table{Name: "07-eval-expected", Caption: "the harness against lm-eval's numbers (" + expectedDir + ")",
		Header: []string{"task", "what", "octlm", "lm-eval", "|Δ|"}}
	for _, tr := range tasks {
		name := tr.Instances.Task.Name
		e, ok := byTask[name]
		if !ok {
			return Table{}, fmt.Errorf("%s: no expected file for task %q", expectedDir, name)
		}
		var reqs []*eval.Request
		var docs []int
		for _, d := range tr.Instances.Docs {
			for _, q := range d.Requests {
				reqs, docs = append(reqs, q), append(docs, d.ID)
			}
		}
		if len(reqs) != len(e.Requests) {
			return Table{}, fmt.Errorf("%s: %d requests, lm-eval's %d", name, len(reqs), len(e.Requests))
		}
		worst := 0.0
		for i, q := range reqs {
			w := e.Requests[i]
			if docs[i] != w.DocID || (w.Continuation != "" && q.Continuation != w.Continuation) {
				return Table{}, fmt.Errorf("%s: request %d is document %d's %q, lm-eval's document %d's %q", name, i, docs[i], q.Continuation, w.DocID, w.Continuation)
			}
			worst = max(worst, math.Abs(q.LogLikelihood-w.LogLikelihood))
			if math.IsNaN(q.LogLikelihood) {
				worst = math.Inf(1)
			}
		}
		t.Rows = append(t.Rows, []string{name, fmt.Sprintf("log-likelihood, worst of %d requests", len(reqs)), "", "", fmt.Sprintf("%.2g", worst)})
		keys := make([]string, 0, len(e.Metrics))
		for k := range e.Metrics {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			got, ok := tr.Result.Values[k].(float64)
			if !ok {
				return Table{}, fmt.Errorf("%s: no metric %q", name, k)
			}
			t.Rows = append(t.Rows, []string{"", k, shortFloat(got), shortFloat(e.Metrics[k]), fmt.Sprintf("%.2g", math.Abs(got-e.Metrics[k]))})
		}
	}
	return t, nil
}

// shortFloat prints a metric with seven significant digits.
func shortFloat(v float64) string { return strconv.FormatFloat(v, 'g', 7, 64) }
