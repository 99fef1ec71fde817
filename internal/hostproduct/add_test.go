package hostproduct

import (
	"math"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
)

// TestSumsBetweenPieces adds products' outputs on the wrapped backend and on the backend itself:
// operands in slots with one shape run in Go (one operand read again after the sum, so that its
// buffer is not reused; float32 and bfloat16; a prompt's rows shared out), any other Add in a
// piece of the wrapped backend (an operand computed in the piece, operands broadcast).
func TestSumsBetweenPieces(t *testing.T) {
	const in, count, width = 24, 3, 16 // the products' outputs: [rows, 3, 16]
	for _, tc := range []struct {
		name   string
		dtype  dtypes.DType
		rows   int
		form   string // "slots", "piece" or "broadcast"
		inGo   int64
		pieces int64
	}{
		{"f32/slots", dtypes.Float32, 1, "slots", 1, 0},
		{"f32/shared", dtypes.Float32, 400, "slots", 1, 0}, // 19,200 values: two chunks
		{"bf16/slots", dtypes.BFloat16, 3, "slots", 1, 0},  // the conversions to float32 run in Go too
		{"f32/piece", dtypes.Float32, 2, "piece", 0, 1},
		{"f32/broadcast", dtypes.Float32, 2, "broadcast", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner, wrapped := newBackends(t, 1024)
			run := func(b compute.Backend) [][]float32 {
				exec, err := NewExec(b, func(x, wa, wb, wd *Node) []*Node {
					a := DotGeneral(x, []int{1}, nil, wa, []int{1}, nil)
					bb := DotGeneral(x, []int{1}, nil, wb, []int{1}, nil)
					var s *Node
					switch tc.form {
					case "slots":
						s = Add(a, bb)
					case "piece":
						s = Add(Tanh(a), bb)
					case "broadcast":
						s = Add(a, SliceAxis(bb, 0, AxisElem(0)))
					}
					y := DotGeneral(Reshape(s, tc.rows, count*width), []int{1}, nil, wd, []int{1}, nil)
					return []*Node{ConvertDType(a, dtypes.Float32), ConvertDType(s, dtypes.Float32), ConvertDType(y, dtypes.Float32)}
				})
				if err != nil {
					t.Fatal(err)
				}
				defer exec.Finalize()
				out, err := exec.Call(asDType(pattern(tc.rows*in, 1), tc.dtype, tc.rows, in),
					asDType(pattern(count*in*width, 2), tc.dtype, count, in, width),
					asDType(pattern(count*in*width, 3), tc.dtype, count, in, width),
					asDType(pattern(count*width*width, 4), tc.dtype, 1, count*width, width))
				if err != nil {
					t.Fatal(err)
				}
				all := make([][]float32, len(out))
				for i, o := range out {
					all[i] = flat32(t, o)
				}
				return all
			}
			want, got := run(inner), run(wrapped)
			if n := wrapped.SumsRun(); n != tc.inGo {
				t.Errorf("%d sums ran in Go, want %d", n, tc.inGo)
			}
			if n := wrapped.piecesRun.Load(); n != tc.pieces {
				t.Errorf("%d pieces ran, want %d", n, tc.pieces)
			}
			for k := range want {
				for i := range want[k] {
					if d := math.Abs(float64(want[k][i] - got[k][i])); d > 1e-5*(1+math.Abs(float64(want[k][i]))) {
						t.Fatalf("output %d, value %d = %v, the backend's %v", k, i, got[k][i], want[k][i])
					}
				}
			}
		})
	}
}
