package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/octlm/octlm/internal/sysinfo"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/xla"
)

// withAvailable makes availableMemory report n bytes for the rest of the test.
func withAvailable(t *testing.T, n int64) {
	old := availableMemory
	availableMemory = func() (sysinfo.Available, error) { return sysinfo.Available{Bytes: n, Source: "test"}, nil }
	t.Cleanup(func() { availableMemory = old })
}

// TestRefusesWhatDoesNotFit: every command that loads a model refuses, before loading, a
// checkpoint whose weights do not fit the available memory, with both numbers and exit
// status 2; with room to spare the same commands run.
func TestRefusesWhatDoesNotFit(t *testing.T) {
	t.Setenv(xla.EnvBackend, "go")
	untied := testdata("tiny-qwen3-untied")
	commands := []struct {
		name string
		run  func(args []string, stdout, stderr *bytes.Buffer) error
		args []string
	}{
		{"generate", func(a []string, o, e *bytes.Buffer) error { return runGenerate(a, o, e) },
			[]string{"--model", untied, "--prompt-ids", "1,2", "--max-new-tokens", "2"}},
		{"parity", func(a []string, o, e *bytes.Buffer) error { return runParity(a, o, e) },
			[]string{"--model", untied}},
		{"bench", func(a []string, o, e *bytes.Buffer) error { return runBench(a, o, e) },
			[]string{"--model", untied, "--prompt", "4", "--decode", "2"}},
	}
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			// tiny-qwen3-untied in float32: 141,312 parameters' worth of weights, 4 bytes each.
			withAvailable(t, 100_000)
			var stdout, stderr bytes.Buffer
			err := c.run(c.args, &stdout, &stderr)
			if err == nil {
				t.Fatal("a model larger than the available memory was loaded")
			}
			for _, want := range []string{"does not fit in memory", "but 100,000 bytes are available (test)", "f32 weights 641.75 KiB"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if strings.Contains(stderr.String(), "loading") {
				t.Errorf("it started loading:\n%s", stderr.String())
			}
			if code := run(append([]string{c.name}, c.args...)); code != 2 {
				t.Errorf("octlm %s exited %d, want 2", c.name, code)
			}
			if c.name == "bench" {
				return // a full bench run also measures 1 GiB of bandwidth: not repeated here
			}
			withAvailable(t, 1<<40)
			stdout.Reset()
			stderr.Reset()
			if err := c.run(c.args, &stdout, &stderr); err != nil {
				t.Fatalf("with room to spare: %v\n%s", err, stderr.String())
			}
		})
	}
}

// TestChooseByMemory: where the automatic choice finds ONNX Runtime and a job it would run there
// (many sequences at once on Intel's processors) fits the pure-Go backend's memory but not ONNX
// Runtime's, the job runs on the pure-Go backend and the short backend line says why; with room
// for both, or with the backend named, ONNX Runtime runs it.
// Both engines now read the KV cache in place, so their needs differ only by the weights'
// layouts; the pure-Go case runs where ONNX Runtime's layout needs more.
func TestChooseByMemory(t *testing.T) {
	t.Setenv(xla.EnvBackend, "")
	if name, _, _ := xla.DefaultPlaces().AutoName(); name != xla.ONNX {
		t.Skipf("the automatic choice here is %s, not ONNX Runtime", name)
	}
	dir := testdata("tiny-qwen3-long")
	const positions = 40960
	onnxNeed, err := octlm.MemoryNeededOn(dir, octlm.Float32, xla.EngineONNX, positions)
	if err != nil {
		t.Fatal(err)
	}
	goNeed, err := octlm.MemoryNeededOn(dir, octlm.Float32, xla.EngineGo, positions)
	if err != nil {
		t.Fatal(err)
	}
	type choice struct {
		name      string
		available int64
		backend   string
		want      string
		fits      bool
	}
	tests := []choice{
		{"room for both", 2 * onnxNeed.Total(), "", xla.ONNX, true},
		{"room for neither", min(goNeed.Total(), onnxNeed.Total()) / 2, "", xla.ONNX, false},
		{"named, no room", min(goNeed.Total(), onnxNeed.Total()) / 2, xla.ONNX, xla.ONNX, false},
	}
	if between := (goNeed.Total() + onnxNeed.Total()) / 2; goNeed.Total() < onnxNeed.Total() {
		tests = append(tests, choice{"room for the pure-Go backend only", between, "", xla.Go, true},
			choice{"named", between, xla.ONNX, xla.ONNX, false})
	} else {
		t.Logf("the pure-Go backend needs %d bytes, ONNX Runtime %d: no job fits the first only", goNeed.Total(), onnxNeed.Total())
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withAvailable(t, tt.available)
			job := modelJob(tt.backend, dir, octlm.Float32, positions, xla.Workload{Sequences: 64}, 0, io.Discard)
			job.CPUVendor = "GenuineIntel"
			b, info, err := xla.Choose(job)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Finalize()
			if info.Name != tt.want {
				t.Fatalf("ran on %s, want %s (%s)", info.Name, tt.want, info.Reason)
			}
			if err := job.Fits(info); (err == nil) != tt.fits {
				t.Errorf("Fits = %v, want fits %v", err, tt.fits)
			}
			if tt.want == xla.Go {
				line := shortBackend(info)
				t.Logf("backend: %s", line)
				for _, want := range []string{"note: " + xla.ONNXPassedOver, "this job needs", "are available (test)", "the pure-Go backend needs"} {
					if !strings.Contains(line, want) {
						t.Errorf("backend line %q lacks %q", line, want)
					}
				}
			}
		})
	}
}
