package hostproduct

import (
	"slices"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"
)

// TestSparesAreReused runs a graph of products (its first output a product's result, handed to
// the caller) three times on one executable, in float32 and bfloat16, each buffer poisoned with
// NaNs as it is kept spare: every run computes the same values (no step reads a result before
// writing all of it), and once the first run's outputs are finalized the later runs make new
// buffers only for the results given to the wrapped backend's pieces (which it drops when done),
// as many each run.
func TestSparesAreReused(t *testing.T) {
	const rows, in, c1, c2, width = 2, 96, 3, 2, 64
	for _, dtype := range []dtypes.DType{dtypes.Float32, dtypes.BFloat16} {
		t.Run(dtype.String(), func(t *testing.T) {
			_, wrapped := newBackends(t, 4)
			wrapped.spares.poison = true
			exec, err := NewExec(wrapped, func(x, w1, w2 *Node) []*Node {
				first := DotGeneral(x, []int{1}, nil, w1, []int{1}, nil)
				return append([]*Node{first}, twoProducts(x, w1, w2)...)
			})
			if err != nil {
				t.Fatal(err)
			}
			defer exec.Finalize()
			x := asDType(pattern(rows*in, 1), dtype, rows, in)
			w1 := asDType(pattern(c1*in*width, 2), dtype, c1, in, width)
			w2 := asDType(pattern(c2*c1*width*width, 3), dtype, c2, c1*width, width)
			var first [][]float32
			var first0, made, again int64 // made by the first run, by all so far, by the second
			for run := range 3 {
				out, err := exec.Call(x, w1, w2)
				if err != nil {
					t.Fatal(err)
				}
				var got [][]float32
				for _, o := range out {
					got = append(got, flat32(t, ConvertDTypeTensor(t, o)))
					if err := o.FinalizeAll(); err != nil {
						t.Fatal(err)
					}
				}
				switch run {
				case 0:
					first, made = got, wrapped.resultsMade.Load()
					first0 = made
				default:
					for i := range got {
						if !slices.Equal(got[i], first[i]) {
							t.Fatalf("run %d: output %d differs from the first run's", run, i)
						}
					}
					n := wrapped.resultsMade.Load() - made
					made += n
					if run == 1 {
						again = n
					}
					if n >= first0 || n != again {
						t.Errorf("run %d made %d new buffers for results, want as many as the second run (%d) and fewer than the first (%d)", run, n, again, first0)
					}
				}
			}
			if first0 == 0 {
				t.Fatal("no buffer made for a step's result: the graph ran no step in Go")
			}
		})
	}
}

// ConvertDTypeTensor is o as float32 values (o itself where it holds them).
func ConvertDTypeTensor(t *testing.T, o *tensors.Tensor) *tensors.Tensor {
	t.Helper()
	if o.DType() == dtypes.Float32 {
		return o
	}
	var vals []float32
	o.ConstFlatData(func(flat any) {
		for _, v := range flat.([]bfloat16.BFloat16) {
			vals = append(vals, v.Float32())
		}
	})
	return tensors.FromFlatDataAndDimensions(vals, o.Shape().Dimensions...)
}

// TestSparesKeep checks which buffers are kept spare: a shape's up to maxSpareBuffer bytes and
// maxSpareRank axes, while the spares hold at most maxSpareBytes (the other shapes' going first);
// a buffer finalized twice is kept once.
func TestSparesKeep(t *testing.T) {
	_, wrapped := newBackends(t, 4)
	for _, tc := range []struct {
		name  string
		shape shapes.Shape
		kept  bool
	}{
		{"small", shapes.Make(dtypes.Float32, 2, 1024), true},
		{"largest", shapes.Make(dtypes.Float32, maxSpareBuffer/4), true},
		{"too-large", shapes.Make(dtypes.Float32, maxSpareBuffer/4+1), false},
		{"rank-6", shapes.Make(dtypes.BFloat16, 1, 2, 1, 2, 1, 2), true},
		{"rank-7", shapes.Make(dtypes.BFloat16, 1, 2, 1, 2, 1, 2, 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf, _, err := wrapped.newResult(0, tc.shape)
			if err != nil {
				t.Fatal(err)
			}
			before := wrapped.spares.bytes
			out := wrapped.wrapResult(buf, heldSpare)
			if err := out.Finalize(); err != nil {
				t.Fatal(err)
			}
			if err := out.Finalize(); err != nil { // a second time: nothing
				t.Fatal(err)
			}
			want := before
			if tc.kept {
				want += int64(tc.shape.ByteSize())
			}
			if got := wrapped.spares.bytes; got != want {
				t.Fatalf("the spares hold %d bytes after it, want %d", got, want)
			}
			if !tc.kept {
				return
			}
			again, _, err := wrapped.newResult(0, tc.shape)
			if err != nil {
				t.Fatal(err)
			}
			if again != buf {
				t.Fatal("a buffer of the same shape was made anew, not the spare one")
			}
			_ = wrapped.release(again, heldSpare)
		})
	}
	t.Run("full", func(t *testing.T) {
		shape := shapes.Make(dtypes.Float32, maxSpareBuffer/4)
		var bufs []*buffer
		for range maxSpareBytes/maxSpareBuffer + 1 {
			buf, _, err := wrapped.Backend.NewSharedBuffer(0, shape)
			if err != nil {
				t.Fatal(err)
			}
			bufs = append(bufs, wrapped.wrapResult(buf, heldSpare).(*buffer))
		}
		for _, b := range bufs {
			if err := b.Finalize(); err != nil {
				t.Fatal(err)
			}
		}
		if got := wrapped.spares.bytes; got > maxSpareBytes {
			t.Fatalf("the spares hold %d bytes, more than %d", got, maxSpareBytes)
		}
		// Full of one shape, the spares make room for another: the first shape's go.
		small := shapes.Make(dtypes.BFloat16, 8, 128)
		buf, _, err := wrapped.Backend.NewSharedBuffer(0, small)
		if err != nil {
			t.Fatal(err)
		}
		if err := wrapped.wrapResult(buf, heldSpare).Finalize(); err != nil {
			t.Fatal(err)
		}
		if got, want := wrapped.spares.bytes, small.ByteSize(); got != want {
			t.Fatalf("the spares hold %d bytes after a buffer of another shape, want its %d alone", got, want)
		}
	})
}
