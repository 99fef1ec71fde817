package xla

import (
	"fmt"

	"github.com/gomlx/compute"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

// Sizes of Check's matmul, and the offset from 1 that TF32 loses.
const (
	checkM, checkK, checkN = 128, 256, 128
	checkEps               = 1.0 / 4096
)

// Check compiles and runs a small float32 matmul on b and compares every entry with the exact answer.
//
// The product is [128,256]·[256,128] with lhs entries 1+2⁻¹² and rhs entries 1 (even columns) or 2
// (odd columns), so each entry is exactly 256.0625 or 512.125 in float32. TF32 keeps 10 mantissa bits
// and rounds 1+2⁻¹² to 1, giving 256 and 512: a backend that computes float32 matmuls in TF32 fails
// here (the size is large enough for XLA to hand the dot to cuBLAS).
func Check(b compute.Backend) error {
	const m, k, n, eps = checkM, checkK, checkN, checkEps
	lhs := make([]float32, m*k)
	for i := range lhs {
		lhs[i] = 1 + eps
	}
	rhs := make([]float32, k*n)
	for i := range rhs {
		rhs[i] = float32(1 + i%2)
	}
	var out *tensors.Tensor
	err := protect("run the check graph", func() error {
		var err error
		out, err = graph.CallOnce(b, func(x, y *graph.Node) *graph.Node { return graph.MatMul(x, y) },
			tensors.FromFlatDataAndDimensions(lhs, m, k), tensors.FromFlatDataAndDimensions(rhs, k, n))
		return err
	})
	if err != nil {
		return fmt.Errorf("xla: check on %s: %w", b.Name(), err)
	}
	defer func() { _ = out.FinalizeAll() }()
	got, err := tensors.CopyFlatData[float32](out)
	if err != nil {
		return fmt.Errorf("xla: check on %s: read result: %w", b.Name(), err)
	}
	if err := checkProduct(got); err != nil {
		return fmt.Errorf("xla: check on %s: %w", b.Name(), err)
	}
	return nil
}

// checkProduct compares the result of Check's matmul with the exact float32 answer.
func checkProduct(got []float32) error {
	if len(got) != checkM*checkN {
		return fmt.Errorf("result has %d values, want %d", len(got), checkM*checkN)
	}
	for i, v := range got {
		scale := float32(1 + (i%checkN)%2)
		if want := float32(checkK) * (1 + checkEps) * scale; v != want {
			return fmt.Errorf("float32 matmul entry [%d,%d] = %.9g, want exactly %.9g (TF32 would give %g)",
				i/checkN, i%checkN, v, want, float32(checkK)*scale)
		}
	}
	return nil
}
