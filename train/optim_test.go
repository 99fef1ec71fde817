package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

func TestScheduleFactor(t *testing.T) {
	tests := []struct {
		s    Schedule
		want []float64 // steps 1, 2, …
	}{
		// tiny-qwen3-finetune/lora-clip-warmup's learning rates over 2e-3.
		{Schedule{"linear", 2, 5}, []float64{0, 0.5, 1, 2.0 / 3, 1.0 / 3}},
		{Schedule{"constant", 0, 5}, []float64{1, 1, 1}},
		{Schedule{"constant", 2, 5}, []float64{0, 0.5, 1, 1}},
		// get_cosine_schedule_with_warmup(warmup 1, total 5): 0, then ½(1+cos(π·(k−1−1)/4)).
		{Schedule{"cosine", 1, 5}, []float64{0, 1, 0.5 * (1 + math.Cos(math.Pi/4)), 0.5, 0.5 * (1 + math.Cos(3*math.Pi/4)), 0}},
	}
	for _, tc := range tests {
		if err := tc.s.Check(); err != nil {
			t.Fatal(err)
		}
		for i, want := range tc.want {
			if got := tc.s.Factor(i + 1); math.Abs(got-want) > 1e-15 {
				t.Errorf("%+v step %d: %v, want %v", tc.s, i+1, got, want)
			}
		}
	}
	if err := (Schedule{"step", 0, 3}).Check(); err == nil {
		t.Error("an unknown schedule was accepted")
	}
}

func TestAdamWUpdate(t *testing.T) {
	o := AdamW{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1}
	p := []float32{1, -2, 0.5}
	g := []float32{0.5, -0.25, 0}
	m := NewMoments(3)
	o.Update(p, g, m, 0.01, 1)
	// Step 1: m̂ = g, v̂ = g², so p ← p·(1 − lr·wd) − lr·g/(|g| + eps).
	for i, p0 := range []float64{1, -2, 0.5} {
		gi := float64(g[i])
		want := p0*(1-0.01*0.1) - 0.01*gi/(math.Abs(gi)+1e-8)
		if math.Abs(float64(p[i])-want) > 1e-7 {
			t.Errorf("p[%d] = %v, want %v", i, p[i], want)
		}
	}
	if math.Abs(float64(m.ExpAvg[0])-0.05) > 1e-8 || math.Abs(float64(m.ExpAvgSq[0])-0.00025) > 1e-10 {
		t.Errorf("moments %v %v, want 0.05 and 0.00025", m.ExpAvg[0], m.ExpAvgSq[0])
	}
	// Step 2 with the same gradient: m = 0.9·0.05 + 0.1·0.5, v = 0.999·v + 0.001·0.25.
	prev := float64(p[0])
	o.Update(p, g, m, 0.01, 2)
	mm := 0.9*0.05 + 0.1*0.5
	vv := 0.999*0.00025 + 0.001*0.25
	want := prev*(1-0.001) - 0.01/(1-0.81)*mm/(math.Sqrt(vv)/math.Sqrt(1-0.999*0.999)+1e-8)
	if math.Abs(float64(p[0])-want) > 1e-7 {
		t.Errorf("step 2: p[0] = %v, want %v", p[0], want)
	}
}

func TestClipping(t *testing.T) {
	grads := [][]float32{{3}, {4}}
	norm := GlobalNorm(grads)
	if norm != 5 {
		t.Fatalf("norm %v, want 5", norm)
	}
	if c := ClipCoefficient(norm, 0); c != 1 {
		t.Errorf("no clipping: %v", c)
	}
	if c := ClipCoefficient(norm, 10); c != 1 {
		t.Errorf("norm below the limit: %v, want 1", c)
	}
	c := ClipCoefficient(norm, 0.5)
	if want := 0.5 / (5 + 1e-6); c != want {
		t.Errorf("coefficient %v, want %v", c, want)
	}
	Scale(grads, c)
	if got := GlobalNorm(grads); math.Abs(got-0.5) > 1e-6 {
		t.Errorf("clipped norm %v, want 0.5", got)
	}
}

// TestUpdateAllMatchesUpdate holds the chunked, concurrent UpdateAll and Scale to Update and a
// serial scale applied tensor by tensor, bit for bit, for tensors smaller than, equal to and
// spanning several chunks, whatever GOMAXPROCS is.
func TestUpdateAllMatchesUpdate(t *testing.T) {
	opt := AdamW{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1}
	for _, procs := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			sizes := []int{1, 7, updateChunk, updateChunk + 1, 3*updateChunk - 5}
			r := rand.New(rand.NewPCG(3, uint64(procs)))
			random := func(n int, scale float64) []float32 {
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(r.NormFloat64() * scale)
				}
				return v
			}
			var params, want, grads, wantGrads [][]float32
			var moments, wantMoments []Moments
			for _, n := range sizes {
				p, g := random(n, 0.02), random(n, 1e-3)
				m := Moments{ExpAvg: random(n, 1e-4), ExpAvgSq: random(n, 0)}
				params, want = append(params, p), append(want, slices.Clone(p))
				grads, wantGrads = append(grads, g), append(wantGrads, slices.Clone(g))
				moments = append(moments, m)
				wantMoments = append(wantMoments, Moments{ExpAvg: slices.Clone(m.ExpAvg), ExpAvgSq: slices.Clone(m.ExpAvgSq)})
			}
			Scale(grads, 0.37)
			for _, g := range wantGrads {
				for i, v := range g {
					g[i] = float32(float64(v) * 0.37)
				}
			}
			for step := 1; step <= 3; step++ {
				opt.UpdateAll(params, grads, moments, 1e-3, step)
				for i := range want {
					opt.Update(want[i], wantGrads[i], wantMoments[i], 1e-3, step)
				}
			}
			for i := range sizes {
				for _, c := range []struct {
					name      string
					got, want []float32
				}{
					{"gradient", grads[i], wantGrads[i]},
					{"param", params[i], want[i]},
					{"exp_avg", moments[i].ExpAvg, wantMoments[i].ExpAvg},
					{"exp_avg_sq", moments[i].ExpAvgSq, wantMoments[i].ExpAvgSq},
				} {
					if !slices.Equal(c.got, c.want) {
						t.Errorf("tensor %d (%d values): %s differs from the serial update", i, sizes[i], c.name)
					}
				}
			}
		})
	}
}

// BenchmarkAdamWUpdateAll times one AdamW step over 64 M values (a tenth of Qwen3-0.6B's) with
// the serial Update tensor by tensor and with UpdateAll, alternated in one process; it reports
// both in ns a value.
func BenchmarkAdamWUpdateAll(b *testing.B) {
	opt := AdamW{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1}
	const tensors, n = 16, 4 << 20
	params, grads, moments := make([][]float32, tensors), make([][]float32, tensors), make([]Moments, tensors)
	for i := range tensors {
		params[i], grads[i], moments[i] = make([]float32, n), make([]float32, n), NewMoments(n)
		for j := range grads[i] {
			grads[i][j] = float32(j%97) * 1e-4
		}
	}
	var serial, all time.Duration
	step := 0
	for b.Loop() {
		step++
		begin := time.Now()
		for i := range tensors {
			opt.Update(params[i], grads[i], moments[i], 1e-4, step)
		}
		serial += time.Since(begin)
		step++
		begin = time.Now()
		opt.UpdateAll(params, grads, moments, 1e-4, step)
		all += time.Since(begin)
	}
	values := float64(b.N * tensors * n)
	b.ReportMetric(float64(serial.Nanoseconds())/values, "ns/value-serial")
	b.ReportMetric(float64(all.Nanoseconds())/values, "ns/value-UpdateAll")
}

// TestAdamWVectorMatchesScalar holds Update (its vector loop where the build has one) to the
// scalar loop bit for bit, for both forms of torch's lerp (β1 below and above 0.5), with and
// without decay, on lengths that leave a scalar tail.
func TestAdamWVectorMatchesScalar(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, opt := range []AdamW{
		{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
		{Beta1: 0.3, Beta2: 0.95, Eps: 1e-6, WeightDecay: 0.1},
	} {
		for _, n := range []int{3, 64, 1001} {
			param, grad := make([]float32, n), make([]float32, n)
			m := NewMoments(n)
			for i := range n {
				param[i], grad[i] = float32(r.NormFloat64()*0.02), float32(r.NormFloat64()*1e-3)
				m.ExpAvg[i], m.ExpAvgSq[i] = float32(r.NormFloat64()*1e-4), float32(r.Float64()*1e-6)
			}
			wantP, wantA, wantV := slices.Clone(param), slices.Clone(m.ExpAvg), slices.Clone(m.ExpAvgSq)
			for step := 1; step <= 2; step++ {
				opt.Update(param, grad, m, 2e-4, step)
				adamwScalar(wantP, grad, wantA, wantV, opt.consts(2e-4, step))
			}
			if !slices.Equal(param, wantP) || !slices.Equal(m.ExpAvg, wantA) || !slices.Equal(m.ExpAvgSq, wantV) {
				t.Errorf("β1 %g, %d values: Update differs from the scalar loop", opt.Beta1, n)
			}
		}
	}
}
