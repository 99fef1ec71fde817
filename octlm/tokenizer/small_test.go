package tokenizer

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestSmallFixtures checks what the Qwen3 file does not exercise against the reference's answers
// (testdata/make_small.py, make_expected.js): added-token flags, overlapping added tokens, added
// tokens that reuse vocabulary IDs, tokens outside the byte-level alphabet, the Llama 3 digit
// rule and ignore_merges.
func TestSmallFixtures(t *testing.T) {
	casesData, err := os.ReadFile("testdata/cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	cases := bytes.Split(bytes.TrimSuffix(casesData, []byte("\n")), []byte("\n"))
	for _, name := range []string{"small", "small-llama3"} {
		t.Run(name, func(t *testing.T) {
			tok, err := Load(filepath.Join("testdata", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			expData, err := os.ReadFile(filepath.Join("testdata", name+".expected.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			exp := bytes.Split(bytes.TrimSuffix(expData, []byte("\n")), []byte("\n"))
			if len(exp) != len(cases) {
				t.Fatalf("%d cases, %d expected", len(cases), len(exp))
			}
			for i := range cases {
				var text string
				var want struct {
					IDs     []int  `json:"ids"`
					Decoded string `json:"decoded"`
				}
				if err := json.Unmarshal(cases[i], &text); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(exp[i], &want); err != nil {
					t.Fatal(err)
				}
				got := tok.Encode(text)
				if firstDiff(got, want.IDs) >= 0 {
					t.Errorf("Encode(%+q) = %v, want %v", text, got, want.IDs)
				}
				dec, err := tok.Decode(want.IDs)
				if err != nil || dec != want.Decoded {
					t.Errorf("Decode(%v) = %+q, %v; want %+q", want.IDs, dec, err, want.Decoded)
				}
			}
		})
	}
}
