package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octlm/octlm/octlm/tokenizer"
)

func TestTokenizeCorpus(t *testing.T) {
	in, want := goldenPair(t, "corpus")
	var out, errOut bytes.Buffer
	if err := runTokenizeIO([]string{"--model", qwenTokenizerDir}, bytes.NewReader(in), &out, &errOut); err != nil {
		t.Fatalf("tokenize: %v (stderr %q)", err, errOut.String())
	}
	sameBytes(t, out.Bytes(), want)

	// --decode writes the text of each line's IDs. The path of tokenizer.json works as --model too.
	out.Reset()
	model := filepath.Join(qwenTokenizerDir, "tokenizer.json")
	if err := runTokenizeIO([]string{"--model", model, "--decode"}, bytes.NewReader(want), &out, &errOut); err != nil {
		t.Fatalf("tokenize --decode: %v", err)
	}
	tok, err := tokenizer.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	idLines := strings.Split(strings.TrimSuffix(string(want), "\n"), "\n")
	decoded := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(decoded) != len(idLines) {
		t.Fatalf("--decode wrote %d lines, want %d", len(decoded), len(idLines))
	}
	for i := range idLines {
		var ids []int
		var got string
		if err := json.Unmarshal([]byte(idLines[i]), &ids); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(decoded[i]), &got); err != nil {
			t.Fatalf("--decode line %d: %v", i+1, err)
		}
		if text, err := tok.Decode(ids); err != nil || got != text {
			t.Errorf("--decode line %d differs from Decode (%v)", i+1, err)
		}
	}
}

func TestTokenizeSmall(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		in, want string
	}{
		{nil, "\"hello<|im_end|>\"\n\n\"\"\n", "[14990,151645]\n[]\n"},
		{[]string{"--decode"}, "[14990,151645]\n[]\n[27,1,29]\n", "\"hello<|im_end|>\"\n\"\"\n\"<\\\">\"\n"},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"--model", qwenTokenizerDir}, tc.args...)
		if err := runTokenizeIO(args, strings.NewReader(tc.in), &out, &errOut); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if out.String() != tc.want {
			t.Errorf("%v on %q: got %q, want %q", tc.args, tc.in, out.String(), tc.want)
		}
	}
}

func TestTokenizeErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		want  string
		usage bool
	}{
		{"no model", nil, "", "--model is required", true},
		{"bad flag", []string{"--modle", "x"}, "", "flag provided but not defined", true},
		{"positional argument", []string{"--model", qwenTokenizerDir, "x"}, "", `unexpected arguments ["x"]`, true},
		{"missing model", []string{"--model", filepath.Join(t.TempDir(), "nope")}, "", "no such file", false},
		{"not a string", []string{"--model", qwenTokenizerDir}, "\"a\"\n[1]\n", "stdin line 2: want a JSON string", false},
		{"not IDs", []string{"--model", qwenTokenizerDir, "--decode"}, "\"a\"\n", "stdin line 1: want a JSON array of token IDs", false},
		{"unknown ID", []string{"--model", qwenTokenizerDir, "--decode"}, "[1]\n[1,151669]\n", "stdin line 2: tokenizer: token ID 151669", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := runTokenizeIO(tc.args, strings.NewReader(tc.stdin), &out, &errOut)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			var ue usageError
			if errors.As(err, &ue) != tc.usage {
				t.Errorf("usage error: %v, want %v", errors.As(err, &ue), tc.usage)
			}
		})
	}
}

// TestTokenizeText: --text reads plain lines (no JSON quoting), one array of IDs a line, a blank
// line giving []; a last line without a newline counts; "\r\n" endings are not part of the text.
func TestTokenizeText(t *testing.T) {
	tok, err := tokenizer.LoadDir(qwenTokenizerDir)
	if err != nil {
		t.Fatal(err)
	}
	in := "Hello world\n\n  two \"quoted\" words\r\nend<|im_end|>"
	var want bytes.Buffer
	for _, line := range []string{"Hello world", "", "  two \"quoted\" words", "end<|im_end|>"} {
		ids := tok.Encode(line)
		if ids == nil {
			ids = []int{}
		}
		b, _ := json.Marshal(ids)
		want.Write(append(b, '\n'))
	}
	var out, errOut bytes.Buffer
	if err := runTokenizeIO([]string{"--model", qwenTokenizerDir, "--text"}, strings.NewReader(in), &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if out.String() != want.String() {
		t.Errorf("--text wrote\n%s\nwant\n%s", out.String(), want.String())
	}
	if !strings.HasPrefix(out.String(), "[9707,1879]\n[]\n") {
		t.Errorf("Hello world is not [9707,1879]: %q", out.String())
	}
	var ue usageError
	if err := runTokenizeIO([]string{"--model", qwenTokenizerDir, "--text", "--decode"}, strings.NewReader(""), &out, &errOut); !errors.As(err, &ue) {
		t.Errorf("--text --decode: %v, want a usage error", err)
	}
}
