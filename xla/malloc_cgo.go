//go:build linux && cgo

package xla

/*
#include <malloc.h>

// octlm_bound_malloc sets glibc's malloc to hand large blocks back to the system: at most
// `arenas` arenas, and blocks of `mmap_threshold` bytes or more mapped and unmapped on their
// own. It returns 1 when both settings took, 0 where malloc.h lacks them (another C library).
static int octlm_bound_malloc(int arenas, int mmap_threshold) {
#if defined(M_ARENA_MAX) && defined(M_MMAP_THRESHOLD)
	return mallopt(M_ARENA_MAX, arenas) == 1 && mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1;
#else
	return 0;
#endif
}
*/
import "C"

// boundNativeHeap makes the C heap hand freed blocks back to the system (see onnxMemory): it
// reports whether the C library took the settings.
func boundNativeHeap() bool {
	return C.octlm_bound_malloc(C.int(onnxMemory.arenas), C.int(onnxMemory.mmapThreshold)) == 1
}
