package eval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/tokenizer"
)

// LM is what the harness needs of a model: *octlm.Model is one.
type LM interface {
	Forward(ids []int) (octlm.Logits, error)
	NewCache(capacity int) (*octlm.Cache, error)
	ForwardCached(ids []int, cache *octlm.Cache) (octlm.Logits, error)
	Next(ids []int, cache *octlm.Cache) ([]float32, error)
	Generate(prompt []int, opts octlm.GenerateOptions) (octlm.Generation, error)
}

// Runner answers requests as lm-eval's Hugging Face backend (HFLM) answers them.
type Runner struct {
	Model     LM
	Tokenizer *tokenizer.Tokenizer
	MaxLength int   // lm-eval's max_length: inputs are left-truncated to it
	PrefixID  int   // the token an empty context becomes: bos_token, else eos_token
	EOSID     int   // eos_token: generation stops at it
	StopIDs   []int // generation also stops at these (the checkpoint's eos_token_id)

	// ShareContexts scores the choices of a multiple-choice document from one cached run of
	// their shared context (Cache.Truncate back to it after each choice) instead of running the
	// context again for every choice. Off, every request runs whole, as HFLM runs it.
	ShareContexts bool

	// Progress, when set, is called after each request with the requests answered and the
	// total.
	Progress func(done, total int)
}

// NewRunner returns a Runner for model and tok with the prefix and end tokens read from the
// tokenizer's configuration (bos_token, else eos_token, as HFLM's prefix_token_id).
func NewRunner(model LM, tok *tokenizer.Tokenizer, maxLength int, stopIDs []int) (*Runner, error) {
	if maxLength < 1 {
		return nil, fmt.Errorf("eval: max length %d: must be ≥ 1", maxLength)
	}
	eos, ok := tok.SpecialToken("eos_token")
	if !ok {
		return nil, errors.New("eval: the tokenizer has no eos_token (tokenizer_config.json): lm-eval's prefix and end token")
	}
	prefix := eos
	if bos, ok := tok.SpecialToken("bos_token"); ok {
		prefix = bos
	}
	return &Runner{Model: model, Tokenizer: tok, MaxLength: maxLength, PrefixID: prefix, EOSID: eos,
		StopIDs: stopIDs, ShareContexts: true}, nil
}

// encodePair is HFLM's handling of a (context, continuation) pair: an empty context becomes
// the prefix token (or the continuation's first token when that is the prefix token), else
// the context's trailing whitespace moves to the continuation and the continuation's tokens are
// those of context+continuation past the context's own.
func (r *Runner) encodePair(context, continuation string) (ctx, cont []int) {
	if context == "" {
		cont = r.Tokenizer.Encode(continuation)
		if len(cont) > 0 && cont[0] == r.PrefixID {
			return cont[:1], cont[1:]
		}
		return []int{r.PrefixID}, cont
	}
	if trimmed := rstripPy(context); len(trimmed) < len(context) {
		continuation = context[len(trimmed):] + continuation
		context = trimmed
	}
	whole := r.Tokenizer.Encode(context + continuation)
	ctx = r.Tokenizer.Encode(context)
	if len(ctx) > len(whole) {
		return ctx, nil
	}
	return ctx, whole[len(ctx):]
}

// job is one model call's worth of work: a loglikelihood request, one rolling window, or a
// generation, with the key it is sorted by.
type job struct {
	req       *Request
	ctx, cont []int
	window    bool // one window of a rolling request: adds to req's log-likelihood
}

// Run answers every request of the documents. Requests run longest first (HFLM's order);
// with ShareContexts, the choices of a document that share a context run from one cached
// prefix. As each document's last request is answered, the document is scored (ScoreDoc) and
// handed to onDoc when set. It stops at ctx's end with ctx's error; the requests answered so
// far keep their results.
func (r *Runner) Run(ctx context.Context, in *Instances, onDoc func(*Document) error) error {
	var jobs []job
	var gens []*Request
	owner := map[*Request]*Document{}
	left := map[*Document]int{}
	for _, d := range in.Docs {
		for _, q := range d.Requests {
			owner[q] = d
			switch q.Type {
			case Loglikelihood:
				c, k := r.encodePair(q.Context, q.Continuation)
				if len(k) == 0 {
					return fmt.Errorf("%s: document %d, request %d: the continuation %q has no tokens of its own", in.Task.Name, d.ID, q.Index, q.Continuation)
				}
				if len(k) > r.MaxLength {
					return fmt.Errorf("%s: document %d, request %d: the continuation has %d tokens, more than max length %d", in.Task.Name, d.ID, q.Index, len(k), r.MaxLength)
				}
				q.ContextIDs, q.ContinuationIDs = c, k
				jobs = append(jobs, job{req: q, ctx: c, cont: k})
				left[d]++
			case LoglikelihoodRolling:
				toks := r.Tokenizer.Encode(q.Continuation)
				q.Tokens = len(toks)
				for _, w := range RollingWindows(toks, r.PrefixID, r.MaxLength, 1) {
					jobs = append(jobs, job{req: q, ctx: w.Context, cont: w.Predict, window: true})
					left[d]++
				}
				if len(toks) == 0 {
					return fmt.Errorf("%s: document %d: the text to score has no tokens", in.Task.Name, d.ID)
				}
			case GenerateUntil:
				gens = append(gens, q)
				left[d]++
			}
		}
	}
	total := len(jobs) + len(gens)
	done := 0
	step := func(q *Request) error {
		done++
		if r.Progress != nil {
			r.Progress(done, total)
		}
		d := owner[q]
		if left[d]--; left[d] > 0 {
			return nil
		}
		if err := in.ScoreDoc(d); err != nil {
			return err
		}
		if onDoc != nil {
			return onDoc(d)
		}
		return nil
	}
	for _, group := range r.schedule(jobs) {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		if err := r.runGroup(group, step); err != nil {
			return fmt.Errorf("%s: %w", in.Task.Name, err)
		}
	}
	sort.SliceStable(gens, func(i, j int) bool { return len(gens[i].Context) > len(gens[j].Context) })
	for _, q := range gens {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		if err := r.generate(ctx, q, &in.Task.Generation); err != nil {
			return fmt.Errorf("%s: %w", in.Task.Name, err)
		}
		if err := step(q); err != nil {
			return err
		}
	}
	return nil
}

// schedule orders jobs longest first (HFLM's _collate: by -len(context+continuation)) and,
// with ShareContexts, groups the loglikelihood jobs that share their context tokens and need
// no truncation, so that the context runs once for the group.
func (r *Runner) schedule(jobs []job) [][]job {
	sort.SliceStable(jobs, func(i, j int) bool {
		return len(jobs[i].ctx)+len(jobs[i].cont) > len(jobs[j].ctx)+len(jobs[j].cont)
	})
	if !r.ShareContexts {
		groups := make([][]job, len(jobs))
		for i, j := range jobs {
			groups[i] = []job{j}
		}
		return groups
	}
	var groups [][]job
	index := map[string]int{}
	for _, j := range jobs {
		if j.window || len(j.ctx)+len(j.cont) > r.MaxLength+1 {
			groups = append(groups, []job{j})
			continue
		}
		key := fmt.Sprint(j.ctx)
		if g, ok := index[key]; ok {
			groups[g] = append(groups[g], j)
			continue
		}
		index[key] = len(groups)
		groups = append(groups, []job{j})
	}
	return groups
}

func (r *Runner) runGroup(group []job, step func(*Request) error) error {
	if len(group) == 1 {
		if err := r.scoreWhole(group[0]); err != nil {
			return err
		}
		return step(group[0].req)
	}
	ctxIDs := group[0].ctx
	longest := 0
	for _, j := range group {
		longest = max(longest, len(j.ctx)+len(j.cont))
	}
	cache, err := r.Model.NewCache(longest)
	if err != nil {
		return err
	}
	defer cache.Close()
	if !cache.CanTruncate() {
		for _, j := range group {
			if err := r.scoreWhole(j); err != nil {
				return err
			}
			if err := step(j.req); err != nil {
				return err
			}
		}
		return nil
	}
	last, err := r.Model.Next(ctxIDs, cache)
	if err != nil {
		return fmt.Errorf("running a context of %d tokens: %w", len(ctxIDs), err)
	}
	for _, j := range group {
		rows := [][]float32{last}
		if len(j.cont) > 1 {
			l, err := r.Model.ForwardCached(j.cont[:len(j.cont)-1], cache)
			if err != nil {
				return fmt.Errorf("running a continuation of %d tokens: %w", len(j.cont), err)
			}
			for i := range l.Rows {
				rows = append(rows, l.Row(i))
			}
		}
		score(j, rows)
		if err := cache.Truncate(len(ctxIDs)); err != nil {
			return err
		}
		if err := step(j.req); err != nil {
			return err
		}
	}
	return nil
}

// scoreWhole runs one job as HFLM does: (context + continuation), left-truncated to
// max_length + 1, without its last token; the continuation's tokens are scored by the last
// len(continuation) rows.
func (r *Runner) scoreWhole(j job) error {
	all := slices.Concat(j.ctx, j.cont)
	if len(all) > r.MaxLength+1 {
		all = all[len(all)-(r.MaxLength+1):]
	}
	inp := all[:len(all)-1]
	l, err := r.Model.Forward(inp)
	if err != nil {
		return fmt.Errorf("running %d tokens: %w", len(inp), err)
	}
	rows := make([][]float32, len(j.cont))
	for i := range rows {
		rows[i] = l.Row(len(inp) - len(j.cont) + i)
	}
	score(j, rows)
	return nil
}

// score adds the log-probabilities of j's continuation tokens under rows (one row of logits
// per token, in float64) to its request, and whether each was the greedy choice.
func score(j job, rows [][]float32) {
	ll := 0.0
	greedy := true
	for i, row := range rows {
		lp, argmax := logSoftmaxAt(row, j.cont[i])
		ll += lp
		greedy = greedy && argmax == j.cont[i]
	}
	if j.window {
		j.req.LogLikelihood += ll
		return
	}
	j.req.LogLikelihood, j.req.IsGreedy = ll, greedy
}

// logSoftmaxAt returns log_softmax(row)[id] computed in float64 and the row's first argmax
// (torch.argmax's tie rule).
func logSoftmaxAt(row []float32, id int) (float64, int) {
	best := 0
	m := math.Inf(-1)
	for i, v := range row {
		if float64(v) > m {
			m, best = float64(v), i
		}
	}
	sum := 0.0
	for _, v := range row {
		sum += math.Exp(float64(v) - m)
	}
	return float64(row[id]) - m - math.Log(sum), best
}

// Window is one rolling window: the tokens run and the tokens predicted (scored by the last
// len(Predict) rows).
type Window struct{ Context, Predict []int }

// RollingWindows is lm-eval's utils.get_rolling_token_windows followed by
// make_disjoint_window: the text's tokens in windows of at most maxSeqLen, the first one
// after the prefix token, each later one with as much context as fits.
func RollingWindows(tokens []int, prefix, maxSeqLen, contextLen int) []Window {
	if len(tokens) == 0 || contextLen < 1 || contextLen > maxSeqLen {
		return nil
	}
	var out []Window
	add := func(in, pred []int) {
		// make_disjoint_window: a[:len(a) - (len(b) - 1)]
		out = append(out, Window{Context: slices.Clone(in[:len(in)-(len(pred)-1)]), Predict: slices.Clone(pred)})
	}
	predLen := maxSeqLen - contextLen + 1
	first := min(maxSeqLen, len(tokens))
	add(slices.Concat([]int{prefix}, tokens[:first-1]), tokens[:first])
	predicted := first
	for predicted < len(tokens) {
		n := min(len(tokens)-predicted, predLen)
		end := predicted + n
		add(tokens[end-maxSeqLen-1:end-1], tokens[end-n:end])
		predicted += n
	}
	return out
}

// generate answers a generate_until request as HFLM does: the context left-truncated to
// max_length - max_gen_toks, greedy decoding until a stop string appears in the text, the end
// token or max_gen_toks tokens; the text, without special tokens, is cut at each stop string.
func (r *Runner) generate(ctx context.Context, q *Request, g *GenerationKwargs) error {
	maxCtx := r.MaxLength - g.MaxGenToks
	if maxCtx <= 0 {
		return fmt.Errorf("max_gen_toks %d must be less than max length %d", g.MaxGenToks, r.MaxLength)
	}
	ids := r.Tokenizer.Encode(q.Context)
	if len(ids) > maxCtx {
		ids = ids[len(ids)-maxCtx:]
	}
	if len(ids) == 0 {
		ids = []int{r.PrefixID}
	}
	eos, _ := r.Tokenizer.Decode([]int{r.EOSID})
	until := slices.Clone(g.Until)
	if !slices.Contains(until, eos) {
		until = append(until, eos)
	}
	stops := slices.Clone(r.StopIDs)
	if !slices.Contains(stops, r.EOSID) {
		stops = append(stops, r.EOSID)
	}
	var out []int
	gen, err := r.Model.Generate(ids, octlm.GenerateOptions{
		MaxNewTokens: g.MaxGenToks, Sampling: octlm.Greedy(), StopIDs: stops, Context: ctx,
		OnToken: func(id int) bool {
			out = append(out, id)
			text, _ := r.Tokenizer.Decode(out)
			for _, u := range until {
				if u != "" && strings.Contains(text, u) {
					return false
				}
			}
			return true
		},
	})
	if err != nil {
		return fmt.Errorf("generating: %w", err)
	}
	if gen.StopReason == octlm.StopInterrupted {
		return context.Cause(ctx)
	}
	var kept []int
	for _, id := range gen.GeneratedIDs {
		if !r.Tokenizer.IsSpecial(id) {
			kept = append(kept, id)
		}
	}
	text, err := r.Tokenizer.Decode(kept)
	if err != nil {
		return fmt.Errorf("decoding the generation: %w", err)
	}
	for _, u := range until {
		if u != "" {
			text, _, _ = strings.Cut(text, u)
		}
	}
	q.Generated = text
	return nil
}

// Longest is the most positions one model call will need for the documents' requests (the
// KV cache to plan for), at most MaxLength; it needs only the tokenizer.
func (r *Runner) Longest(in *Instances) int {
	n := 1
	for _, d := range in.Docs {
		for _, q := range d.Requests {
			switch q.Type {
			case Loglikelihood:
				c, k := r.encodePair(q.Context, q.Continuation)
				n = max(n, min(len(c)+len(k)-1, r.MaxLength))
			case LoglikelihoodRolling:
				n = max(n, min(len(r.Tokenizer.Encode(q.Continuation)), r.MaxLength))
			case GenerateUntil:
				g := in.Task.Generation.MaxGenToks
				n = max(n, min(len(r.Tokenizer.Encode(q.Context)), r.MaxLength-g)+g)
			}
		}
	}
	return n
}
