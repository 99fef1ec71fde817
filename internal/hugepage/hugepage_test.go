package hugepage

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

func TestAdviseSliceIgnoresWhatIsNoSlice(t *testing.T) {
	for _, v := range []any{nil, 3, "text", []float32{}, []int(nil), map[int]int{1: 2}} {
		t.Run(fmt.Sprintf("%T", v), func(t *testing.T) {
			AdviseSlice(v) // must neither panic nor touch anything
		})
	}
}

func TestParseEnv(t *testing.T) {
	for _, tt := range []struct {
		value string
		on    bool
		err   string
	}{
		{"", true, ""}, {"on", true, ""}, {"1", true, ""}, {"TRUE", true, ""}, {"yes", true, ""},
		{"off", false, ""}, {"OFF", false, ""}, {" 0 ", false, ""}, {"false", false, ""}, {"no", false, ""},
		{"offf", true, `$OCTLM_HUGE_PAGES="offf": want on or off`}, {"2", true, "want on or off"},
	} {
		on, err := ParseEnv(tt.value)
		if on != tt.on || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("ParseEnv(%q) = %v, %v; want %v, %q", tt.value, on, err, tt.on, tt.err)
		}
	}
	t.Setenv(EnvVar, "soon")
	if err := CheckEnv(); err == nil {
		t.Error("CheckEnv accepted soon")
	}
}

func TestAdviseKeepsContents(t *testing.T) {
	data := make([]float32, 3<<20/4+5) // straddles huge pages on both sides
	for i := range data {
		data[i] = float32(i)
	}
	AdviseSlice(data)
	for i, v := range data {
		if v != float32(i) {
			t.Fatalf("data[%d] = %v after Advise, want %d", i, v, i)
		}
	}
}

// TestAdviseMarksTheMapping checks, where transparent huge pages are on, that the mapping
// holding an advised buffer carries the kernel's "hg" flag: the flag is what the advice sets;
// whether a huge page is free when the memory is touched is the system's to decide.
func TestAdviseMarksTheMapping(t *testing.T) {
	if Size() == 0 {
		t.Skip("no transparent huge pages here")
	}
	buf := make([]byte, 8*Size())
	AdviseSlice(buf)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	marked, err := Marked(unsafe.Pointer(&buf[len(buf)/2]))
	if err != nil || !marked {
		t.Errorf("Marked after Advise = %v, %v; want true", marked, err)
	}
	runtime.KeepAlive(buf)
}

func TestMarkedFindsNoMappingForNil(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/smaps")
	}
	if marked, err := Marked(nil); err == nil || marked {
		t.Errorf("Marked(nil) = %v, %v; want an error", marked, err)
	}
}
