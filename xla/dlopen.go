package xla

// #cgo LDFLAGS: -ldl
// #include <dlfcn.h>
// #include <stdlib.h>
import "C"

import (
	"errors"
	"fmt"
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

// probePlugin loads a plugin file the way go-xla will and checks that it exports GetPjrtApi, so a bad
// file gets a plain error here instead of go-xla's. A good plugin stays loaded: go-xla's own dlopen then
// finds it in place.
func probePlugin(path string) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	C.dlerror()
	h := C.dlopen(cpath, C.RTLD_LAZY|C.RTLD_LOCAL)
	if h == nil {
		return fmt.Errorf("cannot load it: %s (if a library is missing, `ldd %s` lists what it needs)", C.GoString(C.dlerror()), path)
	}
	sym := C.CString("GetPjrtApi")
	defer C.free(unsafe.Pointer(sym))
	C.dlerror()
	if C.dlsym(h, sym) == nil {
		msg := C.GoString(C.dlerror())
		C.dlclose(h)
		return fmt.Errorf("not a PJRT plugin: no GetPjrtApi symbol (%s)", msg)
	}
	return nil
}
