package parity

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTraceRows: a row per hidden state, the embedding first, the first parted position shown
// only where there is one; the verdict names where the numbers part; the written table's
// columns line up.
func TestTraceRows(t *testing.T) {
	embedding := LayerTrace{Layer: -1, Type: "embedding", FirstParted: -1}
	tests := []struct {
		name    string
		trace   CaseTrace
		rows    [][]string
		verdict string
	}{
		{"agrees", CaseTrace{Case: 3, Parted: -1, Layers: []LayerTrace{embedding,
			{Layer: 0, Type: "full_attention", MaxAbsoluteError: 1e-6, MaxPosition: 2, Scaled: 1e-6, FirstParted: -1}}},
			[][]string{{"embedding", "embedding", "0.00e+00", "0", "0.00e+00", "—"},
				{"after layer 0", "full_attention", "1.00e-06", "2", "1.00e-06", "—"}},
			"case 3: every hidden state agrees within the tolerance"},
		{"parts at layer 0", CaseTrace{Case: 2, Parted: 1, Layers: []LayerTrace{embedding,
			{Layer: 0, Type: "linear_attention", MaxAbsoluteError: 0.5, MaxPosition: 7, Scaled: 0.01, FirstParted: 3}}},
			[][]string{{"embedding", "embedding", "0.00e+00", "0", "0.00e+00", "—"},
				{"after layer 0", "linear_attention", "5.00e-01", "7", "1.00e-02", "3"}},
			"case 2: the numbers part first after layer 0 (linear_attention), at position 3"},
		{"parts at the embedding", CaseTrace{Case: 0, Parted: 0, Layers: []LayerTrace{
			{Layer: -1, Type: "embedding", MaxAbsoluteError: 2, Scaled: 2, FirstParted: 0}}},
			[][]string{{"embedding", "embedding", "2.00e+00", "0", "2.00e+00", "0"}},
			"case 0: the numbers part first after the embedding, at position 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := tt.trace.Rows()
			if !slices.EqualFunc(rows, tt.rows, slices.Equal) {
				t.Errorf("rows %q, want %q", rows, tt.rows)
			}
			if got := tt.trace.Verdict(); got != tt.verdict {
				t.Errorf("verdict %q, want %q", got, tt.verdict)
			}
			var b bytes.Buffer
			if err := WriteTrace(&b, []CaseTrace{tt.trace}, TraceTolerance); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(b.String(), "\n")
			if len(lines) < 3+len(rows) || lines[2+len(rows)] != tt.verdict {
				t.Fatalf("written:\n%s", b.String())
			}
			// Every cell of the last column starts where its header does.
			col := utf8.RuneCountInString(lines[1][:strings.Index(lines[1], "first position")])
			for _, line := range lines[2 : 2+len(rows)] {
				if r := []rune(line); len(r) <= col || r[col-1] != ' ' || r[col] == ' ' {
					t.Errorf("line %q: last column not at rune %d", line, col)
				}
			}
		})
	}
}
