package octlm

import (
	"math"
	"strings"
	"testing"
)

func TestRoPE(t *testing.T) {
	c1, s1 := float32(math.Cos(1)), float32(math.Sin(1))
	c2, s2 := float32(math.Cos(2*0.01)), float32(math.Sin(2*0.01))
	tests := []struct {
		name      string
		x         [][]float32
		positions []int32
		split     bool
		want      [][]float32
	}{
		{"position 0 is the identity", [][]float32{{1, 2, 3, 4}}, []int32{0}, true, [][]float32{{1, 2, 3, 4}}},
		// head width 4, base 10⁴: θ₀ = 1, θ₁ = 0.01.
		{"split: channel 0 turns with channel 2", [][]float32{{1, 0, 0, 0}}, []int32{1}, true, [][]float32{{c1, 0, s1, 0}}},
		{"neighbours: channel 0 turns with channel 1", [][]float32{{1, 0, 0, 0}}, []int32{1}, false, [][]float32{{c1, s1, 0, 0}}},
		{"split: channel 3 turns with channel 1 by 2·θ₁", [][]float32{{0, 0, 0, 1}}, []int32{2}, true, [][]float32{{0, -s2, 0, c2}}},
		{"one vector per position", [][]float32{{1, 0, 0, 0}, {1, 0, 0, 0}}, []int32{0, 1}, false, [][]float32{{1, 0, 0, 0}, {c1, s1, 0, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RoPE(goBackend(t), tt.x, tt.positions, 1e4, tt.split)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tt.want {
				for c := range tt.want[i] {
					if d := math.Abs(float64(got[i][c] - tt.want[i][c])); d > 1e-6 {
						t.Errorf("vector %d channel %d = %g, want %g", i, c, got[i][c], tt.want[i][c])
					}
				}
			}
		})
	}
}

func TestRoPERefusesBadInput(t *testing.T) {
	tests := []struct {
		name      string
		x         [][]float32
		positions []int32
		base      float64
		want      string
	}{
		{"no vectors", nil, nil, 1e4, "0 vectors and 0 positions"},
		{"positions missing", [][]float32{{1, 2}}, nil, 1e4, "1 vectors and 0 positions"},
		{"odd width", [][]float32{{1, 2, 3}}, []int32{0}, 1e4, "head width 3"},
		{"ragged", [][]float32{{1, 2}, {1, 2, 3, 4}}, []int32{0, 1}, 1e4, "vector 1 has 4 channels"},
		{"base 1", [][]float32{{1, 2}}, []int32{0}, 1, "base 1"},
		{"base NaN", [][]float32{{1, 2}}, []int32{0}, math.NaN(), "base NaN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := RoPE(goBackend(t), tt.x, tt.positions, tt.base, true)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("RoPE error %v, want one saying %q", err, tt.want)
			}
		})
	}
}
