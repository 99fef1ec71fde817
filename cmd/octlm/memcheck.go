package main

import (
	"fmt"
	"io"

	"github.com/gomlx/compute"

	"github.com/octlm/octlm/internal/sysinfo"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/units"
	"github.com/octlm/octlm/xla"
)

// availableMemory reads the memory this process may still take; tests replace it.
var availableMemory = sysinfo.ProcessAvailable

// checkFits refuses, before any weight is read, a checkpoint whose resident weights, KV cache for
// positions and working memory, plus extra bytes the command allocates beside them, exceed the
// memory available: the error gives both figures (exit status 2), where loading would end in the
// kernel's out-of-memory kill. Weights on a GPU (xla:cuda) are not in host memory: no check.
func checkFits(dir string, backend compute.Backend, info xla.Info, dtype octlm.DType, positions int, extra int64, stderr io.Writer) error {
	if info.Name != xla.Go && info.Name != xla.CPU && info.Name != xla.ONNX {
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

// fitEngine is the backend to run a job on: the one opened, unless the automatic choice opened
// ONNX Runtime and the job (weights, a KV cache of positions positions, extra bytes) does not fit
// the memory available there but fits the pure-Go backend, which updates the cache in place
// (ONNX Runtime writes a second one each step): then that one, with the reason on its backend
// line. A backend named by --backend or $GOMLX_BACKEND is kept; checkFits refuses it if it does
// not fit, as it refuses a job that fits neither.
func fitEngine(dir string, backend compute.Backend, info xla.Info, dtype octlm.DType, positions int, extra int64) (compute.Backend, xla.Info) {
	if !info.Automatic || info.Engine != xla.EngineONNX {
		return backend, info
	}
	avail, err := availableMemory()
	if err != nil {
		return backend, info // checkFits says so
	}
	onnx, err := octlm.MemoryNeededDir(dir, dtype, backend, positions)
	if err != nil || onnx.Total()+extra <= avail.Bytes {
		return backend, info
	}
	pure, err := octlm.MemoryNeededOn(dir, dtype, xla.EngineGo, positions)
	if err != nil || pure.Total()+extra > avail.Bytes {
		return backend, info // fits neither: checkFits refuses it with ONNX Runtime's figures
	}
	pureGo, pureInfo, err := xla.OpenAutomaticGo(info, fmt.Sprintf("%s this job needs %s there, %s are available (%s), the pure-Go backend updates the KV cache in place and needs %s",
		onnxPassedOver, units.Bytes(onnx.Total()+extra), units.Bytes(avail.Bytes), avail.Source, units.Bytes(pure.Total()+extra)))
	if err != nil {
		return backend, info
	}
	backend.Finalize()
	return pureGo, pureInfo
}

// onnxPassedOver starts the reason fitEngine gives; shortBackend keeps that part.
const onnxPassedOver = "ONNX Runtime passed over:"
