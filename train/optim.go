package train

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

// AdamW holds torch.optim.AdamW's settings (its defaults: betas 0.9/0.999, eps 1e-8; weight
// decay is transformers' TrainingArguments default, 0, not torch's 0.01: set it).
type AdamW struct {
	Beta1, Beta2, Eps, WeightDecay float64
}

// Moments are one tensor's AdamW state: exp_avg and exp_avg_sq.
type Moments struct {
	ExpAvg, ExpAvgSq []float32
}

// NewMoments is the zero state for a tensor of n values.
func NewMoments(n int) Moments {
	return Moments{ExpAvg: make([]float32, n), ExpAvgSq: make([]float32, n)}
}

// Update applies one AdamW step at learning rate lr to param with gradient grad, its moments
// m, step the 1-based count of updates including this one. The order is
// torch.optim._single_tensor_adamw's:
//
//	param *= 1 - lr·weight_decay
//	exp_avg.lerp_(grad, 1-beta1)
//	exp_avg_sq = exp_avg_sq·beta2 + (1-beta2)·grad²
//	denom = sqrt(exp_avg_sq)/sqrt(1-beta2^step) + eps
//	param -= lr/(1-beta1^step) · exp_avg/denom
//
// Each value is computed in float64 and stored in float32.
func (o AdamW) Update(param, grad []float32, m Moments, lr float64, step int) {
	c := o.consts(lr, step)
	done := adamwVector(param, grad, m.ExpAvg, m.ExpAvgSq, c) // the same arithmetic, several values at a time
	adamwScalar(param[done:], grad[done:], m.ExpAvg[done:], m.ExpAvgSq[done:], c)
}

// consts are the step's constants: decay, lerp weight, bias corrections.
func (o AdamW) consts(lr float64, step int) adamwConsts {
	return adamwConsts{
		decay: 1 - lr*o.WeightDecay, w: 1 - o.Beta1, beta2: o.Beta2, oneMinusBeta2: 1 - o.Beta2,
		bc2sqrt: math.Sqrt(1 - math.Pow(o.Beta2, float64(step))), eps: o.Eps,
		stepSize: lr / (1 - math.Pow(o.Beta1, float64(step))),
	}
}

// adamwScalar is Update's arithmetic one value at a time.
func adamwScalar(param, grad, expAvg, expAvgSq []float32, c adamwConsts) {
	for i, g32 := range grad {
		g := float64(g32)
		p := float64(param[i]) * c.decay
		// torch's lerp: self + w·(end − self) for w < 0.5, else end − (end − self)·(1 − w).
		a := float64(expAvg[i])
		if c.w < 0.5 {
			a += c.w * (g - a)
		} else {
			a = g - (g-a)*(1-c.w)
		}
		v := float64(expAvgSq[i])*c.beta2 + c.oneMinusBeta2*g*g
		expAvg[i], expAvgSq[i] = float32(a), float32(v)
		denom := math.Sqrt(float64(expAvgSq[i]))/c.bc2sqrt + c.eps
		param[i] = float32(p - c.stepSize*float64(expAvg[i])/denom)
	}
}

// adamwConsts are one AdamW step's constants, as Update computes them.
type adamwConsts struct {
	decay, w, beta2, oneMinusBeta2, bc2sqrt, eps, stepSize float64
}

// UpdateAll is Update for every tensor: params[i] with grads[i] and moments[i], the work split
// into fixed chunks of updateChunk values run on GOMAXPROCS goroutines. Each value's arithmetic is
// Update's, so the result does not depend on the split (a full fine-tune of Qwen3-0.6B updates
// 596 M values a step: one core took 5 s of a 28 s step).
func (o AdamW) UpdateAll(params, grads [][]float32, moments []Moments, lr float64, step int) {
	forChunks(grads, func(i, lo, hi int) {
		m := Moments{ExpAvg: moments[i].ExpAvg[lo:hi], ExpAvgSq: moments[i].ExpAvgSq[lo:hi]}
		o.Update(params[i][lo:hi], grads[i][lo:hi], m, lr, step)
	})
}

// updateChunk is the values one goroutine of UpdateAll or ScaleAll takes at a time.
const updateChunk = 1 << 18

// forChunks calls fn(i, lo, hi) for every chunk [lo, hi) of at most updateChunk values of every
// tensors[i], on up to GOMAXPROCS goroutines, and returns when all have run.
func forChunks(tensors [][]float32, fn func(i, lo, hi int)) {
	type chunk struct{ i, lo, hi int }
	var chunks []chunk
	for i, t := range tensors {
		for lo := 0; lo < len(t); lo += updateChunk {
			chunks = append(chunks, chunk{i, lo, min(lo+updateChunk, len(t))})
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(chunks))
	if workers <= 1 {
		for _, c := range chunks {
			fn(c.i, c.lo, c.hi)
		}
		return
	}
	next := make(chan chunk, len(chunks))
	for _, c := range chunks {
		next <- c
	}
	close(next)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c := range next {
				fn(c.i, c.lo, c.hi)
			}
		})
	}
	wg.Wait()
}

// GlobalNorm is the L2 norm of all the gradients together (clip_grad_norm_'s total_norm with
// norm_type 2), accumulated in float64.
func GlobalNorm(grads [][]float32) float64 {
	var s float64
	for _, g := range grads {
		for _, v := range g {
			s += float64(v) * float64(v)
		}
	}
	return math.Sqrt(s)
}

// ClipCoefficient is clip_grad_norm_'s factor for a gradient of global norm norm: max_norm /
// (norm + 1e-6) clamped to at most 1. maxNorm ≤ 0 means no clipping (factor 1).
func ClipCoefficient(norm, maxNorm float64) float64 {
	if maxNorm <= 0 {
		return 1
	}
	return min(1, maxNorm/(norm+1e-6))
}

// Scale multiplies every gradient by c (in float64, stored in float32); c = 1 leaves them.
func Scale(grads [][]float32, c float64) {
	if c == 1 {
		return
	}
	forChunks(grads, func(i, lo, hi int) {
		g := grads[i][lo:hi]
		for j, v := range g {
			g[j] = float32(float64(v) * c)
		}
	})
}

// Schedule is a learning-rate schedule as transformers' get_*_schedule_with_warmup builds it.
type Schedule struct {
	Kind   string // "constant", "linear" or "cosine"
	Warmup int    // warmup steps
	Total  int    // the run's steps (num_training_steps)
}

// Schedules are the schedule kinds, for flag checks and errors.
var Schedules = []string{"constant", "linear", "cosine"}

// Check refuses an unknown kind or negative step counts.
func (s Schedule) Check() error {
	switch s.Kind {
	case "constant", "linear", "cosine":
	default:
		return fmt.Errorf("train: unknown learning-rate schedule %q (want constant, linear or cosine)", s.Kind)
	}
	if s.Warmup < 0 || s.Total < 1 {
		return fmt.Errorf("train: schedule with %d warmup steps over %d steps", s.Warmup, s.Total)
	}
	return nil
}

// Factor is the multiplier of the base learning rate for step (1-based): LambdaLR's lambda at
// current_step = step − 1.
func (s Schedule) Factor(step int) float64 {
	c := float64(step - 1)
	w := float64(s.Warmup)
	if c < w {
		return c / math.Max(1, w)
	}
	switch s.Kind {
	case "linear":
		return math.Max(0, (float64(s.Total)-c)/math.Max(1, float64(s.Total)-w))
	case "cosine":
		progress := (c - w) / math.Max(1, float64(s.Total)-w)
		return math.Max(0, 0.5*(1+math.Cos(math.Pi*0.5*2*progress)))
	}
	return 1
}
