package octlm

import (
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
)

// TestStepKey checks that the step graphs' key tells apart what needs another graph: the cache's
// dtype, a dimension, a dtype, a rank, and a shape moved between the inputs and the caches'
// tensors; and that equal shapes give equal keys.
func TestStepKey(t *testing.T) {
	f32, bf16 := dtypes.Float32, dtypes.BFloat16
	in := []shapes.Shape{shapes.Make(dtypes.Int32, 2, 1), shapes.Make(dtypes.Int32, 2)}
	caches := []shapes.Shape{shapes.Make(f32, 8, 128, 64), shapes.Make(f32, 8, 64, 128)}
	base := stepKey(f32, in, caches)
	if again := stepKey(f32, []shapes.Shape{shapes.Make(dtypes.Int32, 2, 1), shapes.Make(dtypes.Int32, 2)},
		[]shapes.Shape{shapes.Make(f32, 8, 128, 64), shapes.Make(f32, 8, 64, 128)}); again != base {
		t.Fatal("equal shapes gave different keys")
	}
	for _, tc := range []struct {
		name          string
		kv            dtypes.DType
		inputs, cache []shapes.Shape
	}{
		{"the cache's dtype", bf16, in, caches},
		{"a dimension", f32, in, []shapes.Shape{shapes.Make(f32, 8, 128, 128), caches[1]}},
		{"a dtype", f32, in, []shapes.Shape{shapes.Make(bf16, 8, 128, 64), caches[1]}},
		{"a rank", f32, in, []shapes.Shape{shapes.Make(f32, 8, 128, 64, 1), caches[1]}},
		{"one more block", f32, in, append(append([]shapes.Shape(nil), caches...), caches[0])},
		{"a shape moved to the inputs", f32, append(append([]shapes.Shape(nil), in...), caches[0]), caches[1:]},
	} {
		if stepKey(tc.kv, tc.inputs, tc.cache) == base {
			t.Errorf("%s: same key", tc.name)
		}
	}
}
