package hostproduct

import (
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/gobackend"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
)

// TestGoMLXScalarCacheCrossesFunctions is the reproduction of a GoMLX v0.28.16 fault that octlm
// works around (octlm's scalarOf): Scalar, and with it AddScalar, MulScalar and ReduceMean,
// keeps one node per dtype and value for the whole graph, not per function, so a named
// function's body that makes a scalar the main function made first is given the main
// function's node, and the graph fails to build ("uses a node from a different function
// scope"), on compute's own backend. This test fails once GoMLX keeps scalars per function:
// then the workaround can go.
func TestGoMLXScalarCacheCrossesFunctions(t *testing.T) {
	b, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	exec, err := NewExec(b, func(x *Node) *Node {
		y := AddScalar(x, 0.5)
		fn := NewFunction(x.Graph(), "f", func(g *Graph) []*Node {
			return []*Node{AddScalar(Parameter(g, "p", shapes.Make(dtypes.Float32, 4)), 0.5)}
		})
		return Add(y, fn.Call(x)[0])
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	_, err = exec.Call1(asDType(pattern(4, 1), dtypes.Float32, 4))
	if err == nil || !strings.Contains(err.Error(), "different function scope") {
		t.Fatalf("error %v: GoMLX no longer shares a scalar across functions; octlm's scalarOf workaround can go", err)
	}
}
