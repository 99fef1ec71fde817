package octlm

import (
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

// stepLike is a graph of a step's arity: a token vector and n tensors, each a weight or a cache
// block, of which it returns the first plus the token count and the last (as a step returns
// its logits and states).
func stepLike(t testing.TB, n int) (*stepExec, []*tensors.Tensor) {
	t.Helper()
	exec, err := graph.NewExec(goBackend(t), func(g *graph.Graph, in []*graph.Node) []*graph.Node {
		return []*graph.Node{graph.Add(in[1], graph.ConvertDType(graph.ReduceAllSum(in[0]), dtypes.Float32)), in[n]}
	})
	if err != nil {
		t.Fatal(err)
	}
	args := []*tensors.Tensor{tensors.FromValue([]int32{1, 2, 3})}
	argShapes := []shapes.Shape{shapes.Make(dtypes.Int32, 3)}
	for i := range n {
		args = append(args, tensors.FromValue([]float32{float32(i), 1}))
		argShapes = append(argShapes, shapes.Make(dtypes.Float32, 2))
	}
	g, err := exec.Compile(argShapes...)
	if err != nil {
		t.Fatal(err)
	}
	return &stepExec{exec: exec, graph: g}, args
}

// values is args as GoMLX's Exec.Call takes them, values of any type.
func values(args []*tensors.Tensor) []any {
	out := make([]any, len(args))
	for i, t := range args {
		out[i] = t
	}
	return out
}

// TestStepCallMatchesExec runs a step-like graph both ways, and gives one argument's buffer.
func TestStepCallMatchesExec(t *testing.T) {
	s, args := stepLike(t, 40)
	defer s.exec.Finalize()
	want, err := s.exec.Call(values(args)...)
	if err != nil {
		t.Fatal(err)
	}
	given := tensors.FromValue([]float32{7, 8})
	args[40] = given
	got, err := s.call(goBackend(t), args, []int{40})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := tensors.MustCopyFlatData[float32](got[0]), tensors.MustCopyFlatData[float32](want[0]); a[0] != b[0] || a[1] != b[1] || a[0] != 6 {
		t.Errorf("first output %v, Exec.Call's %v (want [6 7])", a, b)
	}
	if last := tensors.MustCopyFlatData[float32](got[1]); last[0] != 7 || last[1] != 8 {
		t.Errorf("the given argument came back as %v", last)
	}
	if _, err := s.call(goBackend(t), args[:40], nil); err == nil {
		t.Error("a call one argument short ran")
	}
}

// BenchmarkStepCall is the reproduction for stepExec.call: a graph of a Qwen3-0.6B decode step's
// arity (367 arguments), run through GoMLX's Exec.Call and on its buffers directly.
func BenchmarkStepCall(b *testing.B) {
	s, args := stepLike(b, 366)
	defer s.exec.Finalize()
	asValues := values(args)
	run := func(b *testing.B, call func() ([]*tensors.Tensor, error)) {
		for b.Loop() {
			out, err := call()
			if err != nil {
				b.Fatal(err)
			}
			for _, t := range out {
				_ = t.FinalizeAll()
			}
		}
	}
	b.Run("Exec.Call", func(b *testing.B) { run(b, func() ([]*tensors.Tensor, error) { return s.exec.Call(asValues...) }) })
	b.Run("direct", func(b *testing.B) {
		run(b, func() ([]*tensors.Tensor, error) { return s.call(goBackend(b), args, nil) })
	})
}
