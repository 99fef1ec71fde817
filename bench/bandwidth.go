package bench

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/octlm/octlm/internal/hugepage"
	"github.com/octlm/octlm/internal/sysinfo"
	"github.com/octlm/octlm/units"
)

// CheckBandwidthSize refuses a bandwidth read that would not fit in the memory available
// now (MemAvailable): allocating it would swap or end in an out-of-memory kill. Where the
// available memory cannot be read, every size is accepted.
func CheckBandwidthSize(size int64) error {
	if avail := sysinfo.MemAvailable(); avail > 0 && size > avail {
		return fmt.Errorf("bench: a bandwidth read of %s does not fit the %s of memory available (of %s)",
			units.Bytes(size), units.Bytes(avail), units.Bytes(sysinfo.MemTotal()))
	}
	return nil
}

// ReadBandwidth measures the machine's memory read bandwidth in bytes per second: it fills a
// buffer of at least size bytes (so no cache holds it), then sums it with one goroutine per
// GOMAXPROCS, each streaming through its own contiguous part, and keeps the best of passes.
// This is the ceiling a decoder that reads every weight once per token can reach.
func ReadBandwidth(size int64, passes int) float64 {
	workers := runtime.GOMAXPROCS(0)
	n := int(size / 4)
	n -= n % (workers * 64)
	buf := make([]float32, n)
	// On huge pages, as the weights are (Layout.HugePages): the ceiling is the best read.
	hugepage.AdviseSlice(buf)
	for i := range buf { // fault every page in before timing
		buf[i] = 1
	}
	best := 0.0
	for range max(passes, 1) {
		best = max(best, float64(4*n)/readPass(buf, workers, sumFloat32).Seconds())
	}
	return best
}

// readPass sums buf with sum on workers goroutines, each streaming through its own contiguous
// part, and returns how long that took.
func readPass(buf []float32, workers int, sum func([]float32) float32) time.Duration {
	part := len(buf) / workers
	sums := make([]float32, workers)
	var wg sync.WaitGroup
	begin := time.Now()
	for w := range workers {
		wg.Go(func() { sums[w] = sum(buf[w*part : (w+1)*part]) })
	}
	wg.Wait()
	elapsed := time.Since(begin)
	runtime.KeepAlive(sums)
	return elapsed
}

// sumScalar is the portable streaming sum: eight independent accumulators so the adds do not
// wait on each other.
func sumScalar(a []float32) float32 {
	var s [8]float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		s[0] += a[i]
		s[1] += a[i+1]
		s[2] += a[i+2]
		s[3] += a[i+3]
		s[4] += a[i+4]
		s[5] += a[i+5]
		s[6] += a[i+6]
		s[7] += a[i+7]
	}
	for ; i < len(a); i++ {
		s[0] += a[i]
	}
	return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7]
}
