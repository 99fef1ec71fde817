package eval

// bootstrapStderr is lm-eval's bootstrap_stderr: iters/1000 chunks, chunk i drawing 1000
// resamples of xs with Python's random.Random(i).choices(xs, k=len(xs)), then the sample
// standard deviation of f over all resamples. Python's Mersenne Twister and its choices
// (floor(random() * n)) are reproduced, so the value is lm-eval's to the last bits of the
// sums' rounding.
func bootstrapStderr(f func([]float64) float64, xs []float64, iters int) float64 {
	chunk := min(1000, iters)
	var res []float64
	sample := make([]float64, len(xs))
	for i := 0; i < iters/chunk; i++ {
		mt := newPyRandom(uint32(i))
		for range chunk {
			for k := range sample {
				sample[k] = xs[int(mt.random()*float64(len(xs)))]
			}
			res = append(res, f(sample))
		}
	}
	return sampleStddev(res)
}

// pyRandom is CPython's random.Random: MT19937 seeded by init_by_array.
type pyRandom struct {
	mt  [624]uint32
	idx int
}

// newPyRandom seeds as random.Random(seed) does for a non-negative int below 2^32: the key is
// the seed's 32-bit words ([0] for 0).
func newPyRandom(seed uint32) *pyRandom {
	r := &pyRandom{}
	r.initGenrand(19650218)
	key := []uint32{seed}
	i, j := 1, 0
	mt := &r.mt
	for k := max(624, len(key)); k > 0; k-- {
		mt[i] = (mt[i] ^ ((mt[i-1] ^ (mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= 624 {
			mt[0] = mt[623]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k := 623; k > 0; k-- {
		mt[i] = (mt[i] ^ ((mt[i-1] ^ (mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= 624 {
			mt[0] = mt[623]
			i = 1
		}
	}
	mt[0] = 0x80000000
	r.idx = 624
	return r
}

func (r *pyRandom) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < 624; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	r.idx = 624
}

func (r *pyRandom) uint32() uint32 {
	if r.idx >= 624 {
		for k := 0; k < 624; k++ {
			y := (r.mt[k] & 0x80000000) | (r.mt[(k+1)%624] & 0x7fffffff)
			v := r.mt[(k+397)%624] ^ (y >> 1)
			if y&1 != 0 {
				v ^= 0x9908b0df
			}
			r.mt[k] = v
		}
		r.idx = 0
	}
	y := r.mt[r.idx]
	r.idx++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// random is random.random(): 53 random bits in [0, 1).
func (r *pyRandom) random() float64 {
	a, b := r.uint32()>>5, r.uint32()>>6
	return (float64(a)*67108864 + float64(b)) * (1.0 / 9007199254740992.0)
}
