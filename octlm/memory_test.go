package octlm

import (
	"testing"

	"github.com/octlm/octlm/octlm/synth"
	"github.com/octlm/octlm/xla"
)

// TestMemoryNeeded holds the estimate to what loading allocates: the fixtures' resident
// weights and cache bytes exactly, in every dtype and layout.
func TestMemoryNeeded(t *testing.T) {
	t.Parallel()
	for _, layout := range []Layout{LayoutFor(xla.EngineGo), LayoutFor(xla.EngineXLA), {TableColumns: true, ColumnRows: 7}} {
		for _, name := range fixtures {
			for _, dtype := range []DType{Float32, BFloat16, Float16} {
				m, err := Load(fixtureDir(name), LoadOptions{Backend: goBackend(t), DType: dtype, Layout: &layout})
				if err != nil {
					t.Fatal(err)
				}
				need := memoryNeeded(m.arch, layout, dtype, 100)
				if layout == LayoutFor(xla.EngineGo) && MemoryNeededQwen3(qwen3Of(t, m), dtype, goBackend(t), 100) != need {
					t.Errorf("%s %s: MemoryNeededQwen3 on the pure-Go backend is not its layout's estimate", name, dtype)
				}
				if need.Weights != m.WeightBytes() {
					t.Errorf("%s %s layout %v: estimate %d weight bytes, loaded %d", name, dtype, layout, need.Weights, m.WeightBytes())
				}
				cache, err := m.NewCache(100)
				if err != nil {
					t.Fatal(err)
				}
				if got := int64(cache.Capacity()) * cache.BytesPerPosition(); need.KVCache != got {
					t.Errorf("%s %s: estimate %d cache bytes, allocated %d", name, dtype, need.KVCache, got)
				}
				cache.Close()
				m.Close()
			}
		}
	}
}

// TestMemoryNeededQwen3 pins the estimate for the big shapes in both table layouts: the head
// (the embedding, and Qwen3-8B's untied lm_head.weight) as columns [d, vocab], which load
// ColumnRows rows at a time (the pure-Go engine), and as rows (ONNX Runtime, XLA).
func TestMemoryNeededQwen3(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		columns bool
		like    synth.QwenLike
		dtype   DType
		weights int64
		working int64
	}{
		// 8B as columns: 8,190,735,360 parameters, no padding; working: gate_proj's float32
		// scratch, 12,288 · 4,096 · 4 (a table's 4,096 rows at a time take 4,096 · 4,096 · 4).
		{"qwen3-8b bf16 columns", true, synth.Qwen3_8B(), BFloat16, 2 * 8_190_735_360, 201_326_592},
		{"qwen3-8b f16 columns", true, synth.Qwen3_8B(), Float16, 2 * 8_190_735_360, 201_326_592},
		{"qwen3-8b f32 columns", true, synth.Qwen3_8B(), Float32, 4 * 8_190_735_360, 201_326_592},
		// 0.6B, tied, as columns: working is the table's 4,096 rows · 1,024 · 4, above o_proj's.
		{"qwen3-0.6b f32 columns", true, synth.Qwen3_0_6B(), Float32, 4 * 596_049_920, 4 * 4096 * 1024},
		// 8B as rows: 8,190,735,360 parameters · 2 bytes; working: gate_proj's scratch (the BF16
		// tables are read straight in).
		{"qwen3-8b bf16 rows", false, synth.Qwen3_8B(), BFloat16, 2 * 8_190_735_360, 201_326_592},
		// f16: the tables are converted through the scratch, 151,936 · 4,096 · 4.
		{"qwen3-8b f16 rows", false, synth.Qwen3_8B(), Float16, 2 * 8_190_735_360, 2_489_319_424},
		// f32: 4 bytes each; working: gate_proj's float32 scratch, 12,288 · 4,096 · 4.
		{"qwen3-8b f32 rows", false, synth.Qwen3_8B(), Float32, 4 * 8_190_735_360, 201_326_592},
		// 0.6B, tied; working: o_proj's (or q_proj's) float32 scratch, 2,048 · 1,024 · 4 · …
		{"qwen3-0.6b f32 rows", false, synth.Qwen3_0_6B(), Float32, 4 * 596_049_920, 4 * 3072 * 1024},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Qwen3ConfigFrom(tt.like.ConfigJSON())
			if err != nil {
				t.Fatal(err)
			}
			need := memoryNeeded(qwen3{cfg}, Layout{TableColumns: tt.columns}, tt.dtype, 40)
			// Cache: 64 positions (the smallest capacity) · 2 · 36 or 28 layers · 8 kv heads · 128,
			// in the model's dtype (see cacheDType).
			wantCache := int64(64 * 2 * cfg.NLayers * 8 * 128 * tt.dtype.gomlx().Size())
			if need.Weights != tt.weights || need.Working != tt.working || need.KVCache != wantCache {
				t.Errorf("weights %d, working %d, cache %d\nwant    %d, working %d, cache %d", need.Weights, need.Working, need.KVCache, tt.weights, tt.working, wantCache)
			}
			if need.Total() != need.Weights+need.KVCache+need.Working {
				t.Errorf("Total %d", need.Total())
			}
		})
	}
}
