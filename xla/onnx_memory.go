package xla

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// onnxMemory is how octlm keeps ONNX Runtime's memory to what a step needs. ONNX Runtime's CPU
// arena keeps every buffer a session has used, for every compiled graph (one per chunk length,
// attended length and cache bucket), and glibc's malloc, with an arena per thread and a
// threshold for mapping large blocks that rises with every large block freed, keeps freed
// blocks too. `octlm parity --model testdata/tiny-qwen3-long` (40,960 positions, about a
// hundred graphs) peaked at 7.9–8.7 GiB as compute-onnx sets ONNX Runtime up, grew past 1.9 GiB
// with the arena off alone (26 malloc arenas of 64 MiB and a 450 MiB heap, still rising when
// stopped) and peaked at 1.90 GiB with both, parity unchanged (4.0e-5); the price is page faults
// on fresh blocks, a fifth of that run's CPU time in the kernel (Intel Xeon, 2 cores, ONNX
// Runtime 1.30.0, 2026-12-01; docs/performance.md).
var onnxMemory = struct {
	// options are the compute-onnx options added unless the backend name sets the same key.
	options []string
	// arenas and mmapThreshold bound glibc's malloc (M_ARENA_MAX, M_MMAP_THRESHOLD) before
	// ONNX Runtime starts its threads, unless $GLIBC_TUNABLES or $MALLOC_ARENA_MAX is set.
	arenas, mmapThreshold int
}{options: []string{"cpu_mem_arena=false"}, arenas: 2, mmapThreshold: 256 << 10}

var boundHeapOnce sync.Once

// onnxMemoryOptions adds onnxMemory's options that opts does not set to opts, says so in reason,
// and bounds the C heap once per process; env lists the heap settings made.
func onnxMemoryOptions(opts, reason string) (newOpts, newReason string, env []string) {
	set := map[string]bool{}
	for _, o := range strings.Split(opts, ",") {
		key, _, _ := strings.Cut(strings.TrimSpace(o), "=")
		key = strings.ToLower(key)
		switch key {
		case "cpumemarena", "no_cpu_mem_arena":
			key = "cpu_mem_arena"
		}
		set[key] = true
	}
	var added []string
	for _, d := range onnxMemory.options {
		if key, _, _ := strings.Cut(d, "="); !set[key] {
			added = append(added, d)
		}
	}
	if len(added) > 0 {
		if opts != "" {
			opts += ","
		}
		opts += strings.Join(added, ",")
		reason += "; " + strings.Join(added, ",") + " (ONNX Runtime's arena would keep every graph's buffers)"
	}
	boundHeapOnce.Do(func() {
		if os.Getenv("GLIBC_TUNABLES") == "" && os.Getenv("MALLOC_ARENA_MAX") == "" && boundNativeHeap() {
			env = append(env, fmt.Sprintf("malloc M_ARENA_MAX=%d M_MMAP_THRESHOLD=%d", onnxMemory.arenas, onnxMemory.mmapThreshold))
		}
	})
	return opts, reason, env
}
