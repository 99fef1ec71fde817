package xla

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
)

// goExecutors is how many graph executors the pure-Go backend should run at once on cores
// cores (GOMAXPROCS) with a worker pool of parallelism slots (0: compute's default, 2 × cores):
// one per core, but no more than leave a product the slots for one worker per core, and at
// most compute's own default of 8.
//
// compute v0.1.14 runs a graph's ready operations on up to num_executors goroutines (8 by
// default), each but the caller holding one of its worker pool's slots for the whole run, and a
// product fans out over the slots left. On 2 cores the 7 executors it asked for got 3 of the 4
// slots, so every product ran on one worker: `octlm bench` reported 1.0–1.1 cores busy at
// decode and prefill. With one executor per core (AMD Zen 5, 2 cores, a random Qwen3-0.6B,
// float32, alternated runs, 2026-12-04): prefill 197–199 → 303–324 tokens/s, decode 5.27 →
// 6.6–6.9 tokens/s (8.4–8.8 with the products padded to 8 rows, octlm/engine.go's goPadRows),
// LoRA training 62–63 → 98–103 tokens/s at 0.93× the peak RSS (BenchmarkLoRATrainStep).
// ops_sequential (no executor beside the caller) measured 297–310 / 5.3 / 85–89: the products
// are not the whole step, and executors run the rest side by side.
func goExecutors(cores, parallelism int) int {
	cores = max(cores, 1)
	slots := parallelism
	if slots <= 0 {
		slots = 2 * cores
	}
	return max(1, min(cores, slots-min(slots, cores)+1, 8))
}

// goExecutorOptions adds num_executors=goExecutors(…) to the pure-Go backend's options opts
// unless they set num_executors or ops_sequential, and says so in reason.
func goExecutorOptions(opts, reason string) (newOpts, newReason string) {
	parallelism := 0
	for _, o := range strings.Split(opts, ",") {
		key, val, _ := strings.Cut(strings.TrimSpace(o), "=")
		switch key {
		case "num_executors", "ops_sequential":
			return opts, reason
		case "parallelism":
			parallelism, _ = strconv.Atoi(strings.TrimSpace(val))
		}
	}
	return withOption(opts, reason, fmt.Sprintf("num_executors=%d", goExecutors(runtime.GOMAXPROCS(0), parallelism)),
		"one graph executor per core leaves the cores to each product")
}
