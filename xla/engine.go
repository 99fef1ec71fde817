package xla

import (
	"github.com/gomlx/compute"
	onnxbackend "github.com/gomlx/compute-onnx"
	"github.com/gomlx/compute/gobackend"
	gxla "github.com/gomlx/go-xla/compute/xla"
)

// Engine is the kind of engine a backend runs graphs on. Callers that lay weights and graphs
// out for an engine's kernels (package octlm) choose by Engine, never by a backend's name.
type Engine int

// The engines octlm knows.
const (
	EngineOther Engine = iota // a backend this package did not make
	EngineGo                  // GoMLX's pure-Go backend
	EngineONNX                // ONNX Runtime through compute-onnx
	EngineXLA                 // XLA through a PJRT plugin (CPU, CUDA, …)
)

// String is the engine's short name: "go", "onnx", "xla" or "other".
func (e Engine) String() string {
	switch e {
	case EngineGo:
		return Go
	case EngineONNX:
		return ONNX
	case EngineXLA:
		return "xla"
	}
	return "other"
}

// EngineOf is the kind of engine backend b is. The pure-Go backend's type is internal to
// compute, so it is known by its registered name; the others by their types.
func EngineOf(b compute.Backend) Engine {
	switch b.(type) {
	case *onnxbackend.Backend:
		return EngineONNX
	case *gxla.Backend:
		return EngineXLA
	case nil:
		return EngineOther
	}
	if b.String() == gobackend.BackendName {
		return EngineGo
	}
	return EngineOther
}
