package octlm

import (
	"reflect"
	"testing"

	"github.com/octlm/octlm/internal/hugepage"
	"github.com/octlm/octlm/xla"
)

// TestHugePagesUnderWeights: with its own layout (Layout.HugePages), the pure-Go engine's resident
// weights lie in memory advised for transparent huge pages, and the model still computes the
// reference's logits; the KV cache's blocks stay shared with the backend (written in place).
func TestHugePagesUnderWeights(t *testing.T) {
	if hugepage.Size() == 0 {
		t.Skip("no transparent huge pages here")
	}
	layout := LayoutFor(xla.EngineGo)
	if !layout.HugePages {
		t.Fatal("the go layout does not ask for huge pages")
	}
	m := loadLayout(t, "tiny-qwen3", layout)
	cache, err := m.NewCache(64)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	ref := readReference(t, "tiny-qwen3")[0]
	got, err := m.ForwardCached(ref.ids, cache)
	if err != nil {
		t.Fatal(err)
	}
	if worst := maxAbsError(t, got, ref.logits); worst > parityTolerance {
		t.Errorf("logits on huge pages: max abs error %.3g exceeds the gate %g", worst, parityTolerance)
	}
	check := func(what string, i int, flat any) {
		marked, err := hugepage.Marked(reflect.ValueOf(flat).UnsafePointer())
		if err != nil || !marked {
			t.Errorf("%s %d: advised = %v, %v; want true", what, i, marked, err)
		}
	}
	for i, w := range m.weights {
		if err := w.ConstFlatData(func(flat any) { check("weight", i, flat) }); err != nil {
			t.Fatal(err)
		}
	}
	for i, blocks := range cache.state {
		for _, b := range blocks {
			// Shared with the backend, so rows are written in place: a tensor that is not
			// keeps a host copy of every block it writes into.
			if !b.IsShared() {
				t.Errorf("cache state %d: a block that is not shared with the backend", i)
			}
		}
	}
}
