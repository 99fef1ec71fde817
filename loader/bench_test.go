package loader_test

import (
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/octlm/octlm/internal/sysinfo"
	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm/synth"
)

// benchCheckpoint returns a checkpoint folder for the load benchmarks:
// $OCTLM_BENCH_CHECKPOINT if set, else a random one written to b.TempDir() whose size is
// $OCTLM_BENCH_SIZE: "small" (default, about 40 MiB) or "full" (Qwen3-0.6B, 1.40 GiB).
func benchCheckpoint(b *testing.B) string {
	if dir := os.Getenv("OCTLM_BENCH_CHECKPOINT"); dir != "" {
		return dir
	}
	cfg := synth.QwenLike{
		VocabSize: 8192, HiddenSize: 512, NumLayers: 4, NumHeads: 8, NumKVHeads: 4, HeadDim: 64,
		IntermediateSize: 1536, MaxPositionEmbeddings: 40960, RopeTheta: 1e6, RMSNormEps: 1e-6,
	}
	switch size := os.Getenv("OCTLM_BENCH_SIZE"); size {
	case "", "small":
	case "full":
		cfg = synth.Qwen3_0_6B()
	default:
		b.Fatalf("OCTLM_BENCH_SIZE=%q: want small or full", size)
	}
	dir := b.TempDir()
	if err := synth.WriteWith(dir, cfg, synth.Options{Seed: 1, NoTokenizer: true}); err != nil {
		b.Fatal(err)
	}
	return dir
}

// sequentialRead reads every file of the checkpoint front to back with a 1 MiB buffer: the
// floor a loader is measured against.
func sequentialRead(b *testing.B, c *loader.Checkpoint) int64 {
	var n int64
	buf := make([]byte, 1<<20)
	for _, f := range c.Files() {
		fh, err := os.Open(f.Path())
		if err != nil {
			b.Fatal(err)
		}
		m, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{fh}, buf)
		fh.Close()
		if err != nil {
			b.Fatal(err)
		}
		n += m
	}
	return n
}

// BenchmarkLoadFloat32 streams every tensor of a checkpoint into float32 destination tensors
// (allocated and touched once, as a model's weights would be) and, in the same iteration, reads
// the same files sequentially. It reports both throughputs in file bytes per second, their
// ratio (load / sequential read; goal >= 0.8) and the peak resident memory while streaming
// relative to the destination size (goal < 1.1: no second copy).
func BenchmarkLoadFloat32(b *testing.B) {
	dir := benchCheckpoint(b)
	c, err := loader.OpenCheckpoint(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	runtime.GC()
	debug.FreeOSMemory()
	base := sysinfo.RSS()
	var dsts [][]float32
	var entries []loader.Entry
	var dstBytes, fileBytes int64
	for e, err := range c.Tensors() {
		if err != nil {
			b.Fatal(err)
		}
		d := make([]float32, e.Info.NumElements())
		for i := range d { // fault the pages in, as a model's weights are resident
			d[i] = 0
		}
		dsts = append(dsts, d)
		entries = append(entries, e)
		dstBytes += int64(4 * len(d))
	}
	for _, f := range c.Files() {
		fileBytes += f.Size()
	}
	sequentialRead(b, c) // warm the page cache for both
	var seq, load time.Duration
	var peak int64
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		sequentialRead(b, c)
		t1 := time.Now()
		sysinfo.ResetPeakRSS()
		for i, e := range entries {
			if err := e.File.ReadFloat32(e.Info, dsts[i]); err != nil {
				b.Fatal(err)
			}
		}
		t2 := time.Now()
		peak = max(peak, sysinfo.PeakRSS())
		seq += t1.Sub(t0)
		load += t2.Sub(t1)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(fileBytes)/(load.Seconds()/n)/1e6, "load_MB/s")
	b.ReportMetric(float64(fileBytes)/(seq.Seconds()/n)/1e6, "seqread_MB/s")
	b.ReportMetric(seq.Seconds()/load.Seconds(), "load/seqread")
	if peak > 0 && base > 0 {
		b.ReportMetric(float64(peak-base)/float64(dstBytes), "peakRSS/dst")
	}
	b.ReportMetric(float64(dstBytes)/(1<<20), "dst_MiB")
	runtime.KeepAlive(dsts)
}

// BenchmarkReadRawBF16 reads every tensor's raw BF16 bytes (the pass-through path).
func BenchmarkReadRawBF16(b *testing.B) {
	dir := benchCheckpoint(b)
	c, err := loader.OpenCheckpoint(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var total int64
	bufs := map[string][]byte{}
	for e := range c.Tensors() {
		bufs[e.Info.Name] = make([]byte, e.Info.Size)
		total += e.Info.Size
	}
	b.SetBytes(total)
	for b.Loop() {
		for e := range c.Tensors() {
			if err := e.File.ReadRaw(e.Info, bufs[e.Info.Name]); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkOpenCheckpoint measures header validation alone.
func BenchmarkOpenCheckpoint(b *testing.B) {
	dir := benchCheckpoint(b)
	for b.Loop() {
		c, err := loader.OpenCheckpoint(dir)
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}
