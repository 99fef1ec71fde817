package bench

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/octlm/octlm/units"
)

// WriteText prints r as the aligned table the README shows.
func (r Result) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	simd := "GOEXPERIMENT=simd"
	if !r.SIMD {
		simd = "built WITHOUT GOEXPERIMENT=simd"
	}
	gb := func(b float64) string { return fmt.Sprintf("%.2f GB/s", b/1e9) }
	rows := [][2]string{
		{"date", r.Date},
		{"machine", fmt.Sprintf("%s; GOMAXPROCS %d; load average %.2f", r.Machine, r.GOMAXPROCS, r.LoadAverage)},
		{"build", fmt.Sprintf("%s, %s", r.GoVersion, simd)},
		{"model", fmt.Sprintf("%s (%d layers, hidden %d, vocab %d)", r.Model, r.Layers, r.Hidden, r.Vocab)},
		{"backend", fmt.Sprintf("%s, dtype %s", r.Backend, r.DType)},
		{"plain read", fmt.Sprintf("%s in %.2f s: %s", units.Bytes(r.CheckpointBytes), r.PlainReadSeconds, gb(r.PlainReadBytesPerSecond))},
		{"load", fmt.Sprintf("%.2f s: %s, %.2f of the plain read", r.LoadSeconds, gb(r.LoadBytesPerSecond), r.LoadReadRatio)},
		{"resident weights", units.Bytes(r.WeightBytes)},
		{"peak RSS", fmt.Sprintf("%s after the load (%.2f × the weights, %s of it on huge pages), %s in all", units.Bytes(r.LoadPeakRSSBytes), r.LoadPeakRSSWeightRatio, units.Bytes(r.HugePageBytes), units.Bytes(r.PeakRSSBytes))},
		{"compile", fmt.Sprintf("%.2f s for %d graphs", r.CompileSeconds, r.CompiledGraphs)},
		{"depth", r.depthText()},
		{"prefill", fmt.Sprintf("%d tokens in %.3f s: %.1f tokens/s (%.2f cores busy)%s", r.PromptTokens, r.PrefillSeconds, r.PrefillTokensPerSecond, r.PrefillCores, r.spread(r.PrefillTokensPerSecondMedian))},
		{"time to first token", fmt.Sprintf("%.3f s (%.3f s on the first call, compile included)", r.TimeToFirstTokenSeconds, r.ColdTimeToFirstToken)},
		{"decode", fmt.Sprintf("%d tokens: %.1f ms/token, %.2f tokens/s (%.2f cores busy)%s", r.DecodeTokens, r.DecodeMsPerToken, r.DecodeTokensPerSecond, r.DecodeCores, r.spread(r.DecodeTokensPerSecondMedian))},
		{"KV cache", fmt.Sprintf("%s per position (%s keys and values); %s of room (whole blocks) for the %d positions of depth, prompt and decode",
			units.Bytes(r.KVCacheBytesPerPosition), r.KVDType, units.Bytes(r.KVCacheBytes), r.Depth+r.PromptTokens+r.DecodeTokens)},
		{"read bandwidth", gb(r.ReadBandwidthBytesPerSec) + " (streaming read, all cores)"},
		{"roofline", fmt.Sprintf("%.2f: %s/token × %.2f tokens/s = %s of %s", r.RooflineRatio,
			units.Bytes(r.WeightBytesPerToken), r.DecodeTokensPerSecond,
			gb(float64(r.WeightBytesPerToken)*r.DecodeTokensPerSecond), gb(r.ReadBandwidthBytesPerSec))},
	}
	if s := r.DecodeSteps; s != nil {
		rows = slices.Insert(rows, slices.IndexFunc(rows, func(row [2]string) bool { return row[0] == "decode" })+1, [2]string{"decode step",
			fmt.Sprintf("products %.1f ms (their weights read at %s), attention %.1f ms, other parts %.1f ms, between them %.1f ms, outside the graph %.1f ms",
				s.ProductsMs, gb(s.ProductReadBytesPerSecond), s.AttentionMs, s.PiecesMs, s.GraphMs-s.ProductsMs-s.AttentionMs-s.PiecesMs, r.DecodeMsPerToken-s.GraphMs)})
	}
	if r.Adapter != "" {
		rows = slices.Insert(rows, 4, [2]string{"adapter", r.Adapter + " (LoRA, unmerged)"})
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return r.writeBatches(w)
}

// writeBatches prints the batched-decode table, when there is one.
func (r Result) writeBatches(w io.Writer) error {
	if len(r.Batches) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nbatched decode: B sequences decoded together (NextBatch), %d tokens each after the prompt\n", r.Batches[0].DecodeTokens)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	timed := r.Batches[0].Steps != nil
	head := "batch\ttokens/s (all sequences)\tms/step\tspeed-up over B=1\t"
	if timed {
		head += "products ms\tweights GB/s\tattention ms\tother parts ms\t"
	}
	fmt.Fprintln(tw, head)
	for _, row := range r.Batches {
		fmt.Fprintf(tw, "%d\t%.2f\t%.1f\t%.2f×\t", row.Batch, row.DecodeTokensPerSecond, row.DecodeMsPerStep, row.SpeedUp)
		if s := row.Steps; timed && s != nil {
			fmt.Fprintf(tw, "%.1f\t%.2f\t%.1f\t%.1f\t", s.ProductsMs, s.ProductReadBytesPerSecond/1e9, s.AttentionMs, s.PiecesMs)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// depthText says how many positions the cache held before the prompt, and how they got there.
func (r Result) depthText() string {
	switch {
	case r.Depth == 0:
		return "0 (an empty KV cache before the prompt)"
	case r.DepthFill == FillZeros:
		return fmt.Sprintf("%d positions in the KV cache before the prompt: zero keys and values, no prefill", r.Depth)
	}
	return fmt.Sprintf("%d positions in the KV cache before the prompt, filled by a prefill in %.1f s (%.1f tokens/s)",
		r.Depth, r.DepthFillSeconds, float64(r.Depth)/r.DepthFillSeconds)
}

// spread says, after more than one run, that the speed shown is the best and what the median was.
func (r Result) spread(median float64) string {
	if r.Reps <= 1 {
		return ""
	}
	return fmt.Sprintf("; best of %d runs, median %.2f", r.Reps, median)
}
