package train

import (
	"bufio"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkLoRATrainStep measures training speed beside eager PyTorch's (the torch-lora-bench
// peer; docs/finetune.md has the side-by-side): LoRA r 16 (alpha 32) on all seven projections,
// batch 1 of 256 random tokens, on the checkpoint folder in $OCTLM_TRAIN_BENCH_MODEL (e.g. `octlm synth --like qwen3-0.6b --out /tmp/q06`; skipped when
// unset). One step is a forward, a backward and the AdamW update; the first (compilation) is not
// timed. Reports train tokens/s and the process's peak RSS. $OCTLM_TRAIN_BENCH_BASE picks the base
// dtype (f32, bf16 or bf16-stored, as torch-lora-bench's --base-dtype), and
// $OCTLM_TRAIN_BENCH_RECOMPUTE=1 recomputes the layers. Run it alone, on a quiet machine:
//
//	OCTLM_TRAIN_BENCH_MODEL=/tmp/q06 go test ./train -run XXX -bench LoRATrainStep -benchtime 4x
func BenchmarkLoRATrainStep(b *testing.B) {
	dir := os.Getenv("OCTLM_TRAIN_BENCH_MODEL")
	if dir == "" {
		b.Skip("set OCTLM_TRAIN_BENCH_MODEL to a checkpoint folder")
	}
	const seq = 256
	model, err := OpenModel(dir, ModelOptions{RecomputeLayers: os.Getenv("OCTLM_TRAIN_BENCH_RECOMPUTE") == "1"})
	if err != nil {
		b.Fatal(err)
	}
	vocab := Vocab(model)
	rng := rand.New(rand.NewPCG(1, 1))
	rows := make([]Example, 4)
	for i := range rows {
		ids := make([]int32, seq)
		for j := range ids {
			ids[j] = int32(rng.IntN(vocab))
		}
		rows[i] = Example{IDs: ids, Labels: ids}
	}
	s := Settings{Steps: b.N + 1, Batch: 1, GradAccum: 1, LR: 1e-4, Schedule: Schedule{Kind: "constant", Total: b.N + 1},
		AdamW: AdamW{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, PadMultiple: 8, Base: BaseDType(os.Getenv("OCTLM_TRAIN_BENCH_BASE")),
		LoRA: LoRASettings{R: 16, Alpha: 32, Targets: strings.Split("q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj", ",")}}
	weights, closeWeights, err := CheckpointWeights(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	be, err := goBackend()
	if err != nil {
		b.Skip(err)
	}
	tr, err := NewTrainer(model, be, weights, rows, s, nil)
	closeWeights()
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.RunStep(false); err != nil { // compiles the graph
		b.Fatal(err)
	}
	b.StartTimer()
	for b.Loop() {
		if _, err := tr.RunStep(false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(seq*b.N)/b.Elapsed().Seconds(), "train_tokens/s")
	b.ReportMetric(float64(peakRSS())/(1<<20), "peak_RSS_MiB")
}

// peakRSS is the process's peak resident set (VmHWM), in bytes; 0 where unknown.
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
