package xla

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/float16"
	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

// openTestONNX opens ONNX Runtime on one thread, or skips the test where its library is missing.
func openTestONNX(t *testing.T) compute.Backend {
	t.Helper()
	p := DefaultPlaces()
	if _, _, err := p.FindONNX(); err != nil {
		t.Skip("no ONNX Runtime library found; install it with: " + ONNXInstallCommand)
	}
	b, _, err := p.Open(ONNX + ",intra_op_num_threads=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Finalize)
	return b
}

// TestONNXHalfCacheWrite is the minimal reproduction of the KV-cache write in float16 on ONNX
// Runtime's CPU provider: rows [heads, rows, width] written at slot `start` of a cache
// [heads, slots, width]. A scatter-add (compute-onnx lowers GoMLX's ScatterSum to ScatterND with
// reduction "add") has no float16 kernel there, so the graph fails when ONNX Runtime builds its
// session; a dynamic update slice (lowered to Pad and Where, which have float16 kernels) writes
// the same rows. The test holds every route octlm may take to the expected cache, and reports
// whether the scatter-add runs on this ONNX Runtime (it did not on 1.30.0).
func TestONNXHalfCacheWrite(t *testing.T) {
	b := openTestONNX(t)
	const heads, slots, width, rows, start = 2, 8, 4, 3, 5
	routes := []struct {
		name      string
		write     func(cache, rowsIn, start *graph.Node) *graph.Node
		mustWork  bool
		knownFail dtypes.DType // a dtype ONNX Runtime 1.30.0 has no kernel for on this route
	}{
		{"ScatterSum", func(cache, rowsIn, start *graph.Node) *graph.Node {
			g := cache.Graph()
			head := graph.Iota(g, shapes.Make(dtypes.Int32, heads, rows, 1), 0)
			slot := graph.BroadcastToDims(graph.Reshape(graph.Add(start, graph.Iota(g, shapes.Make(dtypes.Int32, rows), 0)), 1, rows, 1), heads, rows, 1)
			return graph.ScatterSum(cache, graph.Concatenate([]*graph.Node{head, slot}, -1), rowsIn, true, true)
		}, false, dtypes.Float16},
		{"DynamicUpdateSlice", func(cache, rowsIn, start *graph.Node) *graph.Node {
			zero := graph.ScalarZero(cache.Graph(), dtypes.Int32)
			return graph.DynamicUpdateSlice(cache, rowsIn, []*graph.Node{zero, start, zero})
		}, true, dtypes.InvalidDType},
	}
	for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.Float16} {
		for _, route := range routes {
			t.Run(fmt.Sprint(route.name, "/", dt), func(t *testing.T) {
				values := make([]float32, heads*rows*width)
				for i := range values {
					values[i] = float32(i) + 0.5 // exact in float16
				}
				exec, err := graph.NewExec(b, func(cache, rowsIn, start *graph.Node) *graph.Node {
					return graph.ConvertDType(route.write(cache, rowsIn, start), dtypes.Float32)
				})
				if err != nil {
					t.Fatal(err)
				}
				defer exec.Finalize()
				cache := tensors.FromShape(shapes.Make(dt, heads, slots, width))
				var in *tensors.Tensor
				if dt == dtypes.Float16 {
					half := make([]float16.Float16, len(values))
					for i, v := range values {
						half[i] = float16.FromFloat32(v)
					}
					in = tensors.FromFlatDataAndDimensions(half, heads, rows, width)
				} else {
					in = tensors.FromFlatDataAndDimensions(values, heads, rows, width)
				}
				out, err := exec.Call(cache, in, int32(start))
				if err != nil {
					if !route.mustWork && dt == route.knownFail {
						t.Logf("%s in %s does not run on ONNX Runtime (as on 1.30.0): %v", route.name, dt, firstLine(err))
						return
					}
					t.Fatalf("%s in %s: %v", route.name, dt, err)
				}
				if !route.mustWork && dt == route.knownFail {
					t.Logf("%s in %s now runs on this ONNX Runtime: it has gained the kernel 1.30.0 lacked", route.name, dt)
				}
				got := tensors.MustCopyFlatData[float32](out[0])
				for h := range heads {
					for s := range slots {
						for c := range width {
							want := float32(0)
							if r := s - start; r >= 0 && r < rows {
								want = values[(h*rows+r)*width+c]
							}
							if g := got[(h*slots+s)*width+c]; g != want {
								t.Fatalf("cache[%d][%d][%d] = %v, want %v", h, s, c, g, want)
							}
						}
					}
				}
			})
		}
	}
}

// firstLine is the first line of err's message (ONNX Runtime's errors run to many lines).
func firstLine(err error) string {
	s := err.Error()
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}

// TestONNXMemoryOptions adds the arena and memory-pattern settings unless the name sets them,
// in any spelling, and says so in the reason.
func TestONNXMemoryOptions(t *testing.T) {
	for _, c := range []struct{ opts, want string }{
		{"", "cpu_mem_arena=false,mem_pattern=false"},
		{"intra_op_num_threads=2", "intra_op_num_threads=2,cpu_mem_arena=false,mem_pattern=false"},
		{"cpu_mem_arena=true", "cpu_mem_arena=true,mem_pattern=false"},
		{"cpumemarena=true", "cpumemarena=true,mem_pattern=false"},
		{"no_cpu_mem_arena", "no_cpu_mem_arena,mem_pattern=false"},
		{"CPU_MEM_ARENA=1,parallel", "CPU_MEM_ARENA=1,parallel,mem_pattern=false"},
		{"mem_pattern=true", "mem_pattern=true,cpu_mem_arena=false"},
		{"mempattern=true", "mempattern=true,cpu_mem_arena=false"},
		{"no_mem_pattern,cpu_mem_arena=true", "no_mem_pattern,cpu_mem_arena=true"},
	} {
		opts, reason, _ := onnxMemoryOptions(c.opts, "why")
		if opts != c.want {
			t.Errorf("onnxMemoryOptions(%q) = %q, want %q", c.opts, opts, c.want)
		}
		for _, o := range []string{"cpu_mem_arena=false", "mem_pattern=false"} {
			added := strings.Contains(opts, o) && !strings.Contains(c.opts, o)
			if added != strings.Contains(reason, o+" (") {
				t.Errorf("onnxMemoryOptions(%q): reason %q does not say whether %s was added", c.opts, reason, o)
			}
		}
	}
}

// TestChooseHalf: where the automatic choice would take ONNX Runtime, it passes over it for
// both half-precision dtypes and for one sequence and says why on the backend line; float32
// many sequences at once on Intel's processors keep it.
func TestChooseHalf(t *testing.T) {
	t.Setenv(EnvBackend, "")
	if name, _, _ := DefaultPlaces().AutoName(); name != ONNX {
		t.Skip("the automatic choice here is " + name + ", not onnx")
	}
	many := Workload{Sequences: intelONNXFrom()}
	type choice struct {
		job         Job
		engine, why string
	}
	oneSequence := func() choice { // on the pure-Go backend where its AVX-512 kernels run
		if OneSequenceOnGo() {
			return choice{Job{DType: "f32"}, Go, "the pure-Go backend decodes one sequence faster"}
		}
		return choice{Job{DType: "f32"}, ONNX, "cpu_mem_arena=false"}
	}
	for _, c := range []choice{
		{Job{DType: "f32", Workload: many, CPUVendor: intelVendor}, ONNX, "cpu_mem_arena=false"},
		oneSequence(),
		{Job{DType: "bf16", Workload: many, CPUVendor: intelVendor}, Go, "passed over for bf16: ONNX Runtime cannot run it"},
		{Job{DType: "f16", Workload: many, CPUVendor: intelVendor}, Go, "passed over for f16: ONNX Runtime's CPU provider casts float16 weights"},
	} {
		b, info, err := Choose(c.job)
		if err != nil {
			t.Fatalf("%+v: %v", c.job, err)
		}
		b.Finalize()
		if info.Name != c.engine || !strings.Contains(info.String(), c.why) {
			t.Errorf("Choose(%+v) = %s; want %s saying %q", c.job, info, c.engine, c.why)
		}
	}
}
