package playground

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/compute"
	_ "github.com/gomlx/compute/gobackend"

	"github.com/octlm/octlm/octlm"
)

var (
	backendOnce sync.Once
	testBackend compute.Backend
	backendErr  error
)

func goBackend(t *testing.T) compute.Backend {
	t.Helper()
	backendOnce.Do(func() { testBackend, backendErr = compute.NewWithConfig("go") })
	if backendErr != nil {
		t.Fatalf("go backend: %v", backendErr)
	}
	return testBackend
}

// rotationCase is one rotation of the golden file: octlm.InvFreq, the angles and octlm.RoPE's
// rotation of x.
type rotationCase struct {
	Position int       `json:"position"`
	Base     float64   `json:"base"`
	Dim      int       `json:"dim"`
	Split    bool      `json:"split"`
	InvFreq  []float32 `json:"invFreq"`
	Angles   []float32 `json:"angles"`
	X        []float32 `json:"x"`
	Rotated  []float32 `json:"rotated"`
}

// golden computes the Go side's numbers for rope.test.mjs over a grid of positions, bases (the
// slider's ends, a log step between and Qwen3's 10⁶), widths and both pairings.
func golden(t *testing.T) map[string]any {
	t.Helper()
	positions := []int32{0, 1, 2, 7, 100, 1000, 4095, 32767}
	bases := []float64{1e4, math.Pow(10, 4.5), 5e5, 1e6}
	var rots []rotationCase
	for _, dim := range []int{8, 32, 128} {
		for _, base := range bases {
			for _, split := range []bool{true, false} {
				x := DemoVector(dim)
				xs := make([][]float32, len(positions))
				for i := range xs {
					xs[i] = x
				}
				rotated, err := octlm.RoPE(goBackend(t), xs, positions, base, split)
				if err != nil {
					t.Fatal(err)
				}
				inv := octlm.InvFreq(dim, base)
				for i, p := range positions {
					c := rotationCase{Position: int(p), Base: base, Dim: dim, Split: split, InvFreq: inv, X: x, Rotated: rotated[i]}
					for _, f := range inv {
						c.Angles = append(c.Angles, float32(p)*f)
					}
					rots = append(rots, c)
				}
			}
		}
	}
	var pg []Data
	for _, s := range []Settings{
		Default,
		{Position: 0, Base: 1e4, HeadDim: 8, Split: false},
		{Position: 100, Base: math.Pow(10, 5.5), HeadDim: 64, Split: false},
		{Position: MaxPosition, Base: 1e6, HeadDim: 128, Split: true},
		{Position: 333, Base: 1e4, HeadDim: 16, Split: false},
	} {
		d, err := Compute(goBackend(t), s)
		if err != nil {
			t.Fatal(err)
		}
		pg = append(pg, d)
	}
	return map[string]any{"rotations": rots, "playground": pg}
}

// TestRopeJSMatchesGraph runs rope.test.mjs with Node against the graph's numbers. Without node
// on PATH it skips, except under CI (CI set), where it fails: CI must check the JavaScript.
func TestRopeJSMatchesGraph(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node not found on PATH under CI: the JavaScript RoPE must be checked (install nodejs: docker/install.sh --browser)")
		}
		t.Skip("node not found on PATH: the JavaScript RoPE (rope.js) is not checked against the graph; install Node.js to run it")
	}
	b, err := json.Marshal(golden(t))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rope-golden.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "--test", "rope.test.mjs")
	cmd.Env = append(os.Environ(), "ROPE_GOLDEN="+path)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("rope.test.mjs failed (%v): rope.js disagrees with octlm's RoPE:\n%s", err, tailLines(string(out), 60))
	} else if err != nil {
		t.Fatalf("running node: %v", err)
	}
	if !strings.Contains(string(out), "# fail 0") {
		t.Fatalf("rope.test.mjs did not report '# fail 0':\n%s", tailLines(string(out), 30))
	}
	t.Logf("node --test rope.test.mjs:\n%s", tailLines(string(out), 9))
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func TestCompute(t *testing.T) {
	tests := []struct {
		name string
		s    Settings
	}{
		{"Qwen3: split halves", Default},
		{"wrong pairing", Settings{Position: 100, Base: 1e6, HeadDim: 64, Split: false}},
		{"base 10⁴, narrow head", Settings{Position: 0, Base: 1e4, HeadDim: 8, Split: false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Compute(goBackend(t), tt.s)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Angles) != tt.s.HeadDim/2 || len(d.Pairs) != tt.s.HeadDim/2 {
				t.Fatalf("%d angles, %d pairs, want %d", len(d.Angles), len(d.Pairs), tt.s.HeadDim/2)
			}
			var norm float64
			for _, v := range DemoVector(tt.s.HeadDim) {
				norm += float64(v) * float64(v)
			}
			// At distance 0 nothing turns: both scores are |q|².
			if math.Abs(d.Trained[0]-norm) > 1e-4 || math.Abs(d.Chosen[0]-norm) > 1e-4 {
				t.Errorf("scores at distance 0: trained %g, chosen %g, want |q|² = %g", d.Trained[0], d.Chosen[0], norm)
			}
			worst := 0.0
			for i := range d.Distances {
				worst = max(worst, math.Abs(d.Chosen[i]-d.Trained[i]))
			}
			if tt.s.Split && worst > 1e-4 {
				t.Errorf("the right pairing's scores differ from the trained ones by up to %g", worst)
			}
			if !tt.s.Split && worst < 0.1 {
				t.Errorf("the wrong pairing's scores differ from the trained ones by only %g", worst)
			}
		})
	}
}

func TestSettingsRefused(t *testing.T) {
	tests := []struct {
		s    Settings
		want string
	}{
		{Settings{Position: -1, Base: 1e6, HeadDim: 32}, "position -1"},
		{Settings{Position: MaxPosition + 1, Base: 1e6, HeadDim: 32}, "position 1025"},
		{Settings{Position: 1, Base: 1e3, HeadDim: 32}, "base 1000"},
		{Settings{Position: 1, Base: math.NaN(), HeadDim: 32}, "base NaN"},
		{Settings{Position: 1, Base: 1e6, HeadDim: 12}, "head width 12"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := HTML("pg", tt.s)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("HTML: error %v, want one saying %q", err, tt.want)
			}
			if _, err := Compute(goBackend(t), tt.s); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Compute: error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

func TestHTMLIsSelfContained(t *testing.T) {
	page, err := HTML(`pg"1`, Default)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<div id="pg&#34;1" class="octlm-playground"></div>`, "OctlmRope", "OctlmRopePlayground.mount(document.getElementById(\"pg\\\"1\"), {\"position\":16,\"base\":1000000,\"dim\":32,\"split\":true})"} {
		if !strings.Contains(page, want) {
			t.Errorf("the fragment lacks %s", want)
		}
	}
	for _, bad := range []string{"src=", "http://", "https://", "import "} {
		if strings.Contains(strings.ReplaceAll(page, "http://www.w3.org/2000/svg", ""), bad) {
			t.Errorf("the fragment holds %q: it must load nothing", bad)
		}
	}
	if n := strings.Count(page, "</script>"); n != 1 {
		t.Errorf("%d </script> in the fragment, want 1 (the embedded JavaScript must not close the script early)", n)
	}
}
