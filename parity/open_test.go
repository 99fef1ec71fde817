package parity

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// copyFixture copies the tiny-qwen3 checkpoint's config.json (its context length set to
// context when positive) and its reference folder into a new folder, with cases as its
// cases.json ("" for none).
func copyFixture(t *testing.T, context int, cases string) string {
	t.Helper()
	src, dir := fixtureDir("tiny-qwen3"), t.TempDir()
	config, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if context > 0 {
		re := regexp.MustCompile(`"max_position_embeddings": *\d+`)
		if !re.Match(config) {
			t.Fatal("no max_position_embeddings in the fixture's config.json")
		}
		config = re.ReplaceAll(config, []byte(`"max_position_embeddings": `+strconv.Itoa(context)))
	}
	write := func(path string, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "config.json"), config)
	if cases != "" {
		write(filepath.Join(dir, CasesFileName), []byte(cases))
	}
	refDir := filepath.Join(dir, ReferenceDirName)
	if err := os.Mkdir(refDir, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(src, ReferenceDirName))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, ReferenceDirName, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		write(filepath.Join(refDir, e.Name()), data)
	}
	return dir
}

// TestOpenReference: the reference is checked against the checkpoint's configuration always,
// against its cases.json only when it is the checkpoint's own reference folder, and against the
// room the greedy tokens need only when asked; each refusal is ErrBadInput naming what differs.
func TestOpenReference(t *testing.T) {
	tiny := fixtureDir("tiny-qwen3")
	own := readRef(t, filepath.Join(tiny, ReferenceDirName))
	longest := 0
	for _, c := range own.Cases {
		longest = max(longest, c.Positions())
	}
	otherCases := copyFixture(t, 0, "[[1, 2, 3]]")
	tests := []struct {
		name           string
		dir, refDir    string
		greedy         int
		want           string // a substring of the error; "" for none
		badInput, none bool
	}{
		{"the checkpoint's own", tiny, "", 0, "", false, false},
		{"the own folder named", tiny, filepath.Join(tiny, ReferenceDirName), 0, "", false, false},
		{"with room for the greedy tokens", tiny, "", GreedyTokens, "", false, false},
		{"cases.json lists other prompts", otherCases, "", 0, "", true, false},
		{"another folder: cases.json not its list", otherCases, filepath.Join(tiny, ReferenceDirName), 0, "", false, false},
		{"vocabulary of another model", tiny, filepath.Join(fixtureDir("tiny-qwen3-mha"), ReferenceDirName), 0, "vocabulary", true, false},
		{"a case past the context", copyFixture(t, longest-1, ""), "", 0, "exceed the model's context length", true, false},
		{"no room for the greedy tokens", copyFixture(t, longest+1, ""), "", GreedyTokens, "greedy tokens", true, false},
		{"no reference folder", t.TempDir(), "", 0, "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, err := OpenReference(tt.dir, tt.refDir, tt.greedy)
			switch {
			case tt.none:
				if !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("err = %v, want one matching os.ErrNotExist", err)
				}
			case !tt.badInput:
				if err != nil {
					t.Fatal(err)
				}
				if len(ref.Cases) != len(own.Cases) {
					t.Errorf("%d cases, want %d", len(ref.Cases), len(own.Cases))
				}
			case !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), tt.want):
				t.Errorf("err = %v, want ErrBadInput saying %q", err, tt.want)
			}
		})
	}
}
