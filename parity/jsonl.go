package parity

import (
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/octlm/octlm/octlm"
)

// The JSONL lines of a run, one struct for each shape: a line holds exactly the fields of its
// struct, in its order, and nothing else decides what a line holds.

// runLine is the first line of a run (type "run").
type runLine struct {
	Type              string            `json:"type"`
	Model             string            `json:"model"`
	Adapter           string            `json:"adapter,omitempty"`
	AdapterFiles      map[string]string `json:"adapter_files,omitempty"`
	Reference         string            `json:"reference"`
	Backend           string            `json:"backend"`
	Plugin            string            `json:"plugin,omitempty"`
	DType             string            `json:"dtype"`
	HalfDTypes        []string          `json:"half_dtypes"`
	Tolerance         float64           `json:"tolerance"`
	Cases             int               `json:"cases"`
	Checkpoint        map[string]string `json:"checkpoint"`
	ReferenceFiles    map[string]string `json:"reference_files"`
	ReferenceMetadata map[string]string `json:"reference_metadata,omitempty"`
	Versions          map[string]string `json:"versions"`
	PeakRSSBytes      int64             `json:"peak_rss_bytes,omitempty"`
}

// logitLine is one logit comparison: a gated Row (type "logit_parity", with tolerance and no
// dtype) or a HalfRow (type "half_logit_parity", with dtype and no tolerance). Which of the two
// fields a line holds follows from the pointer being set, never from its value. Non-finite
// errors are null, which JSON can hold.
type logitLine struct {
	Type              string   `json:"type"`
	DType             *string  `json:"dtype,omitempty"`
	Case              int      `json:"case"`
	Path              string   `json:"path"`
	Positions         int      `json:"positions"`
	MaxAbsoluteError  *float64 `json:"max_absolute_error"`
	MeanAbsoluteError *float64 `json:"mean_absolute_error"`
	ArgmaxAgreement   float64  `json:"argmax_agreement"`
	ArgmaxMatches     int      `json:"argmax_matches"`
	Tolerance         *float64 `json:"tolerance,omitempty"`
}

// greedyLine is one greedy-token comparison (type "half_greedy_agreement").
type greedyLine struct {
	Type            string  `json:"type"`
	DType           string  `json:"dtype"`
	Case            int     `json:"case"`
	PromptPositions int     `json:"prompt_positions"`
	Tokens          int     `json:"tokens"`
	Matches         int     `json:"matches"`
	Agreement       float64 `json:"agreement"`
	CommonPrefix    int     `json:"common_prefix"`
	Float32IDs      []int   `json:"float32_ids"`
	IDs             []int   `json:"ids"`
}

// MarshalJSON writes the run line.
func (r RunInfo) MarshalJSON() ([]byte, error) {
	half := make([]string, len(r.HalfDTypes))
	for i, d := range r.HalfDTypes {
		half[i] = string(d)
	}
	return json.Marshal(runLine{
		Type: "run", Model: r.Model, Adapter: r.Adapter, AdapterFiles: r.AdapterFiles, Reference: r.Reference, Backend: r.Backend, Plugin: r.Plugin,
		DType: string(octlm.Float32), HalfDTypes: half, Tolerance: Tolerance, Cases: r.Cases,
		Checkpoint: r.Checkpoint, ReferenceFiles: r.ReferenceFiles, ReferenceMetadata: r.ReferenceMetadata,
		Versions: r.Versions, PeakRSSBytes: r.PeakRSSBytes,
	})
}

// newLogitLine is the line of type typ for case c through path, with neither dtype nor tolerance.
func newLogitLine(typ string, c int, path string, s Stats) logitLine {
	return logitLine{
		Type: typ, Case: c, Path: path, Positions: s.Positions,
		MaxAbsoluteError: finite(s.MaxAbsoluteError), MeanAbsoluteError: finite(s.MeanAbsoluteError),
		ArgmaxAgreement: s.ArgmaxAgreement(), ArgmaxMatches: s.ArgmaxMatches,
	}
}

// MarshalJSON writes the row's JSONL form.
func (r Row) MarshalJSON() ([]byte, error) {
	line := newLogitLine("logit_parity", r.Case, r.Path, r.Stats)
	tolerance := Tolerance
	line.Tolerance = &tolerance
	return json.Marshal(line)
}

// MarshalJSON writes the row's JSONL form.
func (r HalfRow) MarshalJSON() ([]byte, error) {
	line := newLogitLine("half_logit_parity", r.Case, r.Path, r.Stats)
	dtype := string(r.DType)
	line.DType = &dtype
	return json.Marshal(line)
}

// MarshalJSON writes the row's JSONL form.
func (r GreedyRow) MarshalJSON() ([]byte, error) {
	return json.Marshal(greedyLine{
		Type: "half_greedy_agreement", DType: string(r.DType), Case: r.Case, PromptPositions: r.PromptPositions,
		Tokens: r.Tokens(), Matches: r.Matches(), Agreement: r.Agreement(), CommonPrefix: r.CommonPrefix(),
		Float32IDs: r.Float32IDs, IDs: r.IDs,
	})
}

// finite is nil for NaN and infinities, which JSON cannot hold.
func finite(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// WriteJSONL writes the run line, then the gated rows, then the half-precision logit rows and
// greedy rows, one JSON object per line.
func (r *Report) WriteJSONL(w io.Writer) error {
	enc := json.NewEncoder(w)
	lines := []any{r.Run}
	for _, row := range r.Rows {
		lines = append(lines, row)
	}
	for _, row := range r.Half {
		lines = append(lines, row)
	}
	for _, row := range r.Greedy {
		lines = append(lines, row)
	}
	for _, line := range lines {
		if err := enc.Encode(line); err != nil {
			return fmt.Errorf("parity: writing JSONL: %w", err)
		}
	}
	return nil
}
