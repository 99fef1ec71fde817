package main

import (
	"fmt"
	"io"

	"github.com/gomlx/compute"

	"github.com/octlm/octlm/internal/sysinfo"
	"github.com/octlm/octlm/internal/units"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/xla"
)

// availableMemory reads the memory this process may still take; tests replace it.
var availableMemory = sysinfo.ProcessAvailable

// checkFits refuses, before any weight is read, a checkpoint whose resident weights, KV cache for
// positions and working memory, plus extra bytes the command allocates beside them, exceed the
// memory available: the error gives both figures (exit status 2), where loading would end in the
// kernel's out-of-memory kill. Weights on a GPU (xla:cuda) are not in host memory: no check.
func checkFits(dir string, backend compute.Backend, info xla.Info, dtype octlm.DType, positions int, extra int64, stderr io.Writer) error {
	if info.Name != xla.Go && info.Name != xla.CPU {
		return nil
	}
	need, err := octlm.MemoryNeededDir(dir, dtype, backend, positions)
	if err != nil {
		return err
	}
	avail, err := availableMemory()
	if err != nil {
		fmt.Fprintf(stderr, "note: cannot tell how much memory is available (%v); loading without checking\n", err)
		return nil
	}
	total := need.Total() + extra
	if total <= avail.Bytes {
		return nil
	}
	more := ""
	if extra > 0 {
		more = " + " + units.Bytes(extra) + " the command allocates"
	}
	return fmt.Errorf("%s does not fit in memory: it needs %s bytes (%s%s) but %s bytes are available (%s); not loading it",
		dir, units.Commas(total), need, more, units.Commas(avail.Bytes), avail.Source)
}
