package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const qwenTokenizerDir = "../../testdata/qwen3-tokenizer"

func TestTemplateGolden(t *testing.T) {
	in, want := goldenPair(t, "chat")
	var out, errOut bytes.Buffer
	if err := runTemplate([]string{"--model", qwenTokenizerDir}, bytes.NewReader(in), &out, &errOut); err != nil {
		t.Fatalf("runTemplate: %v (stderr %q)", err, errOut.String())
	}
	sameBytes(t, out.Bytes(), want)
}

// goldenPair reads the fixture NAME.jsonl of the Qwen3 tokenizer folder and the output
// expected of it, NAME.expected.jsonl.
func goldenPair(t *testing.T, name string) (in, want []byte) {
	t.Helper()
	in, err := os.ReadFile(filepath.Join(qwenTokenizerDir, name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want, err = os.ReadFile(filepath.Join(qwenTokenizerDir, name+".expected.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return in, want
}

// sameBytes fails unless got is want byte for byte, naming the first line that differs.
func sameBytes(t *testing.T, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range min(len(gotLines), len(wantLines)) {
		if gotLines[i] != wantLines[i] {
			t.Fatalf("line %d:\n got %.200s\nwant %.200s", i+1, gotLines[i], wantLines[i])
		}
	}
	t.Fatalf("%d output lines, want %d", len(gotLines), len(wantLines))
}

func TestTemplateErrors(t *testing.T) {
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "tokenizer_config.json"), []byte(`{"chat_template": "{{ messages }}"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		want  string
		usage bool
	}{
		{"no model", nil, "", "--model DIR is required", true},
		{"bad flag", []string{"--modle", "x"}, "", "flag provided but not defined", true},
		{"positional argument", []string{"--model", qwenTokenizerDir, "chat.jsonl"}, "", `unexpected arguments ["chat.jsonl"]`, true},
		{"another template", []string{"--model", other}, "", "chat template is not Qwen3's", false},
		{"missing folder", []string{"--model", filepath.Join(other, "nope")}, "", "no chat template", false},
		{"bad line", []string{"--model", qwenTokenizerDir}, `{"messages":[{"role":"user","content":"q"}]}` + "\n\n" + `{"messages": [}` + "\n",
			"stdin line 3: conversation:", false},
		{"misspelt field", []string{"--model", qwenTokenizerDir}, `{"messages":[{"role":"user","content":"q"}],"enable_thinkng":false}`,
			`stdin line 1: conversation: json: unknown field "enable_thinkng"`, false},
		{"two objects on a line", []string{"--model", qwenTokenizerDir}, `{"messages":[{"role":"user","content":"q"}]} {}`,
			"stdin line 1: conversation: trailing data", false},
		{"render error", []string{"--model", qwenTokenizerDir}, `{"messages":[{"role":"user","content":"q"},{"role":"function","content":"x"}]}`,
			`stdin line 1: chat: message 1: unknown role "function"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := runTemplate(tc.args, strings.NewReader(tc.stdin), &out, &errOut)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			var ue usageError
			if errors.As(err, &ue) != tc.usage {
				t.Errorf("usage error = %v, want %v", !tc.usage, tc.usage)
			}
			if errors.Is(err, errCheckFailed) {
				t.Errorf("bad input reported as a failed check")
			}
		})
	}
}

func TestTemplateLastLineWithoutNewline(t *testing.T) {
	var out bytes.Buffer
	in := `{"messages":[{"role":"user","content":"a"}]}` + "\n" + `{"messages":[{"role":"user","content":"b <&>"}],"add_generation_prompt":true,"enable_thinking":false}`
	if err := runTemplate([]string{"--model", qwenTokenizerDir}, strings.NewReader(in), &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	want := `"<|im_start|>user\na<|im_end|>\n"` + "\n" +
		`"<|im_start|>user\nb <&><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"` + "\n"
	if out.String() != want {
		t.Errorf("got %q\nwant %q", out.String(), want)
	}
}
