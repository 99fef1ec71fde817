package octlm

// Batches at inference: B sequences in one step graph, each on its own cache (its own start
// position, length and slots; for Qwen3.5 its own recurrent state). Ragged chunks are padded to
// the longest one's length bucket, as one sequence's chunk is; each sequence's attention reads
// its own cache's blocks (as many as the furthest start of the batch needs), the recurrent
// states are stacked on a batch axis and split back.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gomlx/gomlx/core/tensors"
)

// ForwardBatch is Forward for several sequences at once: the logits of every position of each.
func (m *Model) ForwardBatch(seqs [][]int) ([]Logits, error) {
	caches := make([]*Cache, len(seqs))
	defer func() {
		for _, c := range caches {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i, ids := range seqs {
		c, err := m.NewCache(max(len(ids), 1))
		if err != nil {
			return nil, fmt.Errorf("octlm: sequence %d: %w", i, err)
		}
		caches[i] = c
	}
	return m.ForwardCachedBatch(seqs, caches)
}

// ForwardCachedBatch is ForwardCached for several sequences at once: seqs[b] runs on top of
// caches[b] (distinct caches of this model), and the logits of every position of each come back.
func (m *Model) ForwardCachedBatch(seqs [][]int, caches []*Cache) ([]Logits, error) {
	rows := make([][]int, len(seqs))
	for b, ids := range seqs {
		rows[b] = make([]int, len(ids))
		for i := range rows[b] {
			rows[b][i] = i
		}
	}
	return m.runBatch(seqs, caches, rows, nil)
}

// NextBatch is Next for several sequences at once: seqs[b] runs on top of caches[b], and the
// logits of each one's last position come back (a decoding step of B sequences).
func (m *Model) NextBatch(seqs [][]int, caches []*Cache) ([][]float32, error) {
	return m.NextBatchInto(seqs, caches, nil)
}

// NextBatchInto is NextBatch writing sequence b's logits into into[b] where it has the room
// (len(into) may be less than len(seqs)): a decoding loop gives back the last step's logits,
// done with them. Fresh, a step's 0.6 MB of logits a sequence (Qwen3's vocabulary) were most of
// a decode step's garbage, and the heap, growing towards the collector's goal, took each from
// fresh pages, faulted in one by one.
func (m *Model) NextBatchInto(seqs [][]int, caches []*Cache, into [][]float32) ([][]float32, error) {
	rows := make([][]int, len(seqs))
	for b, ids := range seqs {
		rows[b] = []int{len(ids) - 1}
	}
	out, err := m.runBatch(seqs, caches, rows, into)
	if err != nil {
		return nil, err
	}
	next := make([][]float32, len(out))
	for b, l := range out {
		next[b] = l.Data
	}
	return next, nil
}

// runBatch runs seqs[b] on top of caches[b] and returns the logits of rows[b] (ascending) of each,
// sequence b's in into[b] where it has the room (len(into) may be less than len(seqs)).
// Long sequences run as consecutive chunks (see chunkRows), all the sequences with tokens left in
// each step.
func (m *Model) runBatch(seqs [][]int, caches []*Cache, rows [][]int, into [][]float32) ([]Logits, error) {
	if len(seqs) == 0 || len(caches) != len(seqs) || len(rows) != len(seqs) {
		return nil, fmt.Errorf("octlm: a batch of %d sequences with %d caches: %w", len(seqs), len(caches), ErrBadInput)
	}
	seen := make(map[*Cache]int, len(caches))
	for b, c := range caches {
		if c == nil || c.model != m {
			return nil, fmt.Errorf("octlm: sequence %d: the cache does not belong to this model: %w", b, ErrBadInput)
		}
		if a, dup := seen[c]; dup {
			return nil, fmt.Errorf("octlm: sequences %d and %d share one cache: %w", a, b, ErrBadInput)
		}
		seen[c] = b
		if err := m.checkIDs(seqs[b], c); err != nil {
			if len(seqs) > 1 {
				err = fmt.Errorf("sequence %d: %w", b, err)
			}
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.weights == nil {
		return nil, errors.New("octlm: model is closed")
	}
	out := make([]Logits, len(seqs))
	for b, c := range caches {
		if c.dtype != caches[0].dtype {
			return nil, fmt.Errorf("octlm: sequences 0 and %d: caches of %s and %s in one batch: %w", b, caches[0].dtype, c.dtype, ErrBadInput)
		}
		if err := c.reserve(c.Len() + len(seqs[b])); err != nil {
			return nil, err
		}
		size := len(rows[b]) * m.shape.Vocab
		var data []float32
		if b < len(into) && cap(into[b]) >= size {
			data = into[b][:0]
		} else {
			data = make([]float32, 0, size)
		}
		out[b] = Logits{Rows: len(rows[b]), Vocab: m.shape.Vocab, Data: data}
	}
	at := make([]int, len(seqs)) // tokens of each sequence run so far
	for {
		var active []int
		maxStart, capacity := 0, 0
		for b, ids := range seqs {
			if at[b] < len(ids) {
				active = append(active, b)
				maxStart = max(maxStart, caches[b].Len())
				capacity = max(capacity, caches[b].capacity)
			}
		}
		if len(active) == 0 {
			return out, nil
		}
		chunk := min(m.chunkRows(maxStart, capacity), m.shape.Context-maxStart)
		ch := batchChunk{seqLen: 0}
		for _, b := range active {
			n := min(chunk, len(seqs[b])-at[b])
			// The rows of this chunk whose logits are wanted, relative to the chunk; a chunk that
			// needs none still computes one row, which is dropped.
			first := len(out[b].Data) / out[b].Vocab
			last := first
			for last < len(rows[b]) && rows[b][last] < at[b]+n {
				last++
			}
			var want []int
			for _, r := range rows[b][first:last] {
				want = append(want, r-at[b])
			}
			ch.ids = append(ch.ids, seqs[b][at[b]:at[b]+n])
			ch.caches = append(ch.caches, caches[b])
			ch.rows = append(ch.rows, want)
			ch.seqLen = max(ch.seqLen, n)
		}
		err := m.runBatchChunk(ch, func(i int, logits []float32) { out[active[i]].Data = append(out[active[i]].Data, logits...) })
		for i, b := range active {
			if err != nil {
				if at[b] > 0 {
					// The cache holds part of ids: neither what it held before nor all of it.
					caches[b].broken = true
				}
				continue
			}
			at[b] += len(ch.ids[i])
		}
		if err != nil {
			if len(seqs) == 1 && at[0] > 0 {
				err = fmt.Errorf("%w (after %d of the %d tokens: the KV cache is lost)", err, at[0], len(seqs[0]))
			} else if len(seqs) > 1 {
				err = fmt.Errorf("%w (the caches of the batch are lost)", err)
			}
			return nil, err
		}
	}
}

// batchChunk is one step of a batch: each active sequence's next ids on its cache, the rows of
// them whose logits are wanted, and the longest chunk's length.
type batchChunk struct {
	ids    [][]int
	caches []*Cache
	rows   [][]int
	seqLen int
}

// runBatchChunk executes the step graph once for the chunks of ch, and passes keep the flat
// logits of the wanted rows of each chunk i, read in place from the step's output (keep copies
// what it keeps: the slice is the output's, valid only during the call). A B-sequence step's
// logits are B × 0.6 MB for Qwen3-0.6B: copied once, not twice, into the caller's rows. Every
// sequence reads its own cache's first blocks, as many as cover the furthest start of the batch
// (the slots past a sequence's own start are masked, and zero); the chunk's new keys and values
// come back and are written into each cache's blocks in place, the recurrent states are donated
// and replaced.
func (m *Model) runBatchChunk(ch batchChunk, keep func(i int, logits []float32)) error {
	batch := len(ch.ids)
	maxStart := 0
	for _, c := range ch.caches {
		maxStart = max(maxStart, c.Len())
	}
	for i, c := range ch.caches {
		if err := c.reserve(max(maxStart, c.Len()+len(ch.ids[i]))); err != nil {
			return err
		}
	}
	seqLen := lengthBucket(ch.seqLen)
	numBlocks := ch.caches[0].covering(maxStart) // the blocks follow one schedule: the same sizes in every cache

	start := make([]int32, batch)
	valid := make([]int32, batch)
	wanted := 1
	for i, ids := range ch.ids {
		start[i], valid[i] = int32(ch.caches[i].Len()), int32(len(ids))
		wanted = max(wanted, len(ch.rows[i]))
	}
	// The rows per sequence in a length bucket too (never past seqLen's), so that runs of
	// every length wanting all their rows (a loglikelihood request's continuation) share
	// graphs as their chunks do; the extra rows are fillers.
	wanted = lengthBucket(wanted)
	tokens, err := m.stepTokens(ch.ids, seqLen)
	if err != nil {
		return err
	}
	defer func() { _ = tokens.FinalizeAll() }()
	logitRows := make([]int32, batch*wanted)
	for i, r := range ch.rows {
		for j := range wanted {
			row := len(ch.ids[i]) - 1 // filler: computed, dropped
			if j < len(r) {
				row = r[j]
			}
			logitRows[i*wanted+j] = int32(row)
		}
	}
	specs := ch.caches[0].specs
	args := make([]*tensors.Tensor, 0, numStepInputs+len(m.weights)+batch*len(specs)*max(numBlocks, 1))
	args = append(args, tokens, tensors.FromValue(start), tensors.FromValue(valid), tensors.FromFlatDataAndDimensions(logitRows, batch, wanted))
	args = append(args, m.weights...)
	give := []int{1, 2} // indices in args given to the step: start, valid and the fixed-size states
	for _, c := range ch.caches {
		for i, spec := range specs {
			if spec.PosAxis < 0 {
				give = append(give, len(args))
				args = append(args, c.state[i][0])
				continue
			}
			args = append(args, c.state[i][:numBlocks]...)
		}
	}
	dtype := ch.caches[0].dtype
	step, err := m.compileFor(args, dtype)
	if err != nil {
		return err
	}
	outputs, err := step.call(m.Backend, args, give)
	if err != nil {
		for _, c := range ch.caches {
			c.broken = true // the fixed-size states' buffers may have been donated
		}
		return fmt.Errorf("octlm: running the step graph (%d sequences, %d tokens at position %d): %w", batch, ch.seqLen, start[0], err)
	}
	if err := m.keepState(ch, outputs[1:], seqLen); err != nil {
		return err
	}
	vocab := m.shape.Vocab
	err = outputs[0].ConstFlatData(func(flat any) {
		data := flat.([]float32)
		for i, r := range ch.rows {
			keep(i, data[i*wanted*vocab:(i*wanted+len(r))*vocab])
		}
	})
	_ = outputs[0].FinalizeAll()
	if err != nil {
		return fmt.Errorf("octlm: reading logits: %w", err)
	}
	return nil
}

// stepTokens is the step graph's first input for the chunks ids, each padded with token 0 to
// seqLen: their IDs, int32 [B, seqLen], or with Layout.HostEmbed their embeddings looked up on
// the host [B, seqLen, d].
func (m *Model) stepTokens(ids [][]int, seqLen int) (*tensors.Tensor, error) {
	if m.layout.HostEmbed {
		return m.layout.hostEmbeddings(m.embeddingTensors(), ids, seqLen, m.shape.Vocab)
	}
	padded := make([]int32, len(ids)*seqLen)
	for i, row := range ids {
		for j, id := range row {
			padded[i*seqLen+j] = int32(id)
		}
	}
	return tensors.FromFlatDataAndDimensions(padded, len(ids), seqLen), nil
}

// keepState takes a step's state outputs (see stepGraph) into the caches of ch: the new rows of
// each position-indexed state written into each sequence's blocks, the new fixed-size states in
// place of the donated ones. On an error every cache of ch is lost.
func (m *Model) keepState(ch batchChunk, outputs []*tensors.Tensor, seqLen int) error {
	specs := ch.caches[0].specs
	type newRows struct {
		spec int
		rows *tensors.Tensor
	}
	var states []newRows // the position-indexed states' new rows
	at := 0
	for i, spec := range specs {
		if spec.PosAxis >= 0 {
			states = append(states, newRows{i, outputs[at]})
			at++
		}
	}
	// Every state of every sequence written at once, the states apart first (a tensor's rows are
	// read under its lock): a transposed key block takes a value at every one of its rows (1,024
	// lines a layer for Qwen3-0.6B), each store waiting on its line; an 8-sequence step spent
	// 5.7–5.8 ms here on one core, one sequence's 0.4 ms.
	n := len(states)
	errs := make([]error, n*len(ch.caches), n*len(ch.caches)+n)
	parallelEach(len(errs), func(k int) {
		s, b := states[k%n], k/n
		c := ch.caches[b]
		var written error
		err := s.rows.ConstBytes(func(data []byte) {
			written = c.writeRows(s.spec, data, b, seqLen, c.Len(), len(ch.ids[b]))
		})
		errs[k] = errors.Join(err, written)
	})
	for _, s := range states {
		errs = append(errs, s.rows.FinalizeAll())
	}
	for _, c := range ch.caches {
		for i, spec := range specs {
			if spec.PosAxis < 0 {
				c.state[i] = []*tensors.Tensor{outputs[at]}
				at++
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		for _, c := range ch.caches {
			c.broken = true
		}
		return fmt.Errorf("octlm: keeping the step's state: %w", err)
	}
	for i, c := range ch.caches {
		c.length += len(ch.ids[i])
		c.ids = append(c.ids, ch.ids[i]...)
	}
	return nil
}

// GenerateBatch is Generate for several prompts at once: each prompt continues on its own cache
// with its own sampler (opts.Sampling, the same seed for each), the decoding steps of every
// unfinished prompt batched into one step graph (NextBatch). Each Generation is the one Generate
// returns for that prompt alone (its times are the batch's). opts.OnToken must be nil. If a step
// fails, it returns the tokens generated so far together with the error.
func (m *Model) GenerateBatch(prompts [][]int, opts GenerateOptions) ([]Generation, error) {
	if opts.OnToken != nil {
		return nil, fmt.Errorf("octlm: GenerateBatch takes no OnToken callback: %w", ErrBadInput)
	}
	if len(prompts) == 0 {
		return nil, fmt.Errorf("octlm: GenerateBatch of no prompts: %w", ErrBadInput)
	}
	maxNew := make([]int, len(prompts))
	caches := make([]*Cache, len(prompts))
	defer func() {
		for _, c := range caches {
			if c != nil {
				c.Close()
			}
		}
	}()
	gens := make([]Generation, len(prompts))
	samplers := make([]*Sampler, len(prompts))
	seen := make([][]int, len(prompts))
	for b, prompt := range prompts {
		n, err := checkGenerate(m, prompt, opts)
		if err != nil {
			return nil, fmt.Errorf("octlm: prompt %d: %w", b, err)
		}
		if caches[b], err = m.NewGenerationCache(len(prompt)+n-1, opts); err != nil {
			return nil, fmt.Errorf("octlm: prompt %d: %w", b, err)
		}
		maxNew[b] = n
		gens[b] = Generation{PromptIDs: slices.Clone(prompt), StopReason: StopLength}
		samplers[b] = NewSampler(opts.Sampling)
		seen[b] = slices.Clone(prompt)
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	begin := time.Now()
	active := make([]int, len(prompts))
	inputs := make([][]int, len(prompts))
	for b := range active {
		active[b] = b
		inputs[b] = prompts[b]
	}
	var logits [][]float32 // each step's, the next step's to write into
	var err error
	for len(active) > 0 {
		stepCaches := make([]*Cache, len(active))
		for i, b := range active {
			stepCaches[i] = caches[b]
		}
		logits, err = m.NextBatchInto(inputs, stepCaches, logits)
		if err != nil {
			return gens, err
		}
		if gens[active[0]].Prefill == 0 {
			for b := range gens {
				gens[b].Prefill = time.Since(begin)
			}
		}
		if ctx.Err() != nil {
			for _, b := range active {
				gens[b].StopReason = StopInterrupted
			}
			break
		}
		var next []int
		inputs = inputs[:0]
		for i, b := range active {
			if err := CheckFinite(logits[i]); err != nil {
				return gens, fmt.Errorf("octlm: prompt %d, generated token %d: %w", b, len(gens[b].GeneratedIDs)+1, err)
			}
			id := samplers[b].Next(logits[i], seen[b])
			g := &gens[b]
			if len(g.GeneratedIDs) == 0 {
				g.TimeToFirstToken = time.Since(begin)
			}
			g.GeneratedIDs = append(g.GeneratedIDs, id)
			seen[b] = append(seen[b], id)
			switch {
			case slices.Contains(opts.StopIDs, id):
				g.StopReason = StopEOS
			case len(g.GeneratedIDs) >= maxNew[b]:
			default:
				next = append(next, b)
				inputs = append(inputs, []int{id})
			}
		}
		active = next
	}
	for b := range gens {
		if len(gens[b].GeneratedIDs) > 0 {
			gens[b].Decode = time.Since(begin) - gens[b].TimeToFirstToken
		}
	}
	return gens, nil
}
