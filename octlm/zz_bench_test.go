package octlm

import (
	"testing"
	"time"
)

func BenchmarkZZGoOnly(b *testing.B) {
	dir := benchCheckpointDir(b)
	for _, dt := range []DType{Float32, BFloat16} {
		b.Run(string(dt), func(b *testing.B) {
			d := newDecoder(b, layoutCase{"go", goLayout, dt, nil}.load(b, dir))
			var took time.Duration
			for b.Loop() {
				took += d.step()
			}
			b.ReportMetric(float64(took.Microseconds())/1000/float64(b.N), "ms/step")
		})
	}
}
