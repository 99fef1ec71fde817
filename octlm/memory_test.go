package octlm

import (
	"testing"

	"github.com/octlm/octlm/octlm/synth"
)

// TestMemoryNeeded holds the estimate to what loading allocates: the fixtures' resident
// weights and cache bytes exactly, in every dtype and layout.
func TestMemoryNeeded(t *testing.T) {
	for _, layout := range [][2]int{{4, 2048}, {4, 96}, {1, 0}, {1, headColumns}} {
		withLayout(t, layout[0], layout[1])
		for _, name := range fixtures {
			for _, dtype := range []DType{Float32, BFloat16, Float16} {
				m := loadFixture(t, name, dtype)
				need := MemoryNeeded(m.Config, dtype, goBackend(t), 100)
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

// TestMemoryNeededQwen3 pins the estimate for the big shapes on the pure-Go backend's layouts:
// the head (the embedding, and Qwen3-8B's untied lm_head.weight) as columns [d, vocab], which
// load columnRows rows at a time, and in row blocks (the 151,936 head rows in 75 blocks of at
// most 2,048: 2,026 rows each, 14 rows of padding).
func TestMemoryNeededQwen3(t *testing.T) {
	tests := []struct {
		name             string
		blocks, headRows int
		like             synth.QwenLike
		dtype            DType
		weights          int64
		working          int64
	}{
		// 8B as columns: 8,190,735,360 parameters, no padding; working: gate_proj's float32
		// scratch, 12,288 · 4,096 · 4 (a table's 4,096 rows at a time take 4,096 · 4,096 · 4).
		{"qwen3-8b bf16 columns", 1, headColumns, synth.Qwen3_8B(), BFloat16, 2 * 8_190_735_360, 201_326_592},
		{"qwen3-8b f16 columns", 1, headColumns, synth.Qwen3_8B(), Float16, 2 * 8_190_735_360, 201_326_592},
		{"qwen3-8b f32 columns", 1, headColumns, synth.Qwen3_8B(), Float32, 4 * 8_190_735_360, 201_326_592},
		// 0.6B, tied, as columns: working is the table's 4,096 rows · 1,024 · 4, above o_proj's.
		{"qwen3-0.6b f32 columns", 1, headColumns, synth.Qwen3_0_6B(), Float32, 4 * 596_049_920, 4 * 4096 * 1024},
		// 8B in row blocks: (8,190,735,360 parameters + 2 tables · 14 padding rows · 4,096) · 2
		// bytes; working: gate_proj's scratch (the BF16 tables are read straight in).
		{"qwen3-8b bf16 row blocks", 4, 2048, synth.Qwen3_8B(), BFloat16, 16_381_700_096, 201_326_592},
		// f16: the tables are converted through the scratch, 151,950 · 4,096 · 4.
		{"qwen3-8b f16 row blocks", 4, 2048, synth.Qwen3_8B(), Float16, 16_381_700_096, 2_489_548_800},
		// f32: 4 bytes each; working: gate_proj's float32 scratch, 12,288 · 4,096 · 4.
		{"qwen3-8b f32 row blocks", 4, 2048, synth.Qwen3_8B(), Float32, 32_763_400_192, 201_326_592},
		// 0.6B, tied: 596,049,920 + 14 · 1,024 padding.
		{"qwen3-0.6b f32 row blocks", 4, 2048, synth.Qwen3_0_6B(), Float32, 4 * (596_049_920 + 14*1024), 4 * 3072 * 1024},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withLayout(t, tt.blocks, tt.headRows)
			cfg, err := QwenConfig(tt.like.ConfigJSON())
			if err != nil {
				t.Fatal(err)
			}
			need := MemoryNeeded(cfg, tt.dtype, goBackend(t), 40)
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
