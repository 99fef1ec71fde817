//go:build !goexperiment.simd || !amd64

package hostproduct

// panels32 is x [in] times the float32 panels w [len(y)/width, in, width] (plain Go here).
func panels32(w, x, y []float32, in, width int) { panelsScalar(w, x, y, in, width) }

// panels16 is panels32 for bfloat16 panels (their bits).
func panels16(w []uint16, x, y []float32, in, width int) { panelsScalar16(w, x, y, in, width) }

// kernelWidth is the panel width the vector kernels take elsewhere.
const kernelWidth = 64

// kernelVariant is one vector kernel pair, for the tests: none here.
type kernelVariant struct {
	name string
	f32  func(w, x, y []float32, in int)
	bf16 func(w []uint16, x, y []float32, in int)
}

// kernelVariants are the vector kernels this build can run: none.
func kernelVariants() []kernelVariant { return nil }
