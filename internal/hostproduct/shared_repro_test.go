package hostproduct

import (
	"testing"
	"unsafe"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/gobackend"
	"github.com/gomlx/compute/shapes"
)

// TestComputeDropsSharedBuffers is the reproduction of the compute v0.1.14 behaviour octlm works
// around with its spares (spares.go): the pure-Go backend takes the buffers it makes for a
// graph's results back into its pool (a sync.Pool) when they are finalized, but never a shared
// one (NewSharedBuffer, "user fed"), which it leaves to the garbage collector: sixteen shared
// buffers made one after another, each finalized before the next, never share memory (pooled on
// the same goroutine, nearly all would). This test fails once compute pools shared buffers too:
// then the spares can go.
func TestComputeDropsSharedBuffers(t *testing.T) {
	b, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	shape := shapes.Make(dtypes.Float32, 4096)
	seen := map[unsafe.Pointer]bool{}
	for i := range 16 {
		buf, flat, err := b.NewSharedBuffer(0, shape)
		if err != nil {
			t.Fatal(err)
		}
		p := unsafe.Pointer(&flat.([]float32)[0])
		if seen[p] {
			t.Fatalf("shared buffer %d reuses a finalized one's memory: compute pools shared buffers now, and hostproduct's spares can go", i)
		}
		seen[p] = true
		if err := buf.Finalize(); err != nil {
			t.Fatal(err)
		}
	}
}
