package xla

// The one place that decides which engine runs a job: the command line, the figures and the
// notebooks all describe their job (the backend asked for, the weights' dtype, the memory it needs
// on each engine) and call Choose, then Fits before loading.

import (
	"fmt"

	"github.com/gomlx/compute"

	"github.com/octlm/octlm/internal/hostproduct"
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
	// Workload is how the job decodes: how many sequences at once, how long. The automatic
	// choice passes over ONNX Runtime where the pure-Go backend decodes faster.
	Workload
	// CPUVendor is the processor's vendor_id ("GenuineIntel", "AuthenticAMD"), which decides
	// which engine decodes many sequences at once faster (intelONNXFrom); "" reads it from
	// /proc/cpuinfo.
	CPUVendor string
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

// Workload is what the automatic choice knows of how a job decodes.
type Workload struct {
	// Sequences is how many sequences the job decodes at once (generate's prompts, eval's
	// --batch, bench's largest --batch); 0 is one.
	Sequences int
	// Longest is the most positions one sequence's KV cache reaches (depth, prompt and new
	// tokens); 0 is unknown.
	Longest int
}

// Where the pure-Go backend decodes faster than ONNX Runtime (Qwen3-0.6B in float32, a 2-core
// AMD EPYC, Zen 5, 2026-12-05; docs/performance.md, "Which engine"; batches also on an Intel
// Xeon, below):
const (
	// batchedSequences: 2, 4 and 8 sequences decoded at once went 1.30×, 1.35× and 1.39× as
	// fast on the pure-Go backend (29.2 / 22.4, 50.9 / 37.7, 60.9 / 43.7 tokens/s), 16 about as
	// fast (1.0–1.06×). ONNX Runtime runs one sequence 1.0–1.1× as fast. Not more than 16 on
	// Intel (intelONNXSequences).
	batchedSequences = 2
	// intelONNXSequences: on a 2-core Intel Xeon (Emerald Rapids, 2026-12-05) ONNX Runtime
	// decoded 16 sequences at once 1.21–1.34× as fast as the pure-Go backend in eight runs
	// (40.0–49.2 against 31.1–39.9 tokens/s), while 2, 4 and 8 ran about as fast on both (the
	// pure-Go backend 0.80–1.06×, 1.03–1.19× and 0.99–1.25×). Since the pure-Go backend
	// multiplies a decode step's rows in Go, four at a time (GoHostRows, 2026-12-06), it decoded
	// 16 float32 sequences at 76.0 tokens/s against ONNX Runtime's 62.4 and 8 at 56.0 against
	// 46.1 (one run each, one after the other). Since it multiplies eight rows at once
	// (2026-12-06, 15:20 UTC, two runs each, alternated) it decoded 16, 24 and 32 float32
	// sequences at 78.6–81.4, 86.0–89.9 and 89.8–91.1 tokens/s against ONNX Runtime's 65.6–66.1,
	// 62.4–62.7 and 81.8–85.9: more than 32 sequences on Intel, unmeasured, stay on ONNX
	// Runtime; where the pure-Go backend multiplies rows one at a time (no four-row kernels:
	// intelONNXSequencesOneByOne), 16 or more, as measured before.
	intelONNXSequences         = 33
	intelONNXSequencesOneByOne = 16
	// longContext: after a 1,024-token prompt the pure-Go backend decoded 12.1 tokens/s against
	// ONNX Runtime's 9.5, and prefilled that prompt at 231 against 251 tokens/s; at depth 1,024
	// and 4,096 it decoded 1.08× and 1.04× as fast and prefilled a 32-token prompt 1.96× and
	// 1.82× as fast; at depth 256 ONNX Runtime still decoded 1.23× as fast. On the Intel Xeon
	// too since attention over the cache runs in Go (2026-12-06, two rounds alternated): the
	// pure-Go backend decoded 1.25–1.27× as fast at depth 1,024, 1.01–1.25× at 2,048, 1.21× at
	// 4,096 and 1.23× after a 1,024-token prompt, while ONNX Runtime prefilled those 1.5×
	// (32-token prompts at depth) and 1.15× (the 1,024-token prompt) as fast.
	longContext = 1024
)

// intelONNXFrom is how many sequences at once stay on ONNX Runtime on Intel's processors: the
// pure-Go backend decodes more in Go where it multiplies four rows at once (HostRows).
func intelONNXFrom() int {
	if HostRows() > goHostRowsOneByOne {
		return intelONNXSequences
	}
	return intelONNXSequencesOneByOne
}

// ONNXRunsJobs says which jobs the automatic choice runs on ONNX Runtime where it finds it (the
// rest, passOverONNX, on the pure-Go backend), for `octlm backends`.
func ONNXRunsJobs() string {
	many := fmt.Sprintf("float32 jobs decoding %d or more sequences at once on an Intel processor", intelONNXFrom())
	if !goVectorKernels() {
		return "float32 jobs of one sequence shorter than " + fmt.Sprint(longContext) + " positions, and " + many
	}
	return many
}

// goVectorKernels says whether the pure-Go backend's AVX-512 kernels (one row's products and
// attention in Go) run here, where it decodes one sequence faster than ONNX Runtime; a variable
// for the tests.
var goVectorKernels = hostproduct.FourRowKernels

// OneSequenceOnGo says whether the automatic choice runs one short float32 sequence on the
// pure-Go backend where it finds ONNX Runtime (where the pure-Go backend's AVX-512 kernels run).
func OneSequenceOnGo() bool { return goVectorKernels() }

// intelVendor is Intel's vendor_id in /proc/cpuinfo.
const intelVendor = "GenuineIntel"

// ONNXPassedOver starts the clause Info.Reason gets when the automatic choice found ONNX Runtime
// but runs the job on the pure-Go backend; a short backend line keeps that clause as a note.
const ONNXPassedOver = "ONNX Runtime passed over"

// Choose opens the backend that runs job: the one named (job.Backend, else $GOMLX_BACKEND) as it
// is; else the automatic choice (AutoName), except that where that is ONNX Runtime the pure-Go
// backend runs the job when the weights are half precision, when the job's graphs are small, when
// it decodes one sequence, several at once (on Intel, fewer than intelONNXFrom()) or a long
// context (Workload), or when the job fits the memory available on the pure-Go backend but not on
// ONNX Runtime (their weights' layouts differ; both read the KV cache in place): ONNX Runtime
// runs only many sequences at once on Intel's processors, and one short sequence where the
// pure-Go backend's AVX-512 kernels do not run (ONNXRunsJobs). Info.Reason says which
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
	// On Intel's processors ONNX Runtime decodes intelONNXFrom() sequences or more faster, long
	// or not (the long ones unmeasured).
	intelBatch := job.Sequences >= intelONNXFrom() && job.cpuVendor() == intelVendor
	if job.Sequences >= batchedSequences && !intelBatch {
		return fmt.Sprintf("%s: the pure-Go backend decodes %d sequences at once faster (%s=onnx to use it)", ONNXPassedOver, job.Sequences, EnvBackend)
	}
	if job.Longest >= longContext && !intelBatch {
		return fmt.Sprintf("%s: the pure-Go backend decodes faster with %d positions in the KV cache (%s=onnx to use it)", ONNXPassedOver, job.Longest, EnvBackend)
	}
	// One sequence: since a decode step's products, attention and norms run in Go (2026-12-06)
	// the pure-Go backend decoded one float32 sequence at 1.02–1.54× ONNX Runtime's tokens/s in
	// 29 of 31 rounds of sittings AA–AO (0.92× and 0.97× in the others; 2-core Intel Xeons and a
	// 2-core AMD EPYC, Zen 4, prompt 128) and prefilled its prompt at 0.82–1.74× (Xeon) and
	// 1.00–1.29× (EPYC) ONNX Runtime's speed (docs/performance.md, "Side by side with llama.cpp
	// on an AMD EPYC guest (Zen 4)"). All of it with the AVX-512 kernels: without them (another
	// CPU, or a build without GOEXPERIMENT=simd) attention runs in plain Go, unmeasured against
	// ONNX Runtime, which keeps one sequence there.
	if job.Sequences < batchedSequences && goVectorKernels() {
		return fmt.Sprintf("%s: the pure-Go backend decodes one sequence faster (%s=onnx to use it)", ONNXPassedOver, EnvBackend)
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

// cpuVendor is job.CPUVendor, or /proc/cpuinfo's.
func (job Job) cpuVendor() string {
	if job.CPUVendor != "" {
		return job.CPUVendor
	}
	return sysinfo.CPUVendor()
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
