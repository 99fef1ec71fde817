package train

import (
	"math/rand/v2"
)

// Order says which row each position of the training stream reads: position p (0-based) is
// row p mod N in file order, or, shuffled, row perm_e[p mod N] of epoch e = p div N, each
// epoch's permutation drawn from the seed and e alone. A position is all a resumed run needs
// to continue the same stream.
type Order struct {
	Rows    int
	Shuffle bool
	Seed    uint64

	epoch int64 // of perm; -1 none
	perm  []int
}

// NewOrder is the order of n rows.
func NewOrder(n int, shuffle bool, seed uint64) *Order {
	return &Order{Rows: n, Shuffle: shuffle, Seed: seed, epoch: -1}
}

// Row is the row at stream position p.
func (o *Order) Row(p int64) int {
	n := int64(o.Rows)
	if !o.Shuffle {
		return int(p % n)
	}
	if e := p / n; e != o.epoch {
		rng := rand.New(rand.NewPCG(o.Seed, uint64(e)))
		o.perm = rng.Perm(o.Rows)
		o.epoch = e
	}
	return o.perm[p%n]
}

// Batch is a right-padded batch: IDs and Targets are [B, S] row-major, Lengths the real tokens
// of each row. Targets are the labels shifted left by one (Targets[t] = Labels[t+1]; the last
// position and the padding IgnoreIndex), so that position t's logits score Targets[t].
type Batch struct {
	B, S    int
	IDs     []int32
	Lengths []int32
	Targets []int32
	Tokens  int // the counted targets
}

// MakeBatch pads rows into one batch whose length is the longest row's rounded up to a multiple
// of padMultiple (≤ 1: no rounding), at most maxLen when maxLen > 0 (rows are never cut).
func MakeBatch(rows []Example, padMultiple, maxLen int) Batch {
	s := 0
	for _, r := range rows {
		s = max(s, len(r.IDs))
	}
	if padMultiple > 1 {
		padded := (s + padMultiple - 1) / padMultiple * padMultiple
		if maxLen <= 0 || padded <= maxLen {
			s = padded
		}
	}
	b := Batch{B: len(rows), S: s, IDs: make([]int32, len(rows)*s), Lengths: make([]int32, len(rows)), Targets: make([]int32, len(rows)*s)}
	for i := range b.Targets {
		b.Targets[i] = IgnoreIndex
	}
	for i, r := range rows {
		copy(b.IDs[i*s:], r.IDs)
		b.Lengths[i] = int32(len(r.IDs))
		for t := 0; t+1 < len(r.Labels); t++ {
			l := r.Labels[t+1]
			b.Targets[i*s+t] = l
			if l != IgnoreIndex {
				b.Tokens++
			}
		}
	}
	return b
}
