package hostproduct

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/shapes"
)

// product is one product run in Go: x [rows, in] times the panels w [count, in, width], both of a
// dtype (float32 or bfloat16), accumulated in float32; out [rows, count, width] of outShape's
// dtype (float32 or bfloat16).
type product struct {
	x, w, out              int // slots
	rows, in, count, width int
	outShape               shapes.Shape
	// into, where set, is the join that alone reads the output: the product writes its rows
	// into the join's buffer, the first from element offset on, each stride elements after the
	// one before, and its own slot stays empty (join.go).
	into           *join
	offset, stride int
}

// productRun is one product's operands for a run: x widened to float32, the weight as it
// lies, and the float32 output (the output buffer's own memory for float32).
type productRun struct {
	p    *product
	x    []float32
	x16  []uint16 // x's bfloat16 bits, where the rows came as bfloat16 (dotRows)
	w32  []float32
	w16  []uint16
	y    []float32
	half []bfloat16.BFloat16 // the bfloat16 output y is rounded into
	// yStride and halfStride are how far apart y's and half's rows lie: count·width, or a join's
	// row where the product writes into one (product.into).
	yStride, halfStride int
}

// widenRows is the fewest rows for which a bfloat16 panel is widened to float32 once, then
// multiplied by the float32 kernels: widening a panel costs about what a few rows' products by
// it do (prompts; a decode step's rows stay on the bfloat16 kernels).
const widenRows = 32

// widenedPanels holds float32 panels widened from bfloat16 (*[]float32), one for each worker
// multiplying at a time.
var widenedPanels = sync.Pool{New: func() any { return new([]float32) }}

// dotOff turns the VDPBF16PS kernels off (productRun.dots), for the tests and benchmarks that
// compare them with the widening kernels.
var dotOff bool

// pairedPanels holds a bfloat16 panel paired for AMX's tiles (*[]uint16, pairPanel), one for
// each worker multiplying on them at a time.
var pairedPanels = sync.Pool{New: func() any { return new([]uint16) }}

// tilesOff turns the AMX tile kernels off (productRun.tiles), for the benchmarks that compare
// them with the VDPBF16PS kernels.
var tilesOff bool

// rowGroup is a kernel pair that multiplies a group of rows by one panel at once, each weight
// loaded once for the group.
type rowGroup struct {
	rows  int
	below int // the products it takes have fewer rows than this (0: any)
}

// rowGroups are the row-group kernels productRun.panels tries, largest first: eight rows for
// decode batches (a prompt's products, from widenRows rows, ran 0.94–0.95× as fast on them: their
// panels are in the L2 for each four anyway), then four.
var rowGroups = []rowGroup{{8, widenRows}, {4, 0}}

// multiply multiplies rows x[:g.rows] by the panel w32 (float32) or else w16 (bfloat16) into
// y[:g.rows], and says whether its kernels ran (not at another width, nor on another processor).
// The kernels are called directly, not through function values, so that x and y stay on the
// caller's stack.
func (g rowGroup) multiply(w32 []float32, w16 []uint16, x, y *[8][]float32, in, width int) bool {
	switch {
	case g.rows == 8 && w32 != nil:
		return panel8x32(w32, x, y, in, width)
	case g.rows == 8:
		return panel8x16(w16, x, y, in, width)
	case w32 != nil:
		return panel4x32(w32, (*[4][]float32)(x[:4]), (*[4][]float32)(y[:4]), in, width)
	default:
		return panel4x16(w16, (*[4][]float32)(x[:4]), (*[4][]float32)(y[:4]), in, width)
	}
}

// chunkMACs is about how many multiply-adds a worker takes at a time: 1 MiB of float32 panels.
const chunkMACs = 256 << 10

// chunk is panels [q0, q1) of runs[run].
type chunk struct{ run, q0, q1 int }

// runProducts runs products that do not read each other's results, their panels shared out
// among the workers, and puts each result in its slot.
// spin is how long the crew waits for the next run awake (crew.run).
func (e *executable) runProducts(ps []*product, slots []compute.Buffer, owned []holding, device compute.DeviceNum, spin time.Duration) error {
	e.backend.productsRun.Add(int64(len(ps)))
	s := e.backend.takeScratch()
	defer e.backend.putScratch(s)
	runs := s.runs[:0]
	total, weightBytes := 0, 0
	for _, p := range ps {
		r, err := e.prepare(p, slots, device, owned, s)
		if err != nil {
			return err
		}
		runs = append(runs, r)
		total += p.rows * p.count * p.in * p.width // multiply-adds
		weightBytes += 4*len(r.w32) + 2*len(r.w16)
	}
	e.backend.spent.weightBytes.Add(int64(weightBytes))
	workers := min(e.backend.opts.Workers, total/(64<<10)+1) // at least 64 Ki multiply-adds each
	// The workers (the caller and the crew) take chunks of about chunkMACs multiply-adds in
	// turn, so that one that starts late or runs slow takes fewer.
	chunks := s.chunks[:0]
	for i, r := range runs {
		per := r.p.rows * r.p.in * r.p.width // one panel's multiply-adds
		step := max(1, chunkMACs/per)
		for q := 0; q < r.p.count; q += step {
			chunks = append(chunks, chunk{i, q, min(q+step, r.p.count)})
		}
	}
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1)) - 1
			if i >= len(chunks) {
				return
			}
			c := chunks[i]
			runs[c.run].panels(c.q0, c.q1)
		}
	}
	e.backend.shareOut(workers, func(int) { work() }, spin)
	s.runs, s.chunks = runs, chunks
	return nil
}

// panels computes panels [q0, q1) of every row. With several rows it goes panel by panel, every
// row's product by a panel before the next, so that the rows after the first read the panel from
// the cache, not from memory; in groups of rows where the row-group kernels run (rowGroups),
// each weight loaded once for the group: eight rows by a Qwen3-0.6B layer's weights ran
// 1.30–1.35× (float32) and 1.84–2.01× (bfloat16) as fast four at a time as one at a time on a
// 2-core Xeon, and 1.21–1.35× (float32) and 1.07–1.17× (bfloat16) as fast eight at a time as four
// (BenchmarkRowKernels, alternated). From widenRows rows on, a bfloat16 panel is widened to
// float32 once and multiplied by the float32 kernels, except where bfloat16 rows go eight at a
// time to VDPBF16PS (dots, dotRows): then the rows left over take the bfloat16 kernels.
func (r productRun) panels(q0, q1 int) {
	p := r.p
	dots := r.dots()
	step := q1 - q0
	if p.rows > 1 {
		step = 1
	}
	panel := p.in * p.width
	var widened *[]float32
	var paired *[]uint16
	if dots && r.tiles() {
		paired = pairedPanels.Get().(*[]uint16)
		defer pairedPanels.Put(paired)
		if len(*paired) < panel+lineValues {
			*paired = make([]uint16, panel+lineValues)
		}
	}
	if r.w16 != nil && p.rows >= widenRows && !dots {
		widened = widenedPanels.Get().(*[]float32)
		defer widenedPanels.Put(widened)
		if len(*widened) < panel {
			*widened = make([]float32, panel)
		}
	}
	row := func(row, q, end int) ([]float32, []float32) {
		return r.x[row*p.in : (row+1)*p.in], r.out(row, q, end)
	}
	for q := q0; q < q1; q += step {
		end := min(q+step, q1)
		var w32 []float32
		var w16 []uint16
		switch {
		case r.w32 != nil:
			w32 = r.w32[q*panel : end*panel]
		case widened != nil: // step is 1: one panel
			w32 = (*widened)[:panel]
			widenAll(w32, r.w16[q*panel:end*panel])
		default:
			w16 = r.w16[q*panel : end*panel]
		}
		first := 0 // the first row left to the one-row kernels
		switch {   // step is 1 in both: w16 is panel q
		case paired != nil:
			first = r.tileRows(w16, lineAligned(*paired)[:panel], q)
		case dots:
			first = r.dotRows(w16, q)
		}
		for _, g := range rowGroups {
			if step != 1 || (g.below > 0 && p.rows >= g.below) {
				continue
			}
			var xs, ys [8][]float32
			for ; first+g.rows <= p.rows; first += g.rows {
				for i := range g.rows {
					xs[i], ys[i] = row(first+i, q, end)
				}
				if !g.multiply(w32, w16, &xs, &ys, p.in, p.width) {
					break
				}
			}
		}
		for i := first; i < p.rows; i++ {
			x, y := row(i, q, end)
			if w32 != nil {
				panels32(w32, x, y, p.in, p.width)
			} else {
				panels16(w16, x, y, p.in, p.width)
			}
		}
	}
	if r.half != nil { // rounded by the worker that computed them
		for i := range p.rows {
			lo, hi, at := i*r.yStride+q0*p.width, i*r.yStride+q1*p.width, i*r.halfStride+q0*p.width
			narrowAll(bitsOf(r.half[at:at+hi-lo]), r.y[lo:hi])
		}
	}
}

// out is row's output of panels [q0, q1).
func (r productRun) out(row, q0, q1 int) []float32 {
	return r.y[row*r.yStride+q0*r.p.width : row*r.yStride+q1*r.p.width]
}

// dots says whether r's rows go eight at a time to the VDPBF16PS kernel (dotRows): bfloat16
// rows, at least eight, by bfloat16 panels of the kernels' width and an even length, on a CPU
// with AVX512_BF16. That kernel does two multiply-adds an instruction lane where the widening
// kernels do one, and on the AMD EPYC guest (Zen 4) it retires as often.
func (r productRun) dots() bool {
	p := r.p
	return r.x16 != nil && r.w16 != nil && p.rows >= 8 && p.in%2 == 0 && p.width == kernelWidth && dotKernels() && !dotOff
}

// dotRows multiplies r's rows, eight at a time, by panel q (w) with VDPBF16PS (panel8dp), and
// returns how many it multiplied (the rest, fewer than eight, are left to the other kernels). Each
// product of two bfloat16 values is exact in float32 and each of VDPBF16PS's two adds a lane
// rounds once, as a multiply-add does: the sums differ from the widening kernels' only in their
// order (a pair of k's odd product first), and denormals are flushed to zero, as PyTorch's
// bfloat16 products on such a CPU flush them.
func (r productRun) dotRows(w []uint16, q int) int {
	p := r.p
	var xs [8][]uint16
	var ys [8][]float32
	first := 0
	for ; first+len(xs) <= p.rows; first += len(xs) {
		for i := range xs {
			row := first + i
			xs[i], ys[i] = r.x16[row*p.in:(row+1)*p.in], r.out(row, q, q+1)
		}
		panel8dp(w, &xs, &ys, p.in)
	}
	return first
}

// tiles says whether r's rows go to AMX's tile kernels (tileRows) instead of the VDPBF16PS ones:
// where those run (dots), k a multiple of a tile's 32, on a CPU and Linux with the tiles. A tile
// instruction does 16 rows' multiply-adds by 16 columns and 32 k, 256 times a VDPBF16PS's.
func (r productRun) tiles() bool {
	return r.p.in%tileDepth == 0 && tileKernels() && !tilesOff
}

// tileRows multiplies all of r's rows by panel q (w) on AMX's tiles, and returns how many it
// multiplied: up to 16 rows pairing the panel 32 k at a time in the level-1 cache (tilesPairing,
// paired its buffer), more 16 at a time by the panel paired for them once into paired
// (pairPanel, tiles). Each product of two bfloat16 values is exact in float32; the sums differ
// from the widening kernels' in their order, and denormals are flushed to zero, as with
// VDPBF16PS (dotRows).
func (r productRun) tileRows(w, paired []uint16, q int) int {
	p := r.p
	if p.rows <= tileRows {
		tilesPairing(w, r.x16, p.rows, p.in, r.y[q*p.width:], r.yStride, paired)
		return p.rows
	}
	pairPanel(w, paired, p.in)
	for first := 0; first < p.rows; first += tileRows {
		m := min(tileRows, p.rows-first)
		tiles(paired, r.x16[first*p.in:], m, p.in, r.y[first*r.yStride+q*p.width:], r.yStride)
	}
	return p.rows
}

// scratch is float32 memory that a run of products borrows for its rows widened from bfloat16
// (once a slot) and its bfloat16 outputs before rounding, kept from run to run so that a
// decode step allocates none of it: on the Xeon those allocations and widenings (about 200 a
// bfloat16 step) took 3.9–4.2 ms of an 81–90 ms step, timed in the step, and the step ran
// 1.09–1.15× the tokens/s without them, alternated (the collector off made no difference after).
type scratch struct {
	buf     []float32
	used    int
	widened []widenedRows
	// runs and chunks are runProducts', kept for the next run: made anew, they were a decode
	// step's largest garbage after its results (0.4 MB of 4).
	runs   []productRun
	chunks []chunk
}

// widenedRows is a slot's bfloat16 rows widened to float32 in a run.
type widenedRows struct {
	slot int
	x    []float32
}

// take returns n float32 of s, not zeroed, valid until s is put back.
func (s *scratch) take(n int) []float32 {
	if len(s.buf)-s.used < n {
		s.buf, s.used = make([]float32, max(n, 2*len(s.buf))), 0
	}
	out := s.buf[s.used : s.used+n : s.used+n]
	s.used += n
	return out
}

// takeScratch returns a free scratch, or a new one.
func (b *Backend) takeScratch() *scratch {
	b.scratchMu.Lock()
	defer b.scratchMu.Unlock()
	if n := len(b.scratches); n > 0 {
		s := b.scratches[n-1]
		b.scratches = b.scratches[:n-1]
		return s
	}
	return &scratch{}
}

// putScratch frees s for the next run.
func (b *Backend) putScratch(s *scratch) {
	clear(s.runs) // the operands they point at
	s.used, s.widened, s.runs, s.chunks = 0, s.widened[:0], s.runs[:0], s.chunks[:0]
	b.scratchMu.Lock()
	defer b.scratchMu.Unlock()
	b.scratches = append(b.scratches, s)
}

// prepare reads p's operands and makes its output buffer, put in its slot.
func (e *executable) prepare(p *product, slots []compute.Buffer, device compute.DeviceNum, owned []holding, s *scratch) (productRun, error) {
	r := productRun{p: p}
	xFlat, err := slots[p.x].Data()
	if err != nil {
		return r, fmt.Errorf("hostproduct: product's rows: %w", err)
	}
	w, err := readFloats(slots[p.w])
	if err != nil {
		return r, fmt.Errorf("hostproduct: product's weight: %w", err)
	}
	r.w32, r.w16 = w.f32, w.b16
	n := p.rows * p.count * p.width
	if p.outShape.Size() != n {
		return r, fmt.Errorf("hostproduct: product's output %s for %d values", p.outShape, n)
	}
	yFlat, err := e.productOutput(p, slots, device, owned)
	if err != nil {
		return r, err
	}
	switch x := xFlat.(type) {
	case []float32:
		r.x = x
	case []bfloat16.BFloat16:
		r.x16 = bitsOf(x)
		for _, w := range s.widened {
			if w.slot == p.x {
				r.x = w.x
				break
			}
		}
		if r.x == nil {
			r.x = s.take(len(x))
			for i, v := range x {
				r.x[i] = v.Float32()
			}
			s.widened = append(s.widened, widenedRows{p.x, r.x})
		}
	default:
		return r, fmt.Errorf("hostproduct: product's rows are %T", xFlat)
	}
	if len(r.x) != p.rows*p.in || len(r.w32)+len(r.w16) != p.count*p.in*p.width {
		return r, fmt.Errorf("hostproduct: product's operands hold %d and %d values for %s and [%d %d %d]",
			len(r.x), len(r.w32)+len(r.w16), p.outShape, p.count, p.in, p.width)
	}
	stride := p.count * p.width // of the output's rows: its own, or a join's (product.into)
	if p.into != nil {
		stride = p.stride
	}
	switch y := yFlat.(type) {
	case []float32:
		r.y, r.yStride = y, stride
	case []bfloat16.BFloat16: // computed in scratch, rounded into the output
		r.y, r.yStride, r.half, r.halfStride = s.take(n), p.count*p.width, y, stride
	default:
		return r, fmt.Errorf("hostproduct: product's output is %T", yFlat)
	}
	return r, nil
}

// productOutput is the memory p writes its output to: a new buffer in its slot, or its part of
// the buffer of the join it writes into (made by the first of the join's products to run).
func (e *executable) productOutput(p *product, slots []compute.Buffer, device compute.DeviceNum, owned []holding) (any, error) {
	if p.into == nil {
		flat, err := e.backend.putResult(slots, owned, p.out, device, p.outShape)
		if err != nil {
			return nil, fmt.Errorf("hostproduct: product's output: %w", err)
		}
		return flat, nil
	}
	j := p.into
	if slots[j.out] == nil {
		if _, err := e.backend.putResult(slots, owned, j.out, device, j.outShape); err != nil {
			return nil, fmt.Errorf("hostproduct: Concatenate's result: %w", err)
		}
	}
	flat, err := slots[j.out].Data()
	if err != nil {
		return nil, err
	}
	end := p.offset + (p.rows-1)*p.stride + p.count*p.width // one past the last value written
	switch y := flat.(type) {
	case []float32:
		if end <= len(y) {
			return y[p.offset:end:end], nil
		}
	case []bfloat16.BFloat16:
		if end <= len(y) {
			return y[p.offset:end:end], nil
		}
	}
	return nil, fmt.Errorf("hostproduct: Concatenate's result %T has no room for values %d to %d", flat, p.offset, end)
}

// panelsScalar is panels32 in plain Go, for any width: y[q·width+j] = Σ_k w[q][k][j]·x[k].
func panelsScalar(w, x, y []float32, in, width int) {
	panelsPlain(w, x, y, in, width, func(v float32) float32 { return v })
}

// panelsScalar16 is panelsScalar for a bfloat16 weight (its bits).
func panelsScalar16(w []uint16, x, y []float32, in, width int) {
	panelsPlain(w, x, y, in, width, func(v uint16) float32 { return bfloat16.BFloat16(v).Float32() })
}

// panelsPlain is the plain loop both share, each weight widened by float.
func panelsPlain[T any](w []T, x, y []float32, in, width int, float func(T) float32) {
	for q := range len(y) / width {
		out := y[q*width : (q+1)*width]
		clear(out)
		panel := w[q*in*width : (q+1)*in*width]
		for k, xk := range x[:in] {
			for j, v := range panel[k*width : (k+1)*width] {
				out[j] += float(v) * xk
			}
		}
	}
}
