// Package hugepage asks the operating system to back long-lived memory that is read whole, over
// and over (a model's weights), with transparent huge pages.
//
// A decode step streams every weight from memory. With the kernel's 4 KiB pages each 4 KiB of a
// 2.4 GB stream is a TLB miss and a page walk; with 2 MiB pages Qwen3-0.6B decoded 1–22% faster
// on a 2-core Zen 5 guest (docs/performance.md, "Weights on huge pages"). Linux backs anonymous
// memory with huge pages by itself only where /sys/kernel/mm/transparent_hugepage/enabled says
// "always"; under "madvise", the common default, only the ranges a program marks with
// madvise(2). Go's heap is never marked, so octlm marks the buffers it will stream.
//
// The price is paid once, when the memory is first touched: on a virtual machine whose host
// reclaims the guest's free huge pages (free page reporting), loading Qwen3-0.6B in float32 took
// 3.4 s instead of 1.4. $OCTLM_HUGE_PAGES=off keeps small pages (CheckEnv).
package hugepage

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"unsafe"
)

// EnvVar turns the advice off when set to off (or 0, false, no); on, 1, true, yes or unset
// leave it on.
const EnvVar = "OCTLM_HUGE_PAGES"

// ParseEnv reads a value of EnvVar: whether it leaves the advice on, or an error naming the
// variable for anything else.
func ParseEnv(value string) (on bool, err error) {
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "", "on", "1", "true", "yes":
		return true, nil
	case "off", "0", "false", "no":
		return false, nil
	}
	return true, fmt.Errorf("hugepage: $%s=%q: want on or off", EnvVar, value)
}

// CheckEnv is ParseEnv's error for the environment's EnvVar: the command line refuses a value it
// cannot read before it starts (the package itself leaves the advice on for one).
func CheckEnv() error {
	_, err := ParseEnv(os.Getenv(EnvVar))
	return err
}

// AdviseSlice marks the memory of flat, a slice of any element type, for huge pages (Advise).
// Anything else, and an empty slice, is ignored.
func AdviseSlice(flat any) {
	v := reflect.ValueOf(flat)
	if v.Kind() != reflect.Slice || v.Len() == 0 {
		return
	}
	Advise(v.UnsafePointer(), uintptr(v.Len())*v.Type().Elem().Size())
}

// Advise marks the n bytes at p for transparent huge pages, widened to whole huge pages so that
// a huge page that starts before p or ends after p+n (shared with the buffers allocated next to
// it) can be huge too. It is a hint: the contents never change, memory already touched keeps its
// small pages, and nothing happens where the system has no transparent huge pages or the
// advice fails. Call it before the memory is first written.
func Advise(p unsafe.Pointer, n uintptr) {
	size := Size()
	if size == 0 || p == nil || n == 0 {
		return
	}
	// Addresses, not pointers: the widened range reaches outside the object at p, where a
	// pointer may not point (checkptr, under -race, stops the program on one).
	begin := uintptr(p) &^ (size - 1)
	end := (uintptr(p) + n + size - 1) &^ (size - 1)
	advise(begin, end-begin)
}
