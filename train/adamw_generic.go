//go:build !goexperiment.simd || !amd64

package train

// adamwVector updates no values without Go's SIMD experiment: Update's scalar loop does them all.
func adamwVector(param, grad, expAvg, expAvgSq []float32, c adamwConsts) int { return 0 }
