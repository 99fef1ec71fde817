//go:build !goexperiment.simd || !amd64

package logitscan

// Argmax is the index of the largest value of x, the first one on ties (like torch.argmax); a NaN
// is never larger than another value, and x[0] is the answer when it is a NaN. 0 for an empty x.
func Argmax(x []float32) int { return argmaxPlain(x) }

// FirstNonFinite is the index of the first NaN or ±Inf in x, or −1 where there is none.
func FirstNonFinite(x []float32) int { return firstNonFinitePlain(x) }
