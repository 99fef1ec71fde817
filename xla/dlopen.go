package xla

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

// The leading fields of PJRT_Api (pjrt_c_api.h), whose layout every PJRT C API version keeps.
typedef struct {
	size_t struct_size;
	void* extension_start;
	int major_version;
	int minor_version;
} octlm_pjrt_api_version;

typedef struct {
	size_t struct_size;
	void* extension_start;
	octlm_pjrt_api_version pjrt_api_version;
} octlm_pjrt_api_head;

typedef const octlm_pjrt_api_head* (*octlm_get_pjrt_api)(void);

static const octlm_pjrt_api_head* octlm_call_get_pjrt_api(void* fn) {
	return ((octlm_get_pjrt_api)fn)();
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// dlopen loads a shared library by full path and keeps it loaded for the life of the process
// (RTLD_NOW|RTLD_LOCAL, as Python's ctypes does for JAX). A truncated file is refused first
// (checkLibrary): loading it would end the process with SIGBUS.
func dlopen(path string) error {
	if err := checkLibrary(path); err != nil {
		return err
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	C.dlerror()
	if h := C.dlopen(cpath, C.RTLD_NOW|C.RTLD_LOCAL); h == nil {
		return errors.New(C.GoString(C.dlerror()))
	}
	return nil
}

// probePlugin loads a plugin file the way go-xla will, checks that it exports GetPjrtApi and returns
// the PJRT C API version the plugin was built with, so a bad file gets a plain error here instead of
// go-xla's (or a crash). A good plugin stays loaded: go-xla's own dlopen then finds it in place.
func probePlugin(path string) (major, minor int, err error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	C.dlerror()
	h := C.dlopen(cpath, C.RTLD_LAZY|C.RTLD_LOCAL)
	if h == nil {
		return 0, 0, fmt.Errorf("cannot load it: %s (if a library is missing, `ldd %s` lists what it needs)", C.GoString(C.dlerror()), path)
	}
	sym := C.CString("GetPjrtApi")
	defer C.free(unsafe.Pointer(sym))
	C.dlerror()
	fn := C.dlsym(h, sym)
	if fn == nil {
		msg := C.GoString(C.dlerror())
		C.dlclose(h)
		return 0, 0, fmt.Errorf("not a PJRT plugin: no GetPjrtApi symbol (%s)", msg)
	}
	api := C.octlm_call_get_pjrt_api(fn)
	if api == nil {
		return 0, 0, errors.New("its GetPjrtApi returned no API table")
	}
	return int(api.pjrt_api_version.major_version), int(api.pjrt_api_version.minor_version), nil
}
