package octlm

import (
	"slices"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"
)

// TestPermuted checks that permuted gives TransposeAllAxes' values, and is a Reshape exactly
// where the permutation moves only axes of size 1.
func TestPermuted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dims    []int
		perm    []int
		reshape bool
	}{
		{"a decode step's heads first", []int{1, 1, 8, 4}, []int{0, 2, 1, 3}, true},
		{"a prompt's heads first", []int{1, 3, 8, 4}, []int{0, 2, 1, 3}, false},
		{"queries grouped, one position", []int{1, 1, 2, 3, 4}, []int{0, 2, 3, 1, 4}, true},
		{"two axes swapped", []int{1, 2, 3, 1}, []int{0, 2, 1, 3}, false},
		{"the last two, one of size 1", []int{1, 2, 5, 1}, []int{0, 1, 3, 2}, true},
		{"identity", []int{2, 3}, []int{0, 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size := 1
			for _, d := range tc.dims {
				size *= d
			}
			values := make([]float32, size)
			for i := range values {
				values[i] = float32(i)
			}
			var isReshape bool
			exec, err := NewExec(goBackend(t), func(g *Graph) []*Node {
				x := Reshape(Const(g, values), tc.dims...)
				got := permuted(x, tc.perm...)
				isReshape = got.Type() == NodeTypeReshape || got == x
				return []*Node{got, TransposeAllAxes(x, tc.perm...)}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer exec.Finalize()
			out, err := exec.Call()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out[0].Shape().Dimensions, out[1].Shape().Dimensions) {
				t.Fatalf("shape %v, want %v", out[0].Shape(), out[1].Shape())
			}
			var got, want []float32
			tensors.MustConstFlatData(out[0], func(f []float32) { got = slices.Clone(f) })
			tensors.MustConstFlatData(out[1], func(f []float32) { want = slices.Clone(f) })
			if !slices.Equal(got, want) {
				t.Errorf("values %v, want %v", got, want)
			}
			if isReshape != tc.reshape {
				t.Errorf("a reshape: %v, want %v", isReshape, tc.reshape)
			}
		})
	}
}
