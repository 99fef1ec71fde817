package train

import (
	"math"
	"testing"
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
