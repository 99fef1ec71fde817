package eval

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gomlx/compute"

	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/tokenizer"
	"github.com/octlm/octlm/xla"
)

const fixtureDir = "../testdata/tiny-qwen3-eval"

// fixtureMaxLength is the max_length the fixture's expectations were computed with.
const fixtureMaxLength = 32

var fixture struct {
	once  sync.Once
	model *octlm.Model
	tok   *tokenizer.Tokenizer
	err   error
}

// testBackend is the backend the model tests run on: $GOMLX_BACKEND's (GOMLX_BACKEND=onnx go
// test ./eval runs them on ONNX Runtime), else the pure-Go one.
func testBackend() (compute.Backend, error) {
	name := "go"
	if os.Getenv(xla.EnvBackend) != "" {
		name = "" // xla.Open reads it
	}
	backend, _, err := xla.Open(name)
	return backend, err
}

// fixtureModel loads the fixture's model once on the test backend (testBackend).
func fixtureModel(t testing.TB) (*octlm.Model, *tokenizer.Tokenizer) {
	t.Helper()
	fixture.once.Do(func() {
		backend, err := testBackend()
		if err != nil {
			fixture.err = err
			return
		}
		dir := filepath.Join(fixtureDir, "model")
		fixture.model, fixture.err = octlm.Load(dir, octlm.LoadOptions{Backend: backend, DType: octlm.Float32})
		if fixture.err == nil {
			fixture.tok, fixture.err = tokenizer.LoadDir(dir)
		}
	})
	if fixture.err != nil {
		t.Fatal(fixture.err)
	}
	return fixture.model, fixture.tok
}

type expectedRequest struct {
	DocID           int     `json:"doc_id"`
	Context         string  `json:"context"`
	Continuation    string  `json:"continuation"`
	LogLikelihood   float64 `json:"loglikelihood"`
	IsGreedy        bool    `json:"is_greedy"`
	ContextIDs      []int   `json:"context_ids"`
	ContinuationIDs []int   `json:"continuation_ids"`
	Words           int     `json:"words"`
	Bytes           int     `json:"bytes"`
	Tokens          int     `json:"tokens"`
}

type expectedTask struct {
	Task     string                       `json:"task"`
	Requests []expectedRequest            `json:"requests"`
	Metrics  map[string]float64           `json:"metrics"`
	PerDoc   []map[string]json.RawMessage `json:"per_doc"`
}

func readExpected(t *testing.T, name string) expectedTask {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtureDir, "expected", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var e expectedTask
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// runFixtureTask builds, runs and scores one fixture task, one sequence at a time.
func runFixtureTask(t *testing.T, name string, share bool) *Instances {
	t.Helper()
	m, tok := fixtureModel(t)
	return runTask(t, m, tok, filepath.Join(fixtureDir, "tasks", name+".yaml"), fixtureMaxLength, 1, share)
}

// llTolerance is how far a request's summed log-likelihood from the float32 pure-Go forward
// may be from the fixture's float64 one.
const llTolerance = 2e-3

// TestFixtureQuiz reproduces the multiple-choice fixture: every request's tokens and
// log-likelihood, and acc and acc_norm exactly, with and without the shared-context cache.
func TestFixtureQuiz(t *testing.T) {
	want := readExpected(t, "quiz")
	for _, share := range []bool{false, true} {
		in := runFixtureTask(t, "quiz", share)
		var got []*Request
		for _, d := range in.Docs {
			got = append(got, d.Requests...)
		}
		if len(got) != len(want.Requests) {
			t.Fatalf("share=%v: %d requests, want %d", share, len(got), len(want.Requests))
		}
		for i, w := range want.Requests {
			g := got[i]
			if g.Context != w.Context || g.Continuation != w.Continuation {
				t.Errorf("request %d: (%q, %q), want (%q, %q)", i, g.Context, g.Continuation, w.Context, w.Continuation)
			}
			if !equalInts(g.ContextIDs, w.ContextIDs) || !equalInts(g.ContinuationIDs, w.ContinuationIDs) {
				t.Errorf("request %d: tokens %v + %v, want %v + %v", i, g.ContextIDs, g.ContinuationIDs, w.ContextIDs, w.ContinuationIDs)
			}
			if d := math.Abs(g.LogLikelihood - w.LogLikelihood); d > llTolerance {
				t.Errorf("share=%v request %d: log-likelihood %.6f, want %.6f (off by %.2g)", share, i, g.LogLikelihood, w.LogLikelihood, d)
			}
			if g.IsGreedy != w.IsGreedy {
				t.Errorf("request %d: is_greedy %v, want %v", i, g.IsGreedy, w.IsGreedy)
			}
		}
		res := in.Aggregate()
		for k, w := range want.Metrics {
			g, ok := res.Values[k].(float64)
			if !ok || math.Abs(g-w) > 1e-12 {
				t.Errorf("share=%v %s = %v, want %v", share, k, res.Values[k], w)
			}
		}
		for i, pd := range want.PerDoc {
			for _, k := range []string{"acc", "acc_norm"} {
				var w float64
				json.Unmarshal(pd[k], &w)
				if g := in.Docs[i].Metrics[noFilter][k]; g != w {
					t.Errorf("document %d: %s %v, want %v", i, k, g, w)
				}
			}
		}
	}
}

// TestFixtureProse reproduces the rolling-loglikelihood fixture: each document's tokens, word
// and byte counts and log-likelihood, and the perplexities within 1e-5 relative.
func TestFixtureProse(t *testing.T) {
	want := readExpected(t, "prose")
	in := runFixtureTask(t, "prose", true)
	if len(in.Docs) != len(want.Requests) {
		t.Fatalf("%d documents, want %d", len(in.Docs), len(want.Requests))
	}
	for i, w := range want.Requests {
		q := in.Docs[i].Requests[0]
		if q.Tokens != w.Tokens {
			t.Errorf("document %d: %d tokens, want %d", i, q.Tokens, w.Tokens)
		}
		if got := countWords(q.Continuation); got != w.Words {
			t.Errorf("document %d: %d words, want %d", i, got, w.Words)
		}
		if got := len(q.Continuation); got != w.Bytes {
			t.Errorf("document %d: %d bytes, want %d", i, got, w.Bytes)
		}
		if d := math.Abs(q.LogLikelihood - w.LogLikelihood); d > llTolerance {
			t.Errorf("document %d: log-likelihood %.6f, want %.6f (off by %.2g)", i, q.LogLikelihood, w.LogLikelihood, d)
		}
	}
	res := in.Aggregate()
	for k, w := range want.Metrics {
		g, ok := res.Values[k].(float64)
		if !ok || math.Abs(g-w) > 1e-5*math.Abs(w) {
			t.Errorf("%s = %v, want %v (1e-5 relative)", k, res.Values[k], w)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRunInterrupted stops a run from its progress callback: Run returns the context's cause,
// and the documents finished before it keep their scores.
func TestRunInterrupted(t *testing.T) {
	m, tok := fixtureModel(t)
	in, r := taskRunner(t, m, tok, filepath.Join(fixtureDir, "tasks", "quiz.yaml"), fixtureMaxLength)
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("stopped by the test")
	var finished []*Document
	r.Progress = func(done, total int) {
		if done == 3 {
			cancel(stop)
		}
	}
	err := r.Run(ctx, in, func(d *Document) error { finished = append(finished, d); return nil })
	if !errors.Is(err, stop) {
		t.Fatalf("Run: %v, want the context's cause", err)
	}
	if len(finished) == 0 || len(finished) == len(in.Docs) {
		t.Fatalf("%d of %d documents finished before the stop", len(finished), len(in.Docs))
	}
	for _, d := range finished {
		if _, ok := d.Metrics[noFilter]["acc"]; !ok {
			t.Errorf("document %d finished without its metrics", d.ID)
		}
	}
}

// TestEncodePair checks HFLM's pair rules with Qwen3's tokenizer: trailing whitespace moves to
// the continuation, an empty context becomes the prefix token (<|im_end|>), and a continuation
// that starts with the prefix token gives it up as the context.
func TestEncodePair(t *testing.T) {
	_, tok := fixtureModel(t)
	r, err := NewRunner(nil, tok, fixtureMaxLength, nil)
	if err != nil {
		t.Fatal(err)
	}
	enc := tok.Encode
	imEnd, _ := tok.TokenID("<|im_end|>")
	if r.PrefixID != imEnd || r.EOSID != imEnd {
		t.Fatalf("prefix %d, eos %d; want <|im_end|> (%d)", r.PrefixID, r.EOSID, imEnd)
	}
	for _, c := range []struct {
		context, continuation string
		ctx, cont             []int
	}{
		{"Q: sky\nA: ", "blue", enc("Q: sky\nA:"), enc("Q: sky\nA: blue")[len(enc("Q: sky\nA:")):]},
		{"", " blue", []int{imEnd}, enc(" blue")},
		{"", "<|im_end|>blue", []int{imEnd}, enc("blue")},
		{"a  \n", "b", enc("a"), enc("a  \nb")[len(enc("a")):]},
	} {
		ctx, cont := r.encodePair(c.context, c.continuation)
		if !equalInts(ctx, c.ctx) || !equalInts(cont, c.cont) {
			t.Errorf("encodePair(%q, %q) = %v, %v; want %v, %v", c.context, c.continuation, ctx, cont, c.ctx, c.cont)
		}
	}
}
