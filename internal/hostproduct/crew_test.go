package hostproduct

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/gobackend"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
)

// TestCrewRunsEachMemberOnce runs jobs on a crew of three, its members asleep or awake when each
// comes, and checks that each member and the caller ran once a job, that a run while another
// holds the crew declines, and that a stopped crew declines.
func TestCrewRunsEachMemberOnce(t *testing.T) {
	c := newCrew(3)
	for i := range 50 {
		spin := []time.Duration{0, crewSpin}[i%2] // members asleep or awake when the next job comes
		var ran [3]atomic.Int32
		var own atomic.Int32
		if !c.run(func(m int) { ran[m].Add(1) }, func() { own.Add(1) }, spin) {
			t.Fatal("an idle crew declined a run")
		}
		for m := range ran {
			if n := ran[m].Load(); n != 1 {
				t.Fatalf("member %d ran %d times", m, n)
			}
		}
		if own.Load() != 1 {
			t.Fatalf("the caller's share ran %d times", own.Load())
		}
	}
	inner := make(chan bool)
	go func() {
		c.run(func(int) {}, func() {
			inner <- c.run(func(int) { t.Error("a nested run ran a member") }, func() {}, 0)
		}, 0)
	}()
	if <-inner {
		t.Error("a run while another held the crew did not decline")
	}
	c.stop()
	if c.run(func(int) { t.Error("a stopped crew ran a member") }, func() {}, 0) {
		t.Error("a stopped crew did not decline")
	}
	var none *crew
	if none.run(func(int) {}, func() {}, 0) {
		t.Error("a nil crew did not decline")
	}
}

// TestProductsShareOutOverWorkers runs products large enough to be shared out among three
// workers in several chunks, from two goroutines at once on one backend (one run takes the crew,
// the other starts goroutines of its own), against the unwrapped backend.
func TestProductsShareOutOverWorkers(t *testing.T) {
	const in, count, width = 512, 24, 64 // 786 Ki multiply-adds a row: 3 workers, chunks of 8 panels
	inner, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	wrapped, err := Wrap(inner, Options{MaxRows: 2, Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wrapped.Finalize)
	for _, dtype := range []dtypes.DType{dtypes.Float32, dtypes.BFloat16} {
		t.Run(dtype.String(), func(t *testing.T) {
			product := func(x, w *Node) *Node {
				return ConvertDType(DotGeneral(x, []int{1}, nil, w, []int{1}, nil), dtypes.Float32)
			}
			call := func(exec *Exec) []float32 {
				x := asDType(pattern(2*in, 5), dtype, 2, in) // a tensor per backend and call
				w := asDType(pattern(count*in*width, 6), dtype, count, in, width)
				out, err := exec.Call(x, w)
				if err != nil {
					t.Error(err)
					return nil
				}
				return flat32(t, out[0])
			}
			want := call(MustNewExec(inner, product))
			exec := MustNewExec(wrapped, product)
			before := wrapped.ProductsRun()
			got := make([][]float32, 8)
			var wg sync.WaitGroup
			for i := range got {
				wg.Go(func() { got[i] = call(exec) })
			}
			wg.Wait()
			if n := wrapped.ProductsRun() - before; n != int64(len(got)) {
				t.Errorf("%d products ran in Go, want %d", n, len(got))
			}
			tol := 1e-5
			if dtype == dtypes.BFloat16 {
				tol = 2e-2
			}
			for i, g := range got {
				if len(g) != len(want) {
					t.Fatalf("call %d: %d values, want %d", i, len(g), len(want))
				}
				for j := range want {
					if d := math.Abs(float64(g[j] - want[j])); d > tol*(1+math.Abs(float64(want[j]))) {
						t.Fatalf("call %d: [%d] = %v, the backend's %v", i, j, g[j], want[j])
					}
				}
			}
		})
	}
}

// TestSpinAfter checks the crew's waiting between the steps that run on it (products and
// attentions alike): the time since the last such step is recorded as that step's gap, and a
// step whose gap last time was longer than crewSpin lets the crew sleep at once.
func TestSpinAfter(t *testing.T) {
	e := &executable{gaps: make([]atomic.Int64, 4)}
	if got := e.spinAfter(0, -1, time.Time{}); got != crewSpin {
		t.Errorf("first step, no gap known: spin %v, want %v", got, crewSpin)
	}
	long := time.Now().Add(-time.Second)
	if got := e.spinAfter(2, 0, long); got != crewSpin {
		t.Errorf("step 2, no gap known: spin %v, want %v", got, crewSpin)
	}
	if gap := time.Duration(e.gaps[0].Load()); gap < time.Second {
		t.Errorf("step 0's gap recorded as %v, want at least 1s", gap)
	}
	if got := e.spinAfter(0, -1, time.Time{}); got != 0 {
		t.Errorf("step 0 after a gap of a second: spin %v, want 0", got)
	}
	e.gaps[2].Store(int64(crewSpin / 2))
	if got := e.spinAfter(2, -1, time.Time{}); got != crewSpin {
		t.Errorf("step 2 after a short gap: spin %v, want %v", got, crewSpin)
	}
}
