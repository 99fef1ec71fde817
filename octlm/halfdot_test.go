package octlm

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/octlm/octlm/octlm/synth"
	"github.com/octlm/octlm/xla"
)

// halfDotShapes are products x [batch, rows, in] · w [batch, in, out] (batch 0: unbatched, a
// Linear weight or the head as columns; batched: attention's probabilities · values) on both
// sides of the pure-Go backend's small/large kernel threshold (batch × rows × in × out ≥ 4 << 20
// goes to the large kernel).
var halfDotShapes = []struct{ batch, rows, in, out int }{
	{0, 1, 32, 4096}, {0, 4, 32, 4096}, {0, 8, 32, 4096}, {0, 64, 32, 320}, {0, 64, 32, 4096},
	{0, 5, 64, 4096}, {0, 16, 64, 4096}, {0, 4, 1024, 1024}, {0, 12, 1024, 1024}, {0, 64, 1024, 320},
	{4, 7, 64, 64}, {4, 256, 256, 128}, {2, 250, 256, 128},
}

// TestHalfDotGeneral multiplies half-precision x by w (halfDotShapes) and compares with float64
// sums of the same rounded values: ops.linear and ops.batchMatMul in the go engine's layout must
// be right; the backend's own DotGeneral is only logged, since compute
// v0.1.14 gets every row ≡ 3 (mod 4) of its large kernel wrong in bfloat16 and float16 (see
// Layout.SpreadHalfRows), so that an upgrade that fixes it shows here without failing.
func TestHalfDotGeneral(t *testing.T) {
	layout := LayoutFor(xla.EngineGo)
	for _, dt := range []dtypes.DType{dtypes.BFloat16, dtypes.Float16} {
		for _, sz := range halfDotShapes {
			t.Run(fmt.Sprintf("%s/%dx%dx%dx%d", dt, sz.batch, sz.rows, sz.in, sz.out), func(t *testing.T) {
				batch, numBatch := max(sz.batch, 1), min(sz.batch, 1)
				x := randomTensor(t, dt, []int{sz.batch, sz.rows, sz.in}[1-numBatch:]...)
				w := randomTensor(t, dt, []int{sz.batch, sz.in, sz.out}[1-numBatch:]...)
				want := matMulReference(t, batch, x, w)
				// The result is rounded to the half type once: half a step, relative.
				tolerance := math.Pow(2, -float64(mantissaBits(dt)))
				o := ops{layout: layout}
				for _, route := range []struct {
					name string
					fn   func(x, w *Node) *Node
				}{
					{"ops", func(x, w *Node) *Node {
						if numBatch == 0 && layout.LinearRows {
							return ConvertDType(o.linear(x, Transpose(w, 0, 1)), dtypes.Float32)
						}
						if numBatch == 0 {
							return ConvertDType(o.linear(x, w), dtypes.Float32)
						}
						return ConvertDType(o.batchMatMul(x, w, 1), dtypes.Float32)
					}},
					{"ops in pieces", func(x, w *Node) *Node {
						if numBatch > 0 {
							return ConvertDType(o.batchMatMul(x, w, 1), dtypes.Float32)
						}
						// Pieces of at most 48 rows of wᵀ, the last shorter.
						rows := Transpose(w, 0, 1)
						var pieces []*Node
						for first := 0; first < sz.out; first += 48 {
							pieces = append(pieces, SliceAxis(rows, 0, AxisRange(first, min(first+48, sz.out))))
						}
						return ConvertDType(o.linearPieces(x, pieces, false), dtypes.Float32)
					}},
					{"backend", func(x, w *Node) *Node {
						return ConvertDType(DotGeneral(x, []int{numBatch + 1}, []int{0}[:numBatch], w, []int{numBatch}, []int{0}[:numBatch]), dtypes.Float32)
					}},
				} {
					got := callGo(t, route.fn, x, w)
					var badRows []int // the rows off, in any batch
					worst := 0.0
					for r := range batch * sz.rows {
						rowWorst := 0.0
						for c := range sz.out {
							w := want[r*sz.out+c]
							rowWorst = max(rowWorst, math.Abs(float64(got[r*sz.out+c])-w)/(1+math.Abs(w)))
						}
						if rowWorst > tolerance {
							badRows = append(badRows, r%sz.rows)
						}
						worst = max(worst, rowWorst)
					}
					slices.Sort(badRows)
					badRows = slices.Compact(badRows)
					switch {
					case route.name != "backend" && len(badRows) > 0:
						t.Errorf("%s: rows %v off, relative error up to %.3g > %.3g", route.name, badRows, worst, tolerance)
					case route.name == "backend" && len(badRows) > 0:
						t.Logf("backend's own %s DotGeneral: rows %v WRONG (relative error up to %.3g): the upstream bug Layout.SpreadHalfRows works around is still present", dt, badRows, worst)
					case route.name == "backend":
						t.Logf("backend's own %s DotGeneral: correct (relative error %.3g)", dt, worst)
					}
				}
			})
		}
	}
}

// callGo runs fn on the pure-Go backend and returns its float32 result.
func callGo(t *testing.T, fn func(x, w *Node) *Node, x, w *tensors.Tensor) []float32 {
	t.Helper()
	exec, err := NewExec(goBackend(t), fn)
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	out, err := exec.Call(x, w)
	if err != nil {
		t.Fatal(err)
	}
	return tensors.MustCopyFlatData[float32](out[0])
}

// matMulReference is x [batch·rows, in] · w [batch·in, out], batch by batch, summed in float64
// from the tensors' values.
func matMulReference(t *testing.T, batch int, x, w *tensors.Tensor) []float64 {
	t.Helper()
	xs, ws := halfValues(x), halfValues(w)
	in, out := x.Shape().Dimensions[x.Rank()-1], w.Shape().Dimensions[w.Rank()-1]
	rows := len(xs) / batch / in
	want := make([]float64, batch*rows*out)
	for b := range batch {
		for r := range rows {
			for k := range in {
				a := xs[(b*rows+r)*in+k]
				for c := range out {
					want[(b*rows+r)*out+c] += a * ws[(b*in+k)*out+c]
				}
			}
		}
	}
	return want
}

// TestHalfForward runs a synthetic model with a 4,096-token vocabulary (its head a large-kernel
// product) in bfloat16 and float16 on the pure-Go backend and checks every position's logits
// against float32: without SpreadHalfRows positions 3, 7, 11, … are off by up to 1.4 here (about
// 10 on Qwen3-sized logits).
func TestHalfForward(t *testing.T) {
	cfg := synth.QwenLike{VocabSize: 4096, HiddenSize: 64, NumLayers: 2, NumHeads: 4, NumKVHeads: 2, HeadDim: 16,
		IntermediateSize: 128, MaxPositionEmbeddings: 4096, RopeTheta: 1_000_000, RMSNormEps: 1e-6, EOSTokenID: 1}
	dir := synthModel(t, cfg, 5)
	ids := make([]int, 48)
	for i := range ids {
		ids[i] = (i*977 + 13) % cfg.VocabSize
	}
	forward := func(dtype DType) Logits {
		m, err := Load(dir, LoadOptions{Backend: goBackend(t), DType: dtype})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		logits, err := m.Forward(ids)
		if err != nil {
			t.Fatal(err)
		}
		return logits
	}
	want := forward(Float32)
	for _, tt := range []struct {
		dtype     DType
		tolerance float64 // max abs logit error: measured 0.0053 (bf16) and 0.0007 (f16), unspread 1.4
	}{{BFloat16, 0.05}, {Float16, 0.01}} {
		t.Run(string(tt.dtype), func(t *testing.T) {
			got := forward(tt.dtype)
			agree, worst := 0, 0.0
			for p := range ids {
				rowWorst := 0.0
				for c, w := range want.Row(p) {
					rowWorst = max(rowWorst, math.Abs(float64(got.Row(p)[c]-w)))
				}
				if rowWorst > tt.tolerance {
					t.Errorf("position %d: max abs logit error %.3g > %.3g", p, rowWorst, tt.tolerance)
				}
				worst = max(worst, rowWorst)
				if Argmax(got.Row(p)) == Argmax(want.Row(p)) {
					agree++
				}
			}
			t.Logf("%s vs float32: max abs logit error %.3g, top-1 agreement %d/%d", tt.dtype, worst, agree, len(ids))
			if agree*100 < 95*len(ids) {
				t.Errorf("top-1 agreement %d/%d < 95%%", agree, len(ids))
			}
		})
	}
}

// TestAfterIsExact checks that after(w, x), the weight held back until x is computed, is w to
// the bit in every half and full precision, −0, infinities and NaN included, whatever x's first
// element holds (NaN too).
func TestAfterIsExact(t *testing.T) {
	values := []float32{0, float32(math.Copysign(0, -1)), 1, -2.5, 1e-30, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.BFloat16, dtypes.Float16} {
		for _, first := range []float32{3, 0, float32(math.NaN()), float32(math.Inf(-1))} {
			exec, err := NewExec(goBackend(t), func(w, x *Node) *Node {
				w = ConvertDType(w, dt)
				bits := dtypes.Int32
				if dt.Size() == 2 {
					bits = dtypes.Int16
				}
				return ConvertDType(Equal(Bitcast(after(w, ConvertDType(x, dt)), bits), Bitcast(w, bits)), dtypes.Int32)
			})
			if err != nil {
				t.Fatal(err)
			}
			out, err := exec.Call(tensors.FromFlatDataAndDimensions(values, 2, 4), tensors.FromFlatDataAndDimensions([]float32{first, 1, 2, 3}, 2, 2))
			exec.Finalize()
			if err != nil {
				t.Fatal(err)
			}
			same := tensors.MustCopyFlatData[int32](out[0])
			if slices.Contains(same, 0) {
				t.Errorf("%s, x's first element %v: after(w, x) differs from w in its bits at %v", dt, first, same)
			}
		}
	}
}
