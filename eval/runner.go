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

// LM is what the harness needs of a model: *octlm.Model is one. Every call runs a batch of
// sequences, each on top of its own cache (one sequence when Runner.Batch is 1).
type LM interface {
	Shape() octlm.Shape
	NewCache(capacity int) (*octlm.Cache, error)
	// ForwardCachedBatch: the logits of every position of each sequence.
	ForwardCachedBatch(seqs [][]int, caches []*octlm.Cache) ([]octlm.Logits, error)
	// NextBatch: the logits of each sequence's last position.
	NextBatch(seqs [][]int, caches []*octlm.Cache) ([][]float32, error)
}

// Runner answers requests as lm-eval's Hugging Face backend (HFLM) answers them.
type Runner struct {
	Model     LM
	Tokenizer *tokenizer.Tokenizer
	MaxLength int   // lm-eval's max_length: inputs are left-truncated to it
	PrefixID  int   // the token an empty context becomes: bos_token, else eos_token
	EOSID     int   // eos_token: generation stops at it
	StopIDs   []int // generation also stops at these (the checkpoint's eos_token_id)

	// Batch is how many sequences run together in one model call (below 1: one). Loglikelihood
	// requests go B prefixes at a time (a batch holds fewer when their logits would pass
	// MaxBatchLogitBytes), generations B prompts at a time, each decoding step of the unfinished
	// ones batched.
	Batch int

	// ShareContexts scores the choices of a multiple-choice document from one cached run of
	// their shared context (Cache.Truncate back to it after each choice) instead of running the
	// context again for every choice. Off, every request runs its own context, as HFLM runs it.
	ShareContexts bool

	// Progress, when set, is called after each request with the requests answered and the
	// total.
	Progress func(done, total int)
}

// MaxBatchLogitBytes bounds the float32 logits one batched call of Runner returns (the rows
// scored, times the vocabulary): a batch that would pass it holds fewer sequences (at least one).
const MaxBatchLogitBytes = 1 << 30

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

// job is one loglikelihood request, or one window of a rolling request, with its tokens.
type job struct {
	req       *Request
	ctx, cont []int
	window    bool // one window of a rolling request: adds to req's log-likelihood
}

// group is jobs that share one prefix: the prefix runs once into a cache, its last row scoring
// each job's first continuation token, and each job's continuation less its last token runs on
// top of it for the other rows, the cache truncated back to the prefix between jobs. The prefix
// is a job's context, or, where context + continuation is longer than max_length + 1, what is
// left of it after HFLM's left truncation.
type group struct {
	prefix []int
	jobs   []job
}

// Run answers every request of the documents. Requests run longest first (HFLM's order),
// Batch at a time; with ShareContexts, the choices of a document that share a context run
// from one cached prefix. As each document's last request is answered, the document is scored
// (ScoreDoc) and handed to onDoc when set. It stops at ctx's end with ctx's error; the requests
// answered so far keep their results.
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
				if len(c) == 0 {
					return fmt.Errorf("%s: document %d, request %d: the context %q has no tokens", in.Task.Name, d.ID, q.Index, q.Context)
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
	share := false
	if r.ShareContexts && len(jobs) > 0 {
		c, err := r.Model.NewCache(1)
		if err != nil {
			return err
		}
		share = c.CanTruncate() // a recurrent state cannot go back to the context
		c.Close()
	}
	groups := r.schedule(jobs, share)
	for len(groups) > 0 {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		n := r.batchOf(groups)
		if err := r.runGroups(groups[:n], step); err != nil {
			return fmt.Errorf("%s: %w", in.Task.Name, err)
		}
		groups = groups[n:]
	}
	sort.SliceStable(gens, func(i, j int) bool { return len(gens[i].Context) > len(gens[j].Context) })
	for len(gens) > 0 {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		n := min(len(gens), max(r.Batch, 1))
		if err := r.generate(ctx, gens[:n], &in.Task.Generation); err != nil {
			return fmt.Errorf("%s: %w", in.Task.Name, err)
		}
		for _, q := range gens[:n] {
			if err := step(q); err != nil {
				return err
			}
		}
		gens = gens[n:]
	}
	return nil
}

// schedule orders jobs longest first (HFLM's _collate: by -len(context+continuation)) into
// groups: with share, the loglikelihood jobs that share their context tokens and need no
// truncation form one group, in the place of the longest; every other job is a group of its
// own.
func (r *Runner) schedule(jobs []job, share bool) []group {
	sort.SliceStable(jobs, func(i, j int) bool {
		return len(jobs[i].ctx)+len(jobs[i].cont) > len(jobs[j].ctx)+len(jobs[j].cont)
	})
	var groups []group
	index := map[string]int{}
	for _, j := range jobs {
		all := slices.Concat(j.ctx, j.cont)
		if len(all) > r.MaxLength+1 {
			all = all[len(all)-(r.MaxLength+1):]
			groups = append(groups, group{prefix: all[:len(all)-len(j.cont)], jobs: []job{j}})
			continue
		}
		if !share || j.window {
			groups = append(groups, group{prefix: j.ctx, jobs: []job{j}})
			continue
		}
		key := fmt.Sprint(j.ctx)
		if g, ok := index[key]; ok {
			groups[g].jobs = append(groups[g].jobs, j)
			continue
		}
		index[key] = len(groups)
		groups = append(groups, group{prefix: j.ctx, jobs: []job{j}})
	}
	return groups
}

// batchOf is how many of groups (at least one) the next batch takes: Batch, fewer where the
// logits of their longest continuations would pass MaxBatchLogitBytes.
func (r *Runner) batchOf(groups []group) int {
	perRow := int64(r.Model.Shape().Vocab) * 4
	var bytes int64
	n := 0
	for n < min(len(groups), max(r.Batch, 1)) {
		rows := 0
		for _, j := range groups[n].jobs {
			rows = max(rows, len(j.cont))
		}
		if bytes += int64(rows) * perRow; n > 0 && bytes > MaxBatchLogitBytes {
			break
		}
		n++
	}
	return n
}

// runGroups runs a batch of groups: their prefixes together, then in round k the k-th job of
// every group that has one, each on its own group's cache.
func (r *Runner) runGroups(groups []group, step func(*Request) error) error {
	caches := make([]*octlm.Cache, len(groups))
	defer func() {
		for _, c := range caches {
			if c != nil {
				c.Close()
			}
		}
	}()
	prefixes := make([][]int, len(groups))
	rounds := 0
	for b, g := range groups {
		longest := 0
		for _, j := range g.jobs {
			longest = max(longest, len(j.cont)-1)
		}
		c, err := r.Model.NewCache(len(g.prefix) + longest)
		if err != nil {
			return err
		}
		caches[b], prefixes[b] = c, g.prefix
		rounds = max(rounds, len(g.jobs))
	}
	first, err := r.Model.NextBatch(prefixes, caches)
	if err != nil {
		return fmt.Errorf("running %s: %w", describeBatch(prefixes), err)
	}
	for k := range rounds {
		var seqs [][]int
		var cs []*octlm.Cache
		for b, g := range groups {
			if k < len(g.jobs) && len(g.jobs[k].cont) > 1 {
				if err := caches[b].Truncate(len(g.prefix)); err != nil {
					return err
				}
				cont := g.jobs[k].cont
				seqs = append(seqs, cont[:len(cont)-1])
				cs = append(cs, caches[b])
			}
		}
		var rest []octlm.Logits
		if len(seqs) > 0 {
			if rest, err = r.Model.ForwardCachedBatch(seqs, cs); err != nil {
				return fmt.Errorf("running continuations (%s): %w", describeBatch(seqs), err)
			}
		}
		for b, g := range groups {
			if k >= len(g.jobs) {
				continue
			}
			j := g.jobs[k]
			rows := [][]float32{first[b]}
			if len(j.cont) > 1 {
				l := rest[0]
				rest = rest[1:]
				for i := range l.Rows {
					rows = append(rows, l.Row(i))
				}
			}
			score(j, rows)
			if err := step(j.req); err != nil {
				return err
			}
		}
	}
	return nil
}

// describeBatch names a batch's size for an error: "12 tokens", or "4 sequences of 3 to 12 tokens".
func describeBatch(seqs [][]int) string {
	shortest, longest := len(seqs[0]), len(seqs[0])
	for _, s := range seqs {
		shortest, longest = min(shortest, len(s)), max(longest, len(s))
	}
	if len(seqs) == 1 {
		return fmt.Sprintf("%d tokens", longest)
	}
	return fmt.Sprintf("%d sequences of %d to %d tokens", len(seqs), shortest, longest)
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

// generate answers generate_until requests together as HFLM answers each: the context
// left-truncated to max_length - max_gen_toks, greedy decoding until a stop string appears in
// the text, the end token or max_gen_toks tokens; the text, without special tokens, is cut at
// each stop string. Each decoding step runs the unfinished requests as one batch.
func (r *Runner) generate(ctx context.Context, qs []*Request, g *GenerationKwargs) error {
	maxCtx := r.MaxLength - g.MaxGenToks
	if maxCtx <= 0 {
		return fmt.Errorf("max_gen_toks %d must be less than max length %d", g.MaxGenToks, r.MaxLength)
	}
	eos := r.decode([]int{r.EOSID}, false)
	until := slices.Clone(g.Until)
	if !slices.Contains(until, eos) {
		until = append(until, eos)
	}
	stops := slices.Clone(r.StopIDs)
	if !slices.Contains(stops, r.EOSID) {
		stops = append(stops, r.EOSID)
	}
	caches := make([]*octlm.Cache, len(qs))
	defer func() {
		for _, c := range caches {
			if c != nil {
				c.Close()
			}
		}
	}()
	inputs := make([][]int, len(qs))
	active := make([]int, len(qs)) // the requests still generating
	for b, q := range qs {
		ids := r.Tokenizer.Encode(q.Context)
		if len(ids) > maxCtx {
			ids = ids[len(ids)-maxCtx:]
		}
		if len(ids) == 0 {
			ids = []int{r.PrefixID}
		}
		c, err := r.Model.NewCache(len(ids) + g.MaxGenToks - 1)
		if err != nil {
			return err
		}
		caches[b], inputs[b], active[b] = c, ids, b
	}
	out := make([][]int, len(qs))
	for len(active) > 0 {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		cs := make([]*octlm.Cache, len(active))
		for i, b := range active {
			cs[i] = caches[b]
		}
		logits, err := r.Model.NextBatch(inputs, cs)
		if err != nil {
			return fmt.Errorf("generating (%s): %w", describeBatch(inputs), err)
		}
		var next []int
		inputs = inputs[:0]
		for i, b := range active {
			if err := octlm.CheckFinite(logits[i]); err != nil {
				return fmt.Errorf("generating token %d: %w", len(out[b])+1, err)
			}
			id := octlm.Argmax(logits[i])
			out[b] = append(out[b], id)
			if slices.Contains(stops, id) || len(out[b]) >= g.MaxGenToks || containsAny(r.decode(out[b], false), until) {
				continue
			}
			next = append(next, b)
			inputs = append(inputs, []int{id})
		}
		active = next
	}
	for b, q := range qs {
		text := r.decode(out[b], true)
		for _, u := range until {
			if u != "" {
				text, _, _ = strings.Cut(text, u)
			}
		}
		q.Generated = text
	}
	return nil
}

// containsAny reports whether text contains one of the non-empty strings of subs.
func containsAny(text string, subs []string) bool {
	for _, u := range subs {
		if u != "" && strings.Contains(text, u) {
			return true
		}
	}
	return false
}

// decode is the text of ids as Hugging Face tokenizers decode them: an ID the tokenizer has no
// token for (a model's vocabulary is often padded past its tokenizer's) is left out, and so are
// special tokens when skipSpecial (skip_special_tokens).
func (r *Runner) decode(ids []int, skipSpecial bool) string {
	kept := make([]int, 0, len(ids))
	for _, id := range ids {
		if _, err := r.Tokenizer.DecodeToken(id); err == nil && !(skipSpecial && r.Tokenizer.IsSpecial(id)) {
			kept = append(kept, id)
		}
	}
	text, _ := r.Tokenizer.Decode(kept) // every ID kept has a token
	return text
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
