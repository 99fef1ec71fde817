package figures

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/octlm/octlm/parity"
)

// TestHybridStack: one row per layer of tiny-qwen35 (L L L F), the mixer weights found under the
// right name, and the cache bytes worked out from the config: a DeltaNet layer's fixed state, an
// attention layer's K and V for the positions.
func TestHybridStack(t *testing.T) {
	tab, err := HybridStack(filepath.Join("..", "testdata", "tiny-qwen35"), 1000)
	if err != nil {
		t.Fatal(err)
	}
	// DeltaNet: conv state 3 × (2·2·16 + 4·16) + S 4 × 16 × 16, float32: (384 + 1024) × 4 bytes.
	// Attention: 2 × 1000 positions × 2 kv heads × 32 × 4 bytes.
	want := []struct{ kind, weight, bytes string }{
		{"linear_attention", "A_log [4]", "5.50 KiB"},
		{"linear_attention", "in_proj_qkv.weight [128 64]", "5.50 KiB"},
		{"linear_attention", "conv1d.weight [128 1 4]", "5.50 KiB"},
		{"full_attention", "q_proj.weight [256 64]", "500.00 KiB"},
	}
	if len(tab.Rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(tab.Rows), len(want))
	}
	for i, w := range want {
		row := tab.Rows[i]
		if row[1] != w.kind || !strings.Contains(row[2], w.weight) || row[4] != w.bytes {
			t.Errorf("row %d: %q, want type %s, a weight %q, %s", i, row, w.kind, w.weight, w.bytes)
		}
	}
	if _, err := HybridStack(filepath.Join("..", "testdata", "tiny-qwen3"), 10); err == nil {
		t.Error("a Qwen3 checkpoint (no layer_types) was accepted")
	}
}

// TestCacheGrowth: Qwen3-0.6B's cache grows by 28 layers × K and V × 8 heads × 128 × 4 bytes per
// position and stops at its context; Qwen3.5-0.8B's by 6 layers × 2 × 2 × 256 × 4, on top of a
// fixed DeltaNet state, and ends far smaller at every length past the first few hundred positions.
func TestCacheGrowth(t *testing.T) {
	fig, tab, err := CacheGrowth(tinySource.Backend, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(fig.SVG) == 0 || len(tab.Rows) != 6 {
		t.Fatalf("figure %d bytes, %d rows", len(fig.SVG), len(tab.Rows))
	}
	rows := map[string][]string{}
	for _, r := range tab.Rows {
		rows[r[0]] = r
	}
	if got := rows["4,096"][1]; got != "896.00 MiB" {
		t.Errorf("Qwen3-0.6B at 4,096 positions: %s, want 896.00 MiB", got)
	}
	if got := rows["262,144"][1]; got != "beyond its context" {
		t.Errorf("Qwen3-0.6B at 262,144: %s", got)
	}
	// 6,144 values per position × 4 bytes × 262,144 = 6 GiB, plus 18 DeltaNet layers' fixed state.
	if got := rows["262,144"][2]; !strings.HasPrefix(got, "6.0") {
		t.Errorf("Qwen3.5-0.8B at 262,144: %s, want about 6.0 GiB", got)
	}
}

// TestTraceTable: a row per hidden state, the embedding first, and the first parted position
// shown only where there is one.
func TestTraceTable(t *testing.T) {
	tr := parity.CaseTrace{Case: 2, Parted: 1, Layers: []parity.LayerTrace{
		{Layer: -1, Type: "embedding", FirstParted: -1},
		{Layer: 0, Type: "linear_attention", MaxAbsoluteError: 0.5, MaxPosition: 7, Scaled: 0.01, FirstParted: 3},
	}}
	tab := TraceTable("tiny", tr)
	if len(tab.Rows) != 2 || tab.Rows[0][0] != "embedding" || tab.Rows[0][5] != "—" ||
		tab.Rows[1][0] != "after layer 0" || tab.Rows[1][5] != "3" || tab.Rows[1][2] != "5.00e-01" {
		t.Errorf("rows %q", tab.Rows)
	}
}
