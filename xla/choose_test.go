package xla

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// need is a Need of a fixed size.
type need int64

func (n need) Total() int64   { return int64(n) }
func (n need) String() string { return fmt.Sprintf("%d bytes of test", int64(n)) }

// jobNeeding is a job that needs onnx bytes on ONNX Runtime and pure on the pure-Go backend, with
// avail bytes available.
func jobNeeding(onnx, pure, avail int64) Job {
	return Job{
		Workload:  Workload{Sequences: intelONNXFrom()}, // the one job ONNX Runtime still runs
		CPUVendor: intelVendor,
		Label:     "ckpt",
		Need: func(e Engine) (Need, error) {
			if e == EngineONNX {
				return need(onnx), nil
			}
			return need(pure), nil
		},
		Available: func() (int64, string, error) { return avail, "test", nil },
	}
}

// TestPassOverONNX: where the automatic choice found ONNX Runtime, the job runs on the pure-Go
// backend for half-precision weights, for small graphs, for one sequence, for several decoded at
// once (on Intel, fewer than intelONNXFrom()) or a long context, or when it fits the pure-Go
// backend's memory but not ONNX Runtime's; otherwise (many sequences on Intel) ONNX Runtime runs
// it.
func TestPassOverONNX(t *testing.T) {
	withVectorKernels(t, true)
	tests := []struct {
		name string
		job  Job
		want string // a substring of the reason; "" for ONNX Runtime
	}{
		{"f32, room for both", jobNeeding(100, 50, 200), ""},
		{"bf16", Job{DType: "bf16"}, "passed over for bf16: ONNX Runtime cannot run it"},
		{"f16", Job{DType: "f16"}, "passed over for f16"},
		{"small graphs", Job{SmallGraphs: true}, ONNXPassedOver + ": the pure-Go backend runs small graphs sooner"},
		{"one sequence, short", Job{Workload: Workload{Sequences: 1, Longest: longContext - 1}}, ONNXPassedOver + ": the pure-Go backend decodes one sequence faster"},
		{"one sequence on Intel", Job{CPUVendor: intelVendor}, ONNXPassedOver + ": the pure-Go backend decodes one sequence faster"},
		{"one sequence, long", Job{Workload: Workload{Longest: longContext}}, "decodes faster with 1024 positions"},
		{"two sequences at once", Job{Workload: Workload{Sequences: 2}}, ONNXPassedOver + ": the pure-Go backend decodes 2 sequences at once faster"},
		{"a long context", Job{Workload: Workload{Longest: 4096}, CPUVendor: "AuthenticAMD"}, ONNXPassedOver + ": the pure-Go backend decodes faster with 4096 positions in the KV cache"},
		{"a long context on Intel", Job{Workload: Workload{Longest: 4096}, CPUVendor: "GenuineIntel"}, ONNXPassedOver + ": the pure-Go backend decodes faster with 4096 positions in the KV cache"},
		{"two sequences at once on Intel", Job{Workload: Workload{Sequences: 2, Longest: 4096}, CPUVendor: "GenuineIntel"}, ONNXPassedOver + ": the pure-Go backend decodes 2 sequences at once faster"},
		{"just under the Intel threshold", Job{Workload: Workload{Sequences: intelONNXFrom() - 1}, CPUVendor: "GenuineIntel"}, fmt.Sprintf("%s: the pure-Go backend decodes %d sequences at once faster", ONNXPassedOver, intelONNXFrom()-1)},
		{"the Intel threshold", Job{Workload: Workload{Sequences: intelONNXFrom()}, CPUVendor: "GenuineIntel"}, ""},
		{"the Intel threshold on AMD", Job{Workload: Workload{Sequences: intelONNXFrom()}, CPUVendor: "AuthenticAMD"}, fmt.Sprintf("%s: the pure-Go backend decodes %d sequences at once faster", ONNXPassedOver, intelONNXFrom())},
		{"long sequences at the Intel threshold", Job{Workload: Workload{Sequences: intelONNXFrom(), Longest: 4096}, CPUVendor: "GenuineIntel"}, ""},
		{"bf16 says so first", Job{DType: "bf16", Workload: Workload{Sequences: 8}}, "passed over for bf16"},
		{"room for the pure-Go backend only", jobNeeding(100, 50, 70), ONNXPassedOver + ": this job needs 100 B there, 70 B are available (test), the pure-Go backend needs 50 B"},
		{"extra bytes tip it", func() Job { j := jobNeeding(100, 50, 120); j.Extra = 30; return j }(), "needs 130 B there"},
		{"room for neither", jobNeeding(100, 50, 40), ""},
		{"no need given", Job{Workload: Workload{Sequences: intelONNXFrom()}, CPUVendor: intelVendor}, ""},
		{"memory unknown", func() Job {
			j := jobNeeding(100, 50, 0)
			j.Available = func() (int64, string, error) { return 0, "", errors.New("no /proc") }
			return j
		}(), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.job.passOverONNX()
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("passOverONNX() = %q, want %q", got, tt.want)
			}
		})
	}
}

// withVectorKernels sets whether the pure-Go backend's AVX-512 kernels count as running, for t.
func withVectorKernels(t *testing.T, on bool) {
	saved := goVectorKernels
	goVectorKernels = func() bool { return on }
	t.Cleanup(func() { goVectorKernels = saved })
}

// TestPassOverONNXWithoutKernels: where the pure-Go backend's AVX-512 kernels do not run, one
// short sequence stays on ONNX Runtime (unmeasured there against it), and ONNXRunsJobs says so;
// several sequences and a long context still go to the pure-Go backend.
func TestPassOverONNXWithoutKernels(t *testing.T) {
	withVectorKernels(t, false)
	for _, tt := range []struct {
		name string
		job  Job
		want string
	}{
		{"one sequence, short", Job{Workload: Workload{Sequences: 1, Longest: longContext - 1}}, ""},
		{"one sequence, long", Job{Workload: Workload{Longest: longContext}}, "decodes faster with 1024 positions"},
		{"two sequences at once", Job{Workload: Workload{Sequences: 2}}, "decodes 2 sequences at once faster"},
	} {
		got := tt.job.passOverONNX()
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("%s: passOverONNX() = %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := ONNXRunsJobs(); !strings.Contains(got, "one sequence shorter than 1024 positions") {
		t.Errorf("ONNXRunsJobs() = %q: no word of one sequence", got)
	}
	if OneSequenceOnGo() {
		t.Error("OneSequenceOnGo() is true without the kernels")
	}
}

// TestFits: a job that needs more than is available on a host engine is refused with both
// figures; on a GPU, without a need, or when the available memory cannot be read (a note says
// so) it passes.
func TestFits(t *testing.T) {
	goInfo, onnxInfo := Info{Name: Go, Engine: EngineGo}, Info{Name: ONNX, Engine: EngineONNX}
	tests := []struct {
		name  string
		job   Job
		info  Info
		want  string // a substring of the error; "" for none
		notes int
	}{
		{"fits", jobNeeding(100, 50, 60), goInfo, "", 0},
		{"does not fit ONNX Runtime", jobNeeding(100, 50, 60), onnxInfo, "ckpt does not fit in memory: it needs 100 bytes (100 bytes of test) but 60 bytes are available (test); not loading it", 0},
		{"extra named", func() Job { j := jobNeeding(100, 50, 60); j.Extra = 20; return j }(), goInfo, "needs 70 bytes (50 bytes of test + 20 B the command allocates)", 0},
		{"XLA on the CPU is checked", jobNeeding(100, 100, 60), Info{Name: CPU, Engine: EngineXLA}, "does not fit", 0},
		{"a GPU is not", jobNeeding(100, 100, 60), Info{Name: CUDA, Engine: EngineXLA}, "", 0},
		{"no need", Job{}, goInfo, "", 0},
		{"memory unknown", func() Job {
			j := jobNeeding(100, 100, 0)
			j.Available = func() (int64, string, error) { return 0, "", errors.New("no /proc") }
			return j
		}(), goInfo, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var notes []string
			tt.job.Note = func(msg string) { notes = append(notes, msg) }
			err := tt.job.Fits(tt.info)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Fits = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Fits = %v, want %q", err, tt.want)
			}
			if len(notes) != tt.notes {
				t.Errorf("notes %q, want %d", notes, tt.notes)
			}
		})
	}
}

// TestSuits: ONNX Runtime is passed over for the half-precision dtypes only; every other engine
// takes every dtype.
func TestSuits(t *testing.T) {
	for _, e := range []Engine{EngineGo, EngineONNX, EngineXLA} {
		for _, dt := range []string{"", "f32", "bf16", "f16"} {
			want := e != EngineONNX || dt == "" || dt == "f32"
			if got := e.Suits(dt); got != want {
				t.Errorf("%s.Suits(%q) = %v, want %v", e, dt, got, want)
			}
		}
	}
}
