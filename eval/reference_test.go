package eval

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octlm/octlm/octlm/tokenizer"
)

// envTokenizer makes the test binary a tokenizer speaking octlm tokenize's protocol (one JSON
// string a line in, its IDs as a JSON array out; with --decode the other way), for
// parity/reference_eval.py.
const envTokenizer = "OCTLM_EVAL_TEST_TOKENIZER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(envTokenizer); dir != "" {
		os.Exit(serveTokenizer(dir, len(os.Args) > 1 && os.Args[len(os.Args)-1] == "--decode"))
	}
	os.Exit(m.Run())
}

func serveTokenizer(dir string, decode bool) int {
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		var v any
		if decode {
			var ids []int
			if err := json.Unmarshal(in.Bytes(), &ids); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
			v, _ = tok.Decode(ids)
		} else {
			var s string
			if err := json.Unmarshal(in.Bytes(), &s); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
			v = tok.Encode(s)
		}
		out.Write(jsonText(v))
		out.WriteByte('\n')
		out.Flush()
	}
	return 0
}

const referencePython = "/usr/bin/python3"

// referenceExamples are the example tasks of lm-eval features testdata/eval-tasks lacks
// (multiple_input contexts, acc_mutual_info's unconditional requests) that TestReferenceEval
// also compares.
var referenceExamples = []string{"../examples/tasks/fill-blank/fill_blank.yaml", "../examples/tasks/mutual-info/mutual_info.yaml"}

// referenceMaxLength is short enough that the few-shot contexts are left-truncated.
const referenceMaxLength = 48

type referenceTask struct {
	Task     string `json:"task"`
	Requests []struct {
		DocID           int     `json:"doc_id"`
		Context         string  `json:"context"`
		Continuation    string  `json:"continuation"`
		ContextIDs      []int   `json:"context_ids"`
		ContinuationIDs []int   `json:"continuation_ids"`
		LogLikelihood   float64 `json:"loglikelihood"`
		IsGreedy        bool    `json:"is_greedy"`
		Generated       string  `json:"generated"`
	} `json:"requests"`
	Metrics map[string]any `json:"metrics"`
}

// TestReferenceEval runs parity/reference_eval.py (lm-eval's rules written again in Python,
// Jinja2 templates, a float64 eager Qwen3) on the example tasks of testdata/eval-tasks and
// referenceExamples and
// compares every request and metric with the harness's. It needs /usr/bin/python3 with
// Debian's python3-torch, python3-yaml and python3-jinja2.
func TestReferenceEval(t *testing.T) {
	if testing.Short() {
		t.Skip("the float64 reference takes a while; not with -short")
	}
	if out, err := exec.Command(referencePython, "-c", "import torch, yaml, jinja2, numpy").CombinedOutput(); err != nil {
		t.Skipf("%s cannot import torch, yaml, jinja2 and numpy (apt-get install python3-torch python3-yaml python3-jinja2 python3-numpy): %v %s", referencePython, err, bytes.TrimSpace(out))
	}
	modelDir, _ := filepath.Abs(filepath.Join(fixtureDir, "model"))
	tasks, _ := filepath.Glob("../testdata/eval-tasks/*.yaml")
	if len(tasks) == 0 {
		t.Fatal("no example tasks in testdata/eval-tasks")
	}
	tasks = append(tasks, referenceExamples...)
	args := append([]string{"../parity/reference_eval.py", "--model", modelDir, "--max-length", fmt.Sprint(referenceMaxLength),
		"--tokenizer-cmd", fmt.Sprintf("%q", os.Args[0])}, tasks...)
	cmd := exec.Command(referencePython, args...)
	cmd.Env = append(os.Environ(), envTokenizer+"="+modelDir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference_eval.py: %v\n%s", err, stderr.String())
	}
	m, tok := fixtureModel(t)
	for i, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var ref referenceTask
		if err := json.Unmarshal(line, &ref); err != nil {
			t.Fatalf("reference line %d: %v", i, err)
		}
		t.Run(ref.Task, func(t *testing.T) {
			in := buildTask(t, tasks[i])
			r, err := NewRunner(m, tok, referenceMaxLength, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Run(context.Background(), in, nil); err != nil {
				t.Fatal(err)
			}
			var got []*Request
			for _, d := range in.Docs {
				got = append(got, d.Requests...)
			}
			if len(got) != len(ref.Requests) {
				t.Fatalf("%d requests, reference %d", len(got), len(ref.Requests))
			}
			for j, w := range ref.Requests {
				g := got[j]
				switch g.Type {
				case Loglikelihood:
					if g.Context != w.Context || g.Continuation != w.Continuation || !equalInts(g.ContextIDs, w.ContextIDs) || !equalInts(g.ContinuationIDs, w.ContinuationIDs) {
						t.Errorf("request %d: (%q, %q) %v+%v, reference (%q, %q) %v+%v", j, g.Context, g.Continuation, g.ContextIDs, g.ContinuationIDs, w.Context, w.Continuation, w.ContextIDs, w.ContinuationIDs)
					}
					if g.IsGreedy != w.IsGreedy {
						t.Errorf("request %d: is_greedy %v, reference %v", j, g.IsGreedy, w.IsGreedy)
					}
					fallthrough
				case LoglikelihoodRolling:
					if d := math.Abs(g.LogLikelihood - w.LogLikelihood); d > llTolerance {
						t.Errorf("request %d: log-likelihood %.6f, reference %.6f", j, g.LogLikelihood, w.LogLikelihood)
					}
				case GenerateUntil:
					if g.Context != w.Context || g.Generated != w.Generated {
						t.Errorf("request %d: generated %q after %q, reference %q after %q", j, g.Generated, g.Context, w.Generated, w.Context)
					}
				}
			}
			worst := 0.0
			for j, w := range ref.Requests {
				if got[j].Type != GenerateUntil {
					worst = max(worst, math.Abs(got[j].LogLikelihood-w.LogLikelihood))
				}
			}
			t.Logf("%d requests, %d metrics; log-likelihoods within %.2g of the float64 reference", len(got), len(ref.Metrics), worst)
			res := in.Aggregate()
			for k, w := range ref.Metrics {
				g := res.Values[k]
				wf, wok := w.(float64)
				gf, gok := g.(float64)
				switch {
				case wok && gok:
					tol := 1e-12
					if strings.Contains(k, "perplexity") || strings.Contains(k, "bits_per_byte") {
						tol = 1e-5 * math.Abs(wf)
					}
					if math.Abs(gf-wf) > tol {
						t.Errorf("%s = %v, reference %v", k, g, w)
					}
				case g != w:
					t.Errorf("%s = %v, reference %v", k, g, w)
				}
			}
		})
	}
}
