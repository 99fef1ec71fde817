package parity

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/octlm/octlm/octlm"
)

// TestJSONLBytes pins the JSONL lines byte for byte: each line's fields, their order, null for
// non-finite errors, and the optional plugin and reference_metadata of the run line. The second
// report is an empty one.
func TestJSONLBytes(t *testing.T) {
	s := Stats{Positions: 3, MaxAbsoluteError: 1.5e-4, MeanAbsoluteError: 2e-5, ArgmaxMatches: 2, Finite: true}
	bad := Stats{Positions: 2, MaxAbsoluteError: math.NaN(), MeanAbsoluteError: math.Inf(1)}
	reports := []*Report{{
		Run: RunInfo{Model: "m", Reference: "r", Backend: "xla:cpu", Plugin: "p.so", Cases: 2,
			HalfDTypes: []octlm.DType{octlm.BFloat16, octlm.Float16},
			Checkpoint: map[string]string{"b": "2", "a": "1"}, ReferenceFiles: map[string]string{"x": "y"},
			ReferenceMetadata: map[string]string{"k": "v"}, Versions: map[string]string{"go": "1"}},
		Rows: []Row{{Case: 0, Path: PathFull, Stats: s}, {Case: 1, Path: PathCached, Stats: bad}, {}},
		Half: []HalfRow{{DType: octlm.BFloat16, Case: 0, Path: PathFull, Stats: s},
			{DType: octlm.Float16, Case: 1, Path: PathCached, Stats: bad}, {}},
		Greedy: []GreedyRow{{DType: octlm.BFloat16, Case: 0, PromptPositions: 1, Float32IDs: []int{1, 2, 3, 4},
			IDs: []int{1, 2, 9, 4}}, {}},
	}, {}}
	var buf bytes.Buffer
	for _, rep := range reports {
		if err := rep.WriteJSONL(&buf); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		`{"type":"run","model":"m","reference":"r","backend":"xla:cpu","plugin":"p.so","dtype":"f32","half_dtypes":["bf16","f16"],"tolerance":0.001,"cases":2,"checkpoint":{"a":"1","b":"2"},"reference_files":{"x":"y"},"reference_metadata":{"k":"v"},"versions":{"go":"1"}}`,
		`{"type":"logit_parity","case":0,"path":"full","positions":3,"max_absolute_error":0.00015,"mean_absolute_error":0.00002,"argmax_agreement":0.6666666666666666,"argmax_matches":2,"tolerance":0.001}`,
		`{"type":"logit_parity","case":1,"path":"cached","positions":2,"max_absolute_error":null,"mean_absolute_error":null,"argmax_agreement":0,"argmax_matches":0,"tolerance":0.001}`,
		`{"type":"logit_parity","case":0,"path":"","positions":0,"max_absolute_error":0,"mean_absolute_error":0,"argmax_agreement":0,"argmax_matches":0,"tolerance":0.001}`,
		`{"type":"half_logit_parity","dtype":"bf16","case":0,"path":"full","positions":3,"max_absolute_error":0.00015,"mean_absolute_error":0.00002,"argmax_agreement":0.6666666666666666,"argmax_matches":2}`,
		`{"type":"half_logit_parity","dtype":"f16","case":1,"path":"cached","positions":2,"max_absolute_error":null,"mean_absolute_error":null,"argmax_agreement":0,"argmax_matches":0}`,
		`{"type":"half_logit_parity","dtype":"","case":0,"path":"","positions":0,"max_absolute_error":0,"mean_absolute_error":0,"argmax_agreement":0,"argmax_matches":0}`,
		`{"type":"half_greedy_agreement","dtype":"bf16","case":0,"prompt_positions":1,"tokens":4,"matches":3,"agreement":0.75,"common_prefix":2,"float32_ids":[1,2,3,4],"ids":[1,2,9,4]}`,
		`{"type":"half_greedy_agreement","dtype":"","case":0,"prompt_positions":0,"tokens":0,"matches":0,"agreement":0,"common_prefix":0,"float32_ids":null,"ids":null}`,
		`{"type":"run","model":"","reference":"","backend":"","dtype":"f32","half_dtypes":[],"tolerance":0.001,"cases":0,"checkpoint":null,"reference_files":null,"versions":null}`,
	}
	got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}
