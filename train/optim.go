package train

import (
	"fmt"
	"math"
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
	decay := 1 - lr*o.WeightDecay
	w := 1 - o.Beta1
	bc1 := 1 - math.Pow(o.Beta1, float64(step))
	bc2sqrt := math.Sqrt(1 - math.Pow(o.Beta2, float64(step)))
	stepSize := lr / bc1
	for i, g32 := range grad {
		g := float64(g32)
		p := float64(param[i]) * decay
		// torch's lerp: self + w·(end − self) for w < 0.5, else end − (end − self)·(1 − w).
		a := float64(m.ExpAvg[i])
		if w < 0.5 {
			a += w * (g - a)
		} else {
			a = g - (g-a)*(1-w)
		}
		v := float64(m.ExpAvgSq[i])*o.Beta2 + (1-o.Beta2)*g*g
		m.ExpAvg[i], m.ExpAvgSq[i] = float32(a), float32(v)
		denom := math.Sqrt(float64(m.ExpAvgSq[i]))/bc2sqrt + o.Eps
		param[i] = float32(p - stepSize*float64(m.ExpAvg[i])/denom)
	}
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
	for _, g := range grads {
		for i, v := range g {
			g[i] = float32(float64(v) * c)
		}
	}
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
