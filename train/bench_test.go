package train

import (
	"bufio"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"
)

// BenchmarkLoRATrainStep measures training speed beside eager PyTorch's (the torch-lora-bench
// peer; docs/finetune.md has the side-by-side): LoRA r 16 (alpha 32) on all seven projections,
// batch 1 of 256 random tokens, on the checkpoint folder in $OCTLM_TRAIN_BENCH_MODEL (e.g.
// `octlm synth --like qwen3-0.6b --out /tmp/q06`; skipped when unset). One step is a forward, a
// backward and the AdamW update; the first (compilation) is not timed. Reports train tokens/s,
// the process's peak RSS and the CPU seconds a step used. $OCTLM_TRAIN_BENCH_BASE picks the base
// dtype (f32, bf16 or bf16-stored, as torch-lora-bench's --base-dtype),
// $OCTLM_TRAIN_BENCH_RECOMPUTE=1 recomputes the layers, and $OCTLM_TRAIN_BENCH_FULL=1 trains every
// weight instead (a full fine-tune, AdamW's two moments for each). Run it alone, on a quiet
// machine (bench/train.sh runs it alternated with PyTorch):
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
		Full: os.Getenv("OCTLM_TRAIN_BENCH_FULL") == "1",
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
	cpu0 := cpuSeconds()
	b.StartTimer()
	for b.Loop() {
		if _, err := tr.RunStep(false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(seq*b.N)/b.Elapsed().Seconds(), "train_tokens/s")
	b.ReportMetric(float64(peakRSS())/(1<<20), "peak_RSS_MiB")
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu_s/step")
}

// cpuSeconds is the user and system CPU time the process has used: beside the wall time, a
// measure that other work on a shared machine disturbs less.
func cpuSeconds() float64 {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return float64(u.Utime.Nano()+u.Stime.Nano()) / 1e9
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

// BenchmarkMatMulFLOPs is the roofline BenchmarkLoRATrainStep is read against: the float32
// FLOP/s of one large product on the same backend (2·M·K·N FLOPs a call, the operands graph
// inputs as the training graph's weights are), for a square 2048³ product and the training
// step's widest shape (256 rows by a 1024 → 3072 projection, as stored [out, in]).
//
//	go test ./train -run XXX -bench MatMulFLOPs -benchtime 10x
func BenchmarkMatMulFLOPs(b *testing.B) {
	be, err := goBackend()
	if err != nil {
		b.Skip(err)
	}
	for _, c := range []struct {
		name    string
		m, k, n int
		stored  bool // the weight [n, k], contracted on its last axis, as nn.Linear stores it
	}{{"square2048", 2048, 2048, 2048, false}, {"rows256x1024x3072", 256, 1024, 3072, true}} {
		b.Run(c.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(5, 6))
			random := func(n int) []float32 {
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(rng.NormFloat64())
				}
				return v
			}
			wDims, wAxis := []int{c.k, c.n}, 0
			if c.stored {
				wDims, wAxis = []int{c.n, c.k}, 1
			}
			x := tensors.FromFlatDataAndDimensions(random(c.m*c.k), c.m, c.k)
			w := tensors.FromFlatDataAndDimensions(random(c.k*c.n), wDims...)
			exec, err := NewExec(be, func(x, w *Node) *Node { return DotGeneral(x, []int{1}, nil, w, []int{wAxis}, nil) })
			if err != nil {
				b.Fatal(err)
			}
			defer exec.Finalize()
			run := func() {
				out, err := exec.Call(x, w)
				if err != nil {
					b.Fatal(err)
				}
				out[0].FinalizeAll()
			}
			run()
			b.ResetTimer()
			for b.Loop() {
				run()
			}
			b.ReportMetric(2*float64(c.m*c.k*c.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
