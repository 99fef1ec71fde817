package octlm

import (
	"fmt"

	"github.com/gomlx/compute"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"
)

// RoPE rotates one head vector per position on backend with the model's own rotary embedding: the
// graph code attention runs (InvFreq(headDim, base), angles position × inv_freq in float32, split
// or neighbour pairing), outside a model. x[i] is the head at positions[i]; every head has the same
// even width. It is there so that other implementations of RoPE (the notebooks' JavaScript
// playground) can be checked against the graph's.
func RoPE(backend compute.Backend, x [][]float32, positions []int32, base float64, split bool) ([][]float32, error) {
	if len(x) == 0 || len(x) != len(positions) {
		return nil, fmt.Errorf("octlm: RoPE: %d vectors and %d positions: want as many of each, at least one", len(x), len(positions))
	}
	headDim := len(x[0])
	if headDim < 2 || headDim%2 != 0 {
		return nil, fmt.Errorf("octlm: RoPE: head width %d: want an even width ≥ 2", headDim)
	}
	for i, v := range x {
		if len(v) != headDim {
			return nil, fmt.Errorf("octlm: RoPE: vector %d has %d channels, vector 0 has %d", i, len(v), headDim)
		}
	}
	if !(base > 1) {
		return nil, fmt.Errorf("octlm: RoPE: base %g: want a base > 1", base)
	}
	exec, err := NewExec(backend, func(x, positions *Node) *Node {
		cos, sin := rotaryTables(positions, headDim, base)
		return Squeeze(applyRotary(InsertAxes(x, 1), cos, sin, split), 1) // [S, 1 head, headDim] → [S, headDim]
	})
	if err != nil {
		return nil, fmt.Errorf("octlm: RoPE: %w", err)
	}
	defer exec.Finalize()
	out, err := exec.Call(tensors.FromValue(x), tensors.FromValue(positions))
	if err != nil {
		return nil, fmt.Errorf("octlm: RoPE: %w", err)
	}
	defer out[0].FinalizeAll()
	rotated, ok := out[0].Value().([][]float32)
	if !ok {
		return nil, fmt.Errorf("octlm: RoPE: the graph returned %s, want float32 [%d, %d]", out[0].Shape(), len(x), headDim)
	}
	return rotated, nil
}
