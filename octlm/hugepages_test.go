package octlm

import (
	"reflect"
	"testing"

	"github.com/octlm/octlm/internal/hugepage"
	"github.com/octlm/octlm/xla"
)

// TestHugePagesUnderWeightsAndCache: with its own layout (Layout.HugePages), the pure-Go engine's
// resident weights and KV cache blocks lie in memory advised for transparent huge pages, and
// the model still computes the reference's logits there.
func TestHugePagesUnderWeightsAndCache(t *testing.T) {
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
			if err := b.ConstFlatData(func(flat any) { check("cache state", i, flat) }); err != nil {
				t.Fatal(err)
			}
		}
	}
}
