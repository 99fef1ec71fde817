package xla

// The one place that decides which engine runs a job: the command line, the figures and the
// notebooks all describe their job (the backend asked for, the weights' dtype, the memory it needs
// on each engine) and call Choose, then Fits before loading.

import (
	"fmt"

	"github.com/gomlx/compute"

	"github.com/octlm/octlm/internal/sysinfo"
	"github.com/octlm/octlm/units"
)

// Need is the memory a job needs on one engine: its total in bytes and a breakdown to print
// (octlm.Memory is one).
type Need interface {
	Total() int64
	String() string
}

// Job is what the choice of engine knows of the work to run.
type Job struct {
	// Backend is the name asked for (Open's names); "" is $GOMLX_BACKEND, else the automatic
	// choice. A backend named here or in $GOMLX_BACKEND is kept whatever the job (Fits refuses
	// it if the job does not fit).
	Backend string
	// DType is the weights' dtype ("f32", "bf16" or "f16"; "" is f32): the automatic choice
	// passes over ONNX Runtime for the half-precision ones (onnxPassedOver says why).
	DType string
	// Need is the memory the job needs on engine e (weights in its layout, KV cache, working
	// memory); nil when unknown, and then memory plays no part in the choice and Fits passes.
	Need func(e Engine) (Need, error)
	// Extra is memory the caller allocates beside the model (a benchmark's buffer), counted
	// with Need.
	Extra int64
	// SmallGraphs marks a job of many small graphs (the notebooks' figures): ONNX Runtime
	// compiles each graph first, which costs them more than it saves, so the automatic choice
	// passes it over.
	SmallGraphs bool
	// Label names the job in Fits's error (the checkpoint folder).
	Label string
	// Available is the memory this process may still take and where that figure comes from;
	// nil reads it from the kernel (MemAvailable lowered by a cgroup limit).
	Available func() (bytes int64, source string, err error)
	// Note receives what the choice could not check ("cannot tell how much memory is
	// available"); nil drops it.
	Note func(msg string)
}

// ONNXPassedOver starts the clause Info.Reason gets when the automatic choice found ONNX Runtime
// but runs the job on the pure-Go backend; a short backend line keeps that clause as a note.
const ONNXPassedOver = "ONNX Runtime passed over"

// Choose opens the backend that runs job: the one named (job.Backend, else $GOMLX_BACKEND) as it
// is; else the automatic choice (AutoName), except that where that is ONNX Runtime the pure-Go
// backend runs the job when the weights are half precision, when the job's graphs are small, or
// when the job fits the memory available on the pure-Go backend but not on ONNX Runtime (their
// weights' layouts differ; both read the KV cache in place). Info.Reason says which
// and why; ONNX Runtime is opened only when it runs the job. The caller owns the backend.
func Choose(job Job) (compute.Backend, Info, error) {
	if name, _ := resolveName(job.Backend); name != "" {
		return Open(name)
	}
	p := DefaultPlaces()
	pl, auto, why, err := p.autoChoice()
	if err != nil {
		return nil, Info{}, err
	}
	var b compute.Backend
	var info Info
	switch {
	case pl != nil:
		b, info, err = openPlugin(*pl, "", why)
	case auto == ONNX:
		if over := job.passOverONNX(); over != "" {
			b, info, err = openGo("", why+"; "+over)
		} else {
			b, info, err = p.openONNX("", why)
		}
	default:
		b, info, err = openGo("", why)
	}
	if err == nil {
		info.Engine, info.Automatic = EngineOf(b), true
	}
	return b, info, err
}

// passOverONNX is why the automatic choice runs job on the pure-Go backend though ONNX Runtime
// was found, or "" when ONNX Runtime runs it.
func (job Job) passOverONNX() string {
	if why := onnxPassedOver[job.DType]; why != "" {
		return "passed over for " + job.DType + ": " + why
	}
	if job.SmallGraphs {
		return ONNXPassedOver + ": the pure-Go backend runs small graphs sooner (" + EnvBackend + "=onnx to use it)"
	}
	if job.Need == nil {
		return ""
	}
	avail, source, err := job.available()
	if err != nil {
		return "" // Fits says so
	}
	onnx, err := job.Need(EngineONNX)
	if err != nil || onnx.Total()+job.Extra <= avail {
		return ""
	}
	pure, err := job.Need(EngineGo)
	if err != nil || pure.Total()+job.Extra > avail {
		return "" // fits neither: Fits refuses it with ONNX Runtime's figures
	}
	return fmt.Sprintf("%s: this job needs %s there, %s are available (%s), the pure-Go backend needs %s",
		ONNXPassedOver, units.Bytes(onnx.Total()+job.Extra), units.Bytes(avail), source, units.Bytes(pure.Total()+job.Extra))
}

// available is job.Available, or the kernel's figure.
func (job Job) available() (int64, string, error) {
	if job.Available != nil {
		return job.Available()
	}
	a, err := sysinfo.ProcessAvailable()
	return a.Bytes, a.Source, err
}

// OnHost reports whether the backend holds its weights in this process's memory (the pure-Go
// backend, ONNX Runtime, XLA on the CPU), where Fits can check them; a GPU's memory it cannot.
func (i Info) OnHost() bool {
	return i.Engine == EngineGo || i.Engine == EngineONNX || i.Name == CPU
}

// Fits refuses, before any weight is read, a job whose memory on the engine info describes
// (job.Need plus job.Extra) exceeds the memory available, giving both figures, where loading
// would end in the kernel's out-of-memory kill. A job on a GPU, or whose need is unknown, passes;
// so does one where the available memory cannot be read (job.Note is told).
func (job Job) Fits(info Info) error {
	if job.Need == nil || !info.OnHost() {
		return nil
	}
	need, err := job.Need(info.Engine)
	if err != nil {
		return err
	}
	avail, source, err := job.available()
	if err != nil {
		if job.Note != nil {
			job.Note(fmt.Sprintf("cannot tell how much memory is available (%v); loading without checking", err))
		}
		return nil
	}
	total := need.Total() + job.Extra
	if total <= avail {
		return nil
	}
	more := ""
	if job.Extra > 0 {
		more = " + " + units.Bytes(job.Extra) + " the command allocates"
	}
	return fmt.Errorf("%s does not fit in memory: it needs %s bytes (%s%s) but %s bytes are available (%s); not loading it",
		job.Label, units.Commas(total), need, more, units.Commas(avail), source)
}

// Suits reports whether engine e is one the automatic choice runs weights of dtype on: every
// engine but ONNX Runtime for the half-precision dtypes (onnxPassedOver says why). A caller that
// holds a backend named for float32 work (the figures) loads other dtypes elsewhere when not.
func (e Engine) Suits(dtype string) bool {
	return e != EngineONNX || onnxPassedOver[dtype] == ""
}
