//go:build linux

package hugepage

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// Size is the transparent huge page size (2 MiB on x86-64), or 0 where transparent huge pages
// are off ("never"), absent, or turned off for octlm ($OCTLM_HUGE_PAGES=off).
func Size() uintptr { return size() }

var size = sync.OnceValue(func() uintptr {
	if on, _ := ParseEnv(os.Getenv(EnvVar)); !on {
		return 0
	}
	enabled, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || bytes.Contains(enabled, []byte("[never]")) {
		return 0
	}
	text, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(string(bytes.TrimSpace(text)), 10, 64)
	if err != nil || n < 4096 || n&(n-1) != 0 {
		return 0
	}
	return uintptr(n)
})

// advise is madvise(MADV_HUGEPAGE) on the n bytes at address addr. Its error is dropped: a range
// that reaches past the mapping (ENOMEM) is still marked where it is mapped, and a kernel
// without the advice (EINVAL) keeps small pages.
func advise(addr, n uintptr) {
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, addr, n, syscall.MADV_HUGEPAGE)
}

// Marked reports whether the mapping that holds p carries the huge page advice (the "hg" of
// VmFlags in /proc/self/smaps).
func Marked(p unsafe.Pointer) (bool, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return false, err
	}
	defer f.Close()
	addr := uintptr(p)
	in := false
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		line := lines.Text()
		if span, _, ok := strings.Cut(line, " "); ok && strings.Contains(span, "-") && !strings.HasSuffix(span, ":") {
			lo, hi, _ := strings.Cut(span, "-")
			l, errLo := strconv.ParseUint(lo, 16, 64)
			h, errHi := strconv.ParseUint(hi, 16, 64)
			if errLo == nil && errHi == nil {
				in = uintptr(l) <= addr && addr < uintptr(h)
				continue
			}
		}
		if flags, ok := strings.CutPrefix(line, "VmFlags:"); ok && in {
			return slices.Contains(strings.Fields(flags), "hg"), nil
		}
	}
	if err := lines.Err(); err != nil {
		return false, err
	}
	return false, fmt.Errorf("hugepage: no mapping in /proc/self/smaps holds %#x", addr)
}
