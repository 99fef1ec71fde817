package xla

// #cgo LDFLAGS: -ldl
// #include <dlfcn.h>
// #include <stdlib.h>
import "C"

import (
	"errors"
	"unsafe"
)

// dlopen loads a shared library by full path and keeps it loaded for the life of the process
// (RTLD_NOW|RTLD_LOCAL, as Python's ctypes does for JAX).
func dlopen(path string) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	C.dlerror()
	if h := C.dlopen(cpath, C.RTLD_NOW|C.RTLD_LOCAL); h == nil {
		return errors.New(C.GoString(C.dlerror()))
	}
	return nil
}
