//go:build linux && cgo

package xla

/*
#include <malloc.h>
#include <stdlib.h>

// The C heap's settings for ONNX Runtime (see onnxMemory): one malloc arena, and blocks of 4 MiB
// or more mapped and unmapped on their own.
#define OCTLM_MALLOC_ARENAS 1
#define OCTLM_MALLOC_MMAP_THRESHOLD (4 << 20)

static int octlm_malloc_bounded;

// octlm_bound_malloc runs when the program starts, before any thread: glibc takes M_ARENA_MAX
// for good only then (set later, from Go, the same settings left a 128-token run on Qwen3-0.6B
// 0.07–0.15 GiB higher). $GLIBC_TUNABLES or $MALLOC_ARENA_MAX, when set, win.
__attribute__((constructor)) static void octlm_bound_malloc(void) {
#if defined(M_ARENA_MAX) && defined(M_MMAP_THRESHOLD)
	if (getenv("GLIBC_TUNABLES") != NULL || getenv("MALLOC_ARENA_MAX") != NULL) {
		return;
	}
	octlm_malloc_bounded = mallopt(M_ARENA_MAX, OCTLM_MALLOC_ARENAS) == 1 &&
		mallopt(M_MMAP_THRESHOLD, OCTLM_MALLOC_MMAP_THRESHOLD) == 1;
#endif
}

static int octlm_malloc_was_bounded(void) { return octlm_malloc_bounded; }
*/
import "C"

// nativeHeapBound reports whether the C heap was bounded when the program started (see
// onnxMemory), and with which settings.
func nativeHeapBound() (arenas, mmapThreshold int, ok bool) {
	return C.OCTLM_MALLOC_ARENAS, C.OCTLM_MALLOC_MMAP_THRESHOLD, C.octlm_malloc_was_bounded() == 1
}
