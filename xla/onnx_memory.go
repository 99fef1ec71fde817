package xla

import (
	"fmt"
	"strings"
)

// onnxMemory is how octlm keeps ONNX Runtime's memory to what a step needs. ONNX Runtime's CPU
// arena keeps every buffer a session has used, for every compiled graph (one per chunk length,
// attended length and cache bucket), and glibc's malloc, with an arena per thread and a
// threshold for mapping large blocks that rises with every large block freed, keeps freed
// blocks too. `octlm parity --model testdata/tiny-qwen3-long` (40,960 positions) peaked at
// 7.9–8.7 GiB as compute-onnx sets ONNX Runtime up and grew past 1.9 GiB with the arena off
// alone (26 malloc arenas of 64 MiB, still rising when stopped).
//
// So the arena is off, and when the program starts (xla/malloc_cgo.go) glibc's malloc is set
// to one arena, with blocks of 4 MiB or more mapped and unmapped on their own. The threshold
// trades decode speed for memory: a step's buffers under it (at short depth every per-layer
// buffer of Qwen3-0.6B, the KV cache's included) are reused from the heap, those over it are
// mapped and zero-filled by page faults afresh on every step. Measured alternated on an Intel
// Xeon (2 cores, ONNX Runtime 1.30.0), a random Qwen3-0.6B, prompt 128 and 32 decoded tokens /
// depth 4,096:
//
//	256 KiB, 2 arenas (octlm before):   7.37–7.70 tokens/s, 2.46 GiB (1.11× the weights) / 1.54 tokens/s, 4.15 GiB
//	4 MiB, 1 arena (now):               8.28–8.59 tokens/s, 2.46 GiB / 1.55–1.56 tokens/s, 4.15–4.17 GiB
//	glibc's rising threshold, 1 arena:  8.79–9.0 tokens/s, 2.46 GiB / 1.1–1.7 tokens/s, 6.9–8.6 GiB
//
// The long fixture peaks at 0.9 GiB (256 KiB), 1.02 GiB (4 MiB) and 1.35 GiB (rising
// threshold), parity unchanged (4.0e-5). The settings are the C heap's, for the whole process;
// the pure-Go backend does not use it, XLA's plugins were not measured with it.
//
// ONNX Runtime's memory pattern (on by default) plans each session's intermediate buffers into
// one block on its first run and allocates that block on every run; off, each buffer is
// allocated when it is made and freed at its last use. On an AMD Zen 5 (2 cores, a random
// Qwen3-0.6B, prompt 128, alternated, 2026-12-04) off peaked at 1.107–1.108× the weights against
// 1.124–1.125× (2.64 against 2.68 GB), and prefilled (309–347 against 309–322 tokens/s in two
// alternated sets), decoded one sequence (12.9–13.5 tokens/s), 8 together (43–45) and at depth
// 4,096 (8.2–8.8, 1.062× weights + cache either way) alike.
var onnxMemory = []struct {
	option, why string // added unless the backend name sets its key; why goes on the backend line
}{
	{"cpu_mem_arena=false", "ONNX Runtime's arena would keep every graph's buffers"},
	{"mem_pattern=false", "its planned block would hold a whole step's buffers"},
}

// onnxMemoryOptions adds onnxMemory's options that opts does not set to opts and says so in
// reason, each with its why; env lists the C heap's settings made when the program started.
func onnxMemoryOptions(opts, reason string) (newOpts, newReason string, env []string) {
	set := map[string]bool{}
	for _, o := range strings.Split(opts, ",") {
		key, _, _ := strings.Cut(strings.TrimSpace(o), "=")
		key = strings.ToLower(key)
		switch key {
		case "cpumemarena", "no_cpu_mem_arena":
			key = "cpu_mem_arena"
		case "mempattern", "no_mem_pattern":
			key = "mem_pattern"
		}
		set[key] = true
	}
	for _, d := range onnxMemory {
		if key, _, _ := strings.Cut(d.option, "="); !set[key] {
			opts, reason = withOption(opts, reason, d.option, d.why)
		}
	}
	if arenas, threshold, ok := nativeHeapBound(); ok {
		env = append(env, fmt.Sprintf("malloc M_ARENA_MAX=%d M_MMAP_THRESHOLD=%d", arenas, threshold))
	}
	return opts, reason, env
}
