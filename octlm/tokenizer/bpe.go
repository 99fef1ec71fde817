package tokenizer

import (
	"math"
	"sync"
)

// noMerge is the rank of a pair that does not merge.
const noMerge = math.MaxUint32

// pairKey packs two token IDs into a key of the merges table.
func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// merge looks up the pair (a, b): its rank and the ID of the merged token, or noMerge.
func (t *Tokenizer) merge(a, b int32) (rank uint32, id int32) {
	v, ok := t.merges.get(pairKey(a, b))
	if !ok {
		return noMerge, -1
	}
	return uint32(v >> 32), int32(uint32(v))
}

// wordCache remembers the tokens of words seen before. It is safe for concurrent use and
// forgets everything when it grows past its limit.
type wordCache struct {
	mu sync.RWMutex
	m  map[string][]int32
}

const (
	cacheMaxEntries = 1 << 16
	cacheMaxWord    = 64 // bytes; longer words are rare and not worth keeping
)

func (c *wordCache) get(w string) ([]int32, bool) {
	c.mu.RLock()
	ids, ok := c.m[w]
	c.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(w string, ids []int32) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= cacheMaxEntries {
		c.m = make(map[string][]int32)
	}
	c.m[w] = ids
	c.mu.Unlock()
}

// encodeWord appends the BPE tokens of one pre-tokenized word (raw bytes) to out.
func (t *Tokenizer) encodeWord(w string, out []int) []int {
	if len(w) == 1 {
		return append(out, int(t.byteIDs[w[0]]))
	}
	if t.ignoreMerges {
		if id, ok := t.ids[w]; ok {
			return append(out, id)
		}
	}
	useCache := !t.noCache && len(w) <= cacheMaxWord
	if useCache {
		if ids, ok := t.cache.get(w); ok {
			for _, id := range ids {
				out = append(out, int(id))
			}
			return out
		}
	}
	var ids []int32
	if len(w) <= 256 {
		ids = t.mergeSmall(w)
	} else {
		ids = t.mergeHeap(w)
	}
	if useCache {
		t.cache.put(w, ids)
	}
	for _, id := range ids {
		out = append(out, int(id))
	}
	return out
}

// mergeSmall applies the merges to w, lowest rank first and leftmost first among equals, keeping
// the rank of each adjacent pair in an array. Quadratic in the worst case; for short words.
func (t *Tokenizer) mergeSmall(w string) []int32 {
	ids := make([]int32, len(w))
	for i := 0; i < len(w); i++ {
		ids[i] = t.byteIDs[w[i]]
	}
	var rankBuf [64]uint32
	var newBuf [64]int32
	ranks, news := rankBuf[:0], newBuf[:0]
	for i := 0; i+1 < len(ids); i++ {
		r, id := t.merge(ids[i], ids[i+1])
		ranks = append(ranks, r)
		news = append(news, id)
	}
	for len(ids) > 1 {
		best, bi := uint32(noMerge), -1
		for i, r := range ranks {
			if r < best {
				best, bi = r, i
			}
		}
		if bi < 0 {
			break
		}
		ids[bi] = news[bi]
		ids = append(ids[:bi+1], ids[bi+2:]...)
		ranks = append(ranks[:bi], ranks[bi+1:]...)
		news = append(news[:bi], news[bi+1:]...)
		if bi > 0 {
			ranks[bi-1], news[bi-1] = t.merge(ids[bi-1], ids[bi])
		}
		if bi < len(ranks) {
			ranks[bi], news[bi] = t.merge(ids[bi], ids[bi+1])
		}
	}
	return ids
}

// mergeHeap applies the merges to w as Hugging Face's BPE does: a priority queue of candidate
// pairs by (rank, position) over a linked list of symbols. O(n log n) for long words.
func (t *Tokenizer) mergeHeap(w string) []int32 {
	n := len(w)
	type symbol struct {
		id         int32
		prev, next int32
		alive      bool
	}
	syms := make([]symbol, n)
	for i := 0; i < n; i++ {
		syms[i] = symbol{id: t.byteIDs[w[i]], prev: int32(i - 1), next: int32(i + 1), alive: true}
	}
	syms[n-1].next = -1
	var h pairHeap
	for i := 0; i+1 < n; i++ {
		if r, _ := t.merge(syms[i].id, syms[i+1].id); r != noMerge {
			h.push(uint64(r)<<32 | uint64(i))
		}
	}
	for len(h) > 0 {
		top := h.pop()
		rank, pos := uint32(top>>32), int32(uint32(top))
		s := &syms[pos]
		if !s.alive || s.next < 0 {
			continue
		}
		nx := &syms[s.next]
		r, id := t.merge(s.id, nx.id)
		if r != rank {
			continue // stale: one of the two symbols has changed since this pair was queued
		}
		s.id = id
		nx.alive = false
		s.next = nx.next
		if s.next >= 0 {
			syms[s.next].prev = pos
		}
		if s.prev >= 0 {
			if r, _ := t.merge(syms[s.prev].id, s.id); r != noMerge {
				h.push(uint64(r)<<32 | uint64(uint32(s.prev)))
			}
		}
		if s.next >= 0 {
			if r, _ := t.merge(s.id, syms[s.next].id); r != noMerge {
				h.push(uint64(r)<<32 | uint64(uint32(pos)))
			}
		}
	}
	var ids []int32
	for i := int32(0); i >= 0; i = syms[i].next {
		ids = append(ids, syms[i].id)
	}
	return ids
}

// pairHeap is a min-heap of rank<<32|position keys.
type pairHeap []uint64

func (h *pairHeap) push(k uint64) {
	*h = append(*h, k)
	a := *h
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if a[p] <= a[i] {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *pairHeap) pop() uint64 {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(a) {
			break
		}
		m := l
		if r := l + 1; r < len(a) && a[r] < a[l] {
			m = r
		}
		if a[i] <= a[m] {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}
