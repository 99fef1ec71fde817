package parity

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/compute"
	_ "github.com/gomlx/compute/gobackend"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
)

// fixtures are the tiny random Qwen3 checkpoints with float32 reference logits.
var fixtures = []string{"tiny-qwen3", "tiny-qwen3-mha", "tiny-qwen3-untied"}

var (
	backendOnce sync.Once
	testBackend compute.Backend
	backendErr  error
)

func goBackend(t testing.TB) compute.Backend {
	t.Helper()
	backendOnce.Do(func() { testBackend, backendErr = compute.NewWithConfig("go") })
	if backendErr != nil {
		t.Fatalf("go backend: %v", backendErr)
	}
	return testBackend
}

func fixtureDir(name string) string { return filepath.Join("..", "testdata", name) }

func loadModel(t testing.TB, name string, dtype octlm.DType) *octlm.Model {
	t.Helper()
	m, err := octlm.Load(fixtureDir(name), octlm.LoadOptions{Backend: goBackend(t), DType: dtype})
	if err != nil {
		t.Fatalf("loading %s: %v", name, err)
	}
	t.Cleanup(m.Close)
	return m
}

func readRef(t testing.TB, dir string) *Reference {
	t.Helper()
	ref, err := ReadReference(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// TestProtocol runs the whole gated protocol on every fixture: both paths of every case pass,
// well inside the gate (this decoder reaches about 3.6e-5), with every top token agreeing.
func TestProtocol(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			m := loadModel(t, name, octlm.Float32)
			ref := readRef(t, filepath.Join(fixtureDir(name), "reference"))
			cases, err := ReadCases(filepath.Join(fixtureDir(name), CasesFileName))
			if err != nil {
				t.Fatal(err)
			}
			if err := ref.CheckCases(cases); err != nil {
				t.Fatal(err)
			}
			rows, err := Run(m, ref, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 2*len(ref.Cases) {
				t.Fatalf("%d rows for %d cases", len(rows), len(ref.Cases))
			}
			for i, r := range rows {
				c := ref.Cases[i/2]
				wantPath := []string{PathFull, PathCached}[i%2]
				t.Logf("case %d %-6s %3d positions: max %.3g mean %.3g argmax %d/%d",
					r.Case, r.Path, r.Stats.Positions, r.Stats.MaxAbsoluteError, r.Stats.MeanAbsoluteError, r.Stats.ArgmaxMatches, r.Stats.Positions)
				switch {
				case r.Case != c.Index || r.Path != wantPath || r.Stats.Positions != len(c.IDs):
					t.Errorf("row %d is case %d %s with %d positions, want case %d %s with %d", i, r.Case, r.Path, r.Stats.Positions, c.Index, wantPath, len(c.IDs))
				case r.Failed() || !(r.Stats.MaxAbsoluteError < 1e-4):
					t.Errorf("case %d %s: max abs error %.3g, want < 1e-4", r.Case, r.Path, r.Stats.MaxAbsoluteError)
				case r.Stats.MaxAbsoluteError == 0 || r.Stats.MeanAbsoluteError <= 0 || r.Stats.MeanAbsoluteError > r.Stats.MaxAbsoluteError:
					t.Errorf("case %d %s: implausible errors max %g mean %g", r.Case, r.Path, r.Stats.MaxAbsoluteError, r.Stats.MeanAbsoluteError)
				case r.Stats.ArgmaxMatches != r.Stats.Positions:
					t.Errorf("case %d %s: argmax agrees at %d of %d positions", r.Case, r.Path, r.Stats.ArgmaxMatches, r.Stats.Positions)
				}
			}
		})
	}
}

// writeReference writes a reference folder holding cases in dir.
func writeReference(t testing.TB, dir string, ids [][]int, logits []octlm.Logits) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for n := range ids {
		idBytes := make([]byte, 8*len(ids[n]))
		for i, id := range ids[n] {
			binary.LittleEndian.PutUint64(idBytes[8*i:], uint64(int64(id)))
		}
		lb := make([]byte, 4*len(logits[n].Data))
		for i, v := range logits[n].Data {
			binary.LittleEndian.PutUint32(lb[4*i:], math.Float32bits(v))
		}
		err := loader.WriteFile(filepath.Join(dir, ReferenceFileName(n)), []loader.WriteTensor{
			{Name: IDsTensor, DType: loader.I64, Shape: []int{len(ids[n])}, Data: idBytes},
			{Name: LogitsTensor, DType: loader.F32, Shape: []int{logits[n].Rows, logits[n].Vocab}, Data: lb},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
}

// copyReference copies a fixture's reference into a temporary folder, letting edit change
// case n's ids and logits first.
func copyReference(t testing.TB, name string, edit func(n int, ids []int, l *octlm.Logits) []int) string {
	t.Helper()
	ref := readRef(t, filepath.Join(fixtureDir(name), "reference"))
	var ids [][]int
	var logits []octlm.Logits
	for _, c := range ref.Cases {
		l, err := c.Logits()
		if err != nil {
			t.Fatal(err)
		}
		caseIDs := slices.Clone(c.IDs)
		if edit != nil {
			caseIDs = edit(c.Index, caseIDs, &l)
		}
		ids = append(ids, caseIDs)
		logits = append(logits, l)
	}
	dir := filepath.Join(t.TempDir(), "reference")
	writeReference(t, dir, ids, logits)
	return dir
}

// TestGateFails moves one reference logit by 0.01 (and, separately, makes the decoder's output
// NaN): the run completes, every row is reported, and the gate fails naming the first bad row.
func TestGateFails(t *testing.T) {
	m := loadModel(t, "tiny-qwen3", octlm.Float32)
	// The last row of case 2 (64 positions) is in the cached path's second half.
	dir := copyReference(t, "tiny-qwen3", func(n int, ids []int, l *octlm.Logits) []int {
		if n == 2 {
			l.Row(l.Rows - 1)[17] += 0.01
		}
		return ids
	})
	ref := readRef(t, dir)
	rows, err := Run(m, ref, Options{})
	var gate *GateError
	if !errors.As(err, &gate) || !errors.Is(err, ErrFailed) || errors.Is(err, ErrBadInput) {
		t.Fatalf("err = %v, want a *GateError", err)
	}
	if len(rows) != 2*len(ref.Cases) {
		t.Fatalf("%d rows, want all %d", len(rows), 2*len(ref.Cases))
	}
	// The decoder's own error at the moved logit (~3e-5) adds to or subtracts from the 0.01,
	// depending on the CPU's kernels, so the number in the message is compared with a tolerance.
	const prefix = "float32 full logit parity failed on case 2: "
	if msg := err.Error(); !strings.HasPrefix(msg, prefix) {
		t.Errorf("message %q, want it to start %q", msg, prefix)
	} else if got, perr := strconv.ParseFloat(strings.Fields(msg[len(prefix):])[0], 64); perr != nil || math.Abs(got-0.01) > 1e-4 {
		t.Errorf("message %q: error %v (%v), want 0.01 ± 1e-4", msg, got, perr)
	}
	for _, r := range rows {
		wantFail := r.Case == 2
		if r.Failed() != wantFail {
			t.Errorf("case %d %s: failed = %v (max %.3g)", r.Case, r.Path, r.Failed(), r.Stats.MaxAbsoluteError)
		}
		if wantFail && math.Abs(r.Stats.MaxAbsoluteError-0.01) > 1e-4 {
			t.Errorf("case %d %s: max %.5g, want 0.01 ± 1e-4", r.Case, r.Path, r.Stats.MaxAbsoluteError)
		}
	}
	rep := &Report{Rows: rows}
	if got := rep.Err(); got == nil || got.Error() != err.Error() {
		t.Errorf("Report.Err() = %v, want %v", got, err)
	}
	if v := rep.Verdict(); !strings.HasPrefix(v, "FAIL: float32 full logit parity failed on case 2") || !strings.Contains(v, "2 of 8") {
		t.Errorf("verdict %q", v)
	}
}

func TestCompareNonFinite(t *testing.T) {
	want := octlm.Logits{Rows: 2, Vocab: 3, Data: []float32{1, 2, 3, 4, 5, 6}}
	tests := []struct {
		name    string
		poison  float32
		wantMax float64
	}{
		{"NaN", float32(math.NaN()), math.NaN()},
		{"+Inf", float32(math.Inf(1)), math.Inf(1)},
		{"-Inf", float32(math.Inf(-1)), math.Inf(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := octlm.Logits{Rows: 2, Vocab: 3, Data: slices.Clone(want.Data)}
			got.Data[4] = tt.poison
			s, err := Compare(got, want)
			if err != nil {
				t.Fatal(err)
			}
			r := Row{Case: 1, Path: PathCached, Stats: s}
			if s.Finite || !r.Failed() {
				t.Fatalf("non-finite logit passed: %+v", s)
			}
			if fmt.Sprint(s.MaxAbsoluteError) != fmt.Sprint(tt.wantMax) {
				t.Errorf("max = %v, want %v", s.MaxAbsoluteError, tt.wantMax)
			}
			msg := (&GateError{DType: octlm.Float32, Row: r}).Error()
			if want := "float32 cached logit parity failed on case 1: " + fmt.Sprint(tt.wantMax); msg != want {
				t.Errorf("message %q, want %q", msg, want)
			}
			line, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(line, []byte(`"max_absolute_error":null`)) || !bytes.Contains(line, []byte(`"mean_absolute_error":null`)) {
				t.Errorf("JSON %s: want null errors", line)
			}
		})
	}
	// A finite comparison: exact statistics.
	got := octlm.Logits{Rows: 2, Vocab: 3, Data: []float32{1, 2.5, 3, 4, 5, 7}}
	s, err := Compare(got, want)
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxAbsoluteError != 1 || s.MeanAbsoluteError != 0.25 || s.ArgmaxMatches != 2 || !s.Finite {
		t.Errorf("stats %+v, want max 1 mean 0.25 matches 2", s)
	}
	got.Data[0] = 9 // row 0's top token moves
	if s, _ = Compare(got, want); s.ArgmaxMatches != 1 || s.ArgmaxAgreement() != 0.5 {
		t.Errorf("argmax matches %d agreement %v, want 1 and 0.5", s.ArgmaxMatches, s.ArgmaxAgreement())
	}
	if _, err := Compare(octlm.Logits{Rows: 1, Vocab: 3, Data: make([]float32, 3)}, want); err == nil {
		t.Error("shape mismatch accepted")
	}
}

// TestNaNModel runs the protocol on a model whose logits are NaN: a NaN reference... no, a NaN
// decoder, made by poisoning a norm weight through a copied checkpoint.
func TestNaNModel(t *testing.T) {
	dir := t.TempDir()
	src := fixtureDir("tiny-qwen3")
	f, err := loader.Open(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	var tensors []loader.WriteTensor
	for _, info := range f.Tensors() {
		data := make([]byte, info.Size)
		if err := f.ReadRaw(info, data); err != nil {
			t.Fatal(err)
		}
		if info.Name == "model.norm.weight" {
			binary.LittleEndian.PutUint16(data, 0x7fc0) // bfloat16 NaN
		}
		tensors = append(tensors, loader.WriteTensor{Name: info.Name, DType: info.DType, Shape: info.Shape, Data: data})
	}
	f.Close()
	if err := loader.WriteFile(filepath.Join(dir, "model.safetensors"), tensors, nil); err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(filepath.Join(src, "config.json"))
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := octlm.Load(dir, octlm.LoadOptions{Backend: goBackend(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rows, err := Run(m, readRef(t, filepath.Join(src, "reference")), Options{})
	if !errors.Is(err, ErrFailed) || err.Error() != "float32 full logit parity failed on case 0: NaN" {
		t.Fatalf("err = %v, want the NaN gate failure on case 0", err)
	}
	for _, r := range rows {
		if r.Stats.Finite || !r.Failed() {
			t.Errorf("case %d %s passed with NaN logits", r.Case, r.Path)
		}
	}
}

// TestBadInput: references that do not fit the model, or are not references, are ErrBadInput
// (exit status 2), never a gate failure.
func TestBadInput(t *testing.T) {
	mha := readRef(t, filepath.Join(fixtureDir("tiny-qwen3-mha"), "reference"))
	tests := []struct {
		name string
		dir  func(t *testing.T) string
		want string
	}{
		{"missing folder", func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope") }, "no reference folder"},
		{"empty folder", func(t *testing.T) string { return t.TempDir() }, "holds no reference-logits-N.safetensors"},
		{"gap in numbering", func(t *testing.T) string {
			dir := copyReference(t, "tiny-qwen3", nil)
			os.Remove(filepath.Join(dir, ReferenceFileName(1)))
			return dir
		}, "reference-logits-1.safetensors is missing"},
		{"other model's vocabulary", func(t *testing.T) string { return mha.Dir }, "256 vocabulary entries, the model has 320"},
		{"token outside the vocabulary", func(t *testing.T) string {
			return copyReference(t, "tiny-qwen3", func(n int, ids []int, _ *octlm.Logits) []int {
				if n == 1 {
					ids[3] = 320
				}
				return ids
			})
		}, "token 320 at position 3 is outside the model's vocabulary"},
		{"ids and logits lengths differ", func(t *testing.T) string {
			return copyReference(t, "tiny-qwen3", func(n int, ids []int, _ *octlm.Logits) []int {
				if n == 2 {
					return ids[:10]
				}
				return ids
			})
		}, `"logits" has 64 positions but "ids" has 10`},
		{"non-finite reference", func(t *testing.T) string {
			return copyReference(t, "tiny-qwen3", func(n int, ids []int, l *octlm.Logits) []int {
				if n == 0 {
					l.Data[5] = float32(math.Inf(1))
				}
				return ids
			})
		}, "non-finite reference logit"},
		{"not safetensors", func(t *testing.T) string {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, ReferenceFileName(0)), []byte("hello"), 0o644)
			return dir
		}, "reference case 0"},
	}
	m := loadModel(t, "tiny-qwen3", octlm.Float32)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.dir(t)
			ref, err := ReadReference(dir)
			if err == nil {
				_, err = Run(m, ref, Options{})
			}
			if !errors.Is(err, ErrBadInput) || errors.Is(err, ErrFailed) {
				t.Fatalf("err = %v, want bad input", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("message %q lacks %q", err, tt.want)
			}
		})
	}
	ref := readRef(t, filepath.Join(fixtureDir("tiny-qwen3"), "reference"))
	cases, _ := ReadCases(filepath.Join(fixtureDir("tiny-qwen3"), CasesFileName))
	cases[1][0]++
	if err := ref.CheckCases(cases); !errors.Is(err, ErrBadInput) {
		t.Errorf("CheckCases with other prompts: %v", err)
	}
	if err := ref.CheckCases(cases[:2]); !errors.Is(err, ErrBadInput) {
		t.Errorf("CheckCases with fewer cases: %v", err)
	}
	if _, err := Run(loadModel(t, "tiny-qwen3", octlm.BFloat16), ref, Options{}); !errors.Is(err, ErrBadInput) {
		t.Errorf("gated run on bf16 weights: %v", err)
	}
}

// TestJSONL checks the exact key sets of every row type, and that values round-trip.
func TestJSONL(t *testing.T) {
	ref := readRef(t, filepath.Join(fixtureDir("tiny-qwen3"), "reference"))
	m := loadModel(t, "tiny-qwen3", octlm.Float32)
	rows, err := Run(m, ref, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkpoint, err := CheckpointManifest(fixtureDir("tiny-qwen3"), nil)
	if err != nil {
		t.Fatal(err)
	}
	refFiles, err := ReferenceManifest(ref)
	if err != nil {
		t.Fatal(err)
	}
	rep := &Report{
		Run: RunInfo{Model: "tiny", Reference: ref.Dir, Backend: "go", Cases: len(ref.Cases), Checkpoint: checkpoint,
			ReferenceFiles: refFiles, Versions: Versions(), HalfDTypes: []octlm.DType{octlm.BFloat16}, PeakRSSBytes: 123 << 20},
		Rows:   rows,
		Half:   []HalfRow{{DType: octlm.BFloat16, Case: 0, Path: PathFull, Stats: rows[0].Stats}},
		Greedy: []GreedyRow{{DType: octlm.BFloat16, Case: 0, PromptPositions: 1, Float32IDs: []int{1, 2, 3, 4}, IDs: []int{1, 2, 9, 4}}},
	}
	var buf bytes.Buffer
	if err := rep.WriteJSONL(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 1+len(rows)+2 {
		t.Fatalf("%d lines, want %d", len(lines), 1+len(rows)+2)
	}
	keys := map[string][]string{
		"run": {"type", "model", "reference", "backend", "dtype", "half_dtypes", "tolerance", "cases", "checkpoint",
			"reference_files", "versions", "peak_rss_bytes"},
		"logit_parity": {"type", "case", "path", "positions", "max_absolute_error", "mean_absolute_error",
			"argmax_agreement", "argmax_matches", "tolerance"},
		"half_logit_parity": {"type", "dtype", "case", "path", "positions", "max_absolute_error", "mean_absolute_error",
			"argmax_agreement", "argmax_matches"},
		"half_greedy_agreement": {"type", "dtype", "case", "prompt_positions", "tokens", "matches", "agreement",
			"common_prefix", "float32_ids", "ids"},
	}
	var types []string
	for i, line := range lines {
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		typ, _ := row["type"].(string)
		types = append(types, typ)
		var got []string
		for k := range row {
			got = append(got, k)
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(keys[typ]))
		if !slices.Equal(got, want) {
			t.Errorf("line %d (%s): keys %v\nwant %v", i, typ, got, want)
		}
		switch typ {
		case "logit_parity":
			r := rows[i-1]
			if row["case"] != float64(r.Case) || row["path"] != r.Path || row["positions"] != float64(r.Stats.Positions) ||
				row["max_absolute_error"] != r.Stats.MaxAbsoluteError || row["argmax_matches"] != float64(r.Stats.ArgmaxMatches) ||
				row["argmax_agreement"] != 1.0 || row["tolerance"] != Tolerance {
				t.Errorf("line %d: %s does not hold row %+v", i, line, r)
			}
		case "run":
			if row["dtype"] != "f32" || row["tolerance"] != 1e-3 || row["cases"] != 4.0 || row["peak_rss_bytes"] != float64(123<<20) {
				t.Errorf("run line %s", line)
			}
			ck := row["checkpoint"].(map[string]any)
			if len(ck) != 8 || len(ck["model.safetensors"].(string)) != 64 || len(ck["config.json"].(string)) != 64 ||
				len(ck["reference/reference-logits-3.safetensors"].(string)) != 64 {
				t.Errorf("checkpoint manifest %v", ck)
			}
			// A test binary records no dependency versions; the octlm binary does (see the cmd tests).
			v := row["versions"].(map[string]any)
			if v["go"] != runtime.Version() || len(v) != 5 || v["gomlx"] == nil || v["octlm"] == nil {
				t.Errorf("versions %v", v)
			}
		case "half_greedy_agreement":
			if row["matches"] != 3.0 || row["common_prefix"] != 2.0 || row["tokens"] != 4.0 || row["agreement"] != 0.75 {
				t.Errorf("greedy line %s", line)
			}
		}
	}
	want := append([]string{"run"}, slices.Repeat([]string{"logit_parity"}, len(rows))...)
	want = append(want, "half_logit_parity", "half_greedy_agreement")
	if !slices.Equal(types, want) {
		t.Errorf("line types %v, want %v", types, want)
	}
}

// TestManifestHashes checks the checkpoint manifest against a hash computed here.
func TestManifestHashes(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"config.json", "model.safetensors"} {
		data, err := os.ReadFile(filepath.Join(fixtureDir("tiny-qwen3"), name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, name), data, 0o644)
	}
	before, err := CheckpointManifest(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.json")
	data, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, append(data, ' '), 0o644)
	after, err := CheckpointManifest(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if before["config.json"] == after["config.json"] || before["model.safetensors"] != after["model.safetensors"] {
		t.Errorf("manifest did not follow the edit: before %v after %v", before, after)
	}
	if _, err := CheckpointManifest(t.TempDir(), nil); !errors.Is(err, ErrBadInput) {
		t.Errorf("empty folder: %v", err)
	}
}

// TestHalfPrecision measures bf16 and f16 against the float32 reference on tiny-qwen3: the
// report the post left unmeasured. Half precision is not gated, but its errors must land far
// above float32's and far below a broken model's.
func TestHalfPrecision(t *testing.T) {
	ref := readRef(t, filepath.Join(fixtureDir("tiny-qwen3"), "reference"))
	f32 := loadModel(t, "tiny-qwen3", octlm.Float32)
	float32IDs, err := Greedy(f32, ref, GreedyTokens, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, ids := range float32IDs {
		if len(ids) != GreedyTokens {
			t.Fatalf("case %d: %d greedy tokens", i, len(ids))
		}
	}
	for _, dtype := range []octlm.DType{octlm.BFloat16, octlm.Float16} {
		t.Run(string(dtype), func(t *testing.T) {
			m := loadModel(t, "tiny-qwen3", dtype)
			rows, greedy, err := RunHalf(m, ref, float32IDs, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 2*len(ref.Cases) || len(greedy) != len(ref.Cases) {
				t.Fatalf("%d rows and %d greedy rows for %d cases", len(rows), len(greedy), len(ref.Cases))
			}
			for _, r := range rows {
				t.Logf("%s case %d %-6s: max %.3g mean %.3g argmax %d/%d", r.DType, r.Case, r.Path,
					r.Stats.MaxAbsoluteError, r.Stats.MeanAbsoluteError, r.Stats.ArgmaxMatches, r.Stats.Positions)
				if r.DType != dtype || !r.Stats.Finite || r.Stats.MaxAbsoluteError < 1e-3 || r.Stats.MaxAbsoluteError > 5 {
					t.Errorf("%s case %d %s: max %.3g outside (1e-3, 5)", dtype, r.Case, r.Path, r.Stats.MaxAbsoluteError)
				}
			}
			for _, g := range greedy {
				t.Logf("%s case %d greedy: %d/%d same, common prefix %d", g.DType, g.Case, g.Matches(), g.Tokens(), g.CommonPrefix())
				if g.Tokens() != GreedyTokens || len(g.IDs) != GreedyTokens || g.CommonPrefix() > g.Matches() {
					t.Errorf("greedy row %+v", g)
				}
			}
		})
	}
}

// TestSplit pins the cached path's split point, max(1, T/2), as in the protocol.
func TestSplit(t *testing.T) {
	for _, tt := range []struct{ n, want int }{{1, 1}, {2, 1}, {3, 1}, {7, 3}, {64, 32}, {188, 94}} {
		if got := Split(tt.n); got != tt.want {
			t.Errorf("Split(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}

// TestFormatError keeps the failure message readable without hiding a value just over the gate.
func TestFormatError(t *testing.T) {
	for _, tt := range []struct {
		x    float64
		want string
	}{{0.0132, "0.0132"}, {0.013249, "0.0132"}, {0.0010004, "0.0010004"}, {2.5, "2.5"}, {math.NaN(), "NaN"}, {math.Inf(1), "+Inf"}} {
		if got := formatError(tt.x); got != tt.want {
			t.Errorf("formatError(%v) = %q, want %q", tt.x, got, tt.want)
		}
	}
}

// TestReferenceScript pins the contract between reference.py and ReadReference: file and tensor
// names, dtypes, and the settings the protocol requires of the reference.
func TestReferenceScript(t *testing.T) {
	src, err := os.ReadFile("reference.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`f"reference-logits-{index}.safetensors"`, `"ids"`, `"logits"`, "torch.int64", "torch.float32",
		`"attn_implementation": "eager"`, "allow_tf32 = False", ".eval()", "use_cache=False", "cases.json",
	} {
		if !bytes.Contains(src, []byte(want)) {
			t.Errorf("reference.py lacks %s", want)
		}
	}
	if ReferenceFileName(3) != "reference-logits-3.safetensors" {
		t.Errorf("ReferenceFileName(3) = %s", ReferenceFileName(3))
	}
}

// TestLongFixturePrefix runs the first positions of tiny-qwen3-long's 40,960-token case (one kv
// head, head_dim 128; the logits at a position depend only on the tokens up to it, so a prefix
// of a case is a case) through both paths: the prompt runs in several chunks. The whole case
// runs in CI as `octlm parity --model testdata/tiny-qwen3-long`.
func TestLongFixturePrefix(t *testing.T) {
	const positions = 4096
	m := loadModel(t, "tiny-qwen3-long", octlm.Float32)
	dir := copyReference(t, "tiny-qwen3-long", func(_ int, ids []int, l *octlm.Logits) []int {
		l.Rows, l.Data = positions, l.Data[:positions*l.Vocab]
		return ids[:positions]
	})
	rows, err := Run(m, readRef(t, dir), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		t.Logf("%s: max %.3g, argmax %d/%d", r.Path, r.Stats.MaxAbsoluteError, r.Stats.ArgmaxMatches, r.Stats.Positions)
		if r.Stats.Positions != positions || !(r.Stats.MaxAbsoluteError < 2e-4) || r.Stats.ArgmaxMatches < positions-2 {
			t.Errorf("%s path: %d positions, max abs error %.3g, argmax %d: want %d, < 2e-4, all but ties",
				r.Path, r.Stats.Positions, r.Stats.MaxAbsoluteError, r.Stats.ArgmaxMatches, positions)
		}
	}
}
