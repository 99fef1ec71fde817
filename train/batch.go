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

// MakeBatch pads rows into one batch whose length is the longest row's rounded up to a bucket
// (PadLength), at most maxLen when maxLen > 0 (rows are never cut).
func MakeBatch(rows []Example, padMultiple, maxLen int) Batch {
	s := 0
	for _, r := range rows {
		s = max(s, len(r.IDs))
	}
	if padded := PadLength(s, padMultiple); maxLen <= 0 || padded <= maxLen {
		s = padded
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

// PadLength rounds n up to the next of unit × 1, 2, 3, 4, 6, 8, 12, 16, … (powers of two and
// their halves between): each batch length is compiled once, so the buckets keep the number of
// graphs small (14 up to 1,024 tokens with unit 8) while padding wastes at most a third. unit ≤ 1
// does not round.
func PadLength(n, unit int) int {
	if unit <= 1 || n <= 0 {
		return n
	}
	for b := 1; ; b *= 2 {
		if unit*b >= n {
			return unit * b
		}
		if b >= 2 && unit*(b+b/2) >= n {
			return unit * (b + b/2)
		}
	}
}
