//go:build !linux

package hugepage

import (
	"errors"
	"unsafe"
)

// Size is the transparent huge page size: 0 here, where octlm does not ask for them.
func Size() uintptr { return 0 }

func advise(uintptr, uintptr) {}

// Marked reports whether the memory at p carries the huge page advice: never here.
func Marked(unsafe.Pointer) (bool, error) {
	return false, errors.New("hugepage: no huge page advice on this system")
}
