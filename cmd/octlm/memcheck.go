package main

import (
	"fmt"
	"io"

	"github.com/octlm/octlm/internal/sysinfo"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/xla"
)

// availableMemory reads the memory this process may still take; tests replace it.
var availableMemory = sysinfo.ProcessAvailable

// modelJob describes to xla.Choose (which engine runs it) and xla.Job.Fits (whether it fits) the
// job of running the checkpoint in dir with dtype weights, KV caches of positions positions in all
// and extra bytes the command allocates beside them, decoding as work says, on the backend asked
// for ("" automatic); notes go to stderr.
func modelJob(backend, dir string, dtype octlm.DType, positions int, work xla.Workload, extra int64, stderr io.Writer) xla.Job {
	return xla.Job{
		Backend: backend, DType: string(dtype), Label: dir, Extra: extra, Workload: work,
		Need: func(e xla.Engine) (xla.Need, error) { return octlm.MemoryNeededOn(dir, dtype, e, positions) },
		Available: func() (int64, string, error) {
			a, err := availableMemory()
			return a.Bytes, a.Source, err
		},
		Note: func(msg string) { fmt.Fprintf(stderr, "note: %s\n", msg) },
	}
}
