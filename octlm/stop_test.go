package octlm

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/octlm/octlm/octlm/tokenizer"
)

// TestReadStopIDs reads generation_config.json's eos_token_id, else config.json's, else Qwen3's
// stop tokens as the tokenizer numbers them; a file that is there but unreadable is an error
// naming it, not a silent fall back.
func TestReadStopIDs(t *testing.T) {
	qwenTok, err := tokenizer.Load(filepath.Join(fixtureDir("qwen3-tokenizer"), "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		genConfig  string // "" writes no generation_config.json
		config     string // "" writes no config.json
		vocab      TokenLookup
		want       []int
		wantErrFor string // the file the error names; "" for none
	}{
		{"list", `{"eos_token_id": [151645, 151643]}`, "", nil, []int{151645, 151643}, ""},
		{"one", `{"eos_token_id": 7}`, "", nil, []int{7}, ""},
		{"empty list", `{"eos_token_id": []}`, `{"eos_token_id": 3}`, nil, []int{}, ""},
		{"null is absent", `{"eos_token_id": null}`, "", nil, nil, ""},
		{"absent", `{"bos_token_id": 1}`, "", nil, nil, ""},
		{"no file", "", "", nil, nil, ""},
		{"config.json next", `{"bos_token_id": 1}`, `{"eos_token_id": 5}`, nil, []int{5}, ""},
		{"the tokenizer's Qwen3 stop tokens last", "", `{}`, qwenTok, Qwen3StopIDs(), ""},
		{"a vocabulary without them", "", "", stubVocab{}, nil, ""},
		{"malformed", `{"eos_token_id": [1, 2`, "", nil, nil, "generation_config.json"},
		{"wrong type", `{"eos_token_id": "eos"}`, "", nil, nil, "generation_config.json"},
		{"config.json wrong type", "", `{"eos_token_id": {}}`, nil, nil, "config.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range map[string]string{"generation_config.json": tt.genConfig, "config.json": tt.config} {
				if text == "" {
					continue
				}
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ReadStopIDs(dir, tt.vocab)
			if tt.wantErrFor != "" {
				if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, tt.wantErrFor)) {
					t.Fatalf("err = %v, want one naming %s", err, tt.wantErrFor)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
				t.Errorf("stop IDs %v, want %v", got, tt.want)
			}
		})
	}
}

// stubVocab knows no token.
type stubVocab struct{}

func (stubVocab) TokenID(string) (int, bool) { return 0, false }
