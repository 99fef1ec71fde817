package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/octlm/octlm/xla"
)

// TestGenerateSeveralPrompts: several prompts, decoded together, each give what generating that
// prompt alone gives (IDs, text, stop reason): greedy and sampled with a seed, raw text, chat
// messages and token IDs; --json prints a list, the text output one section per prompt.
func TestGenerateSeveralPrompts(t *testing.T) {
	t.Setenv(xla.EnvBackend, "go")
	tok := tokenizerModel(t)
	tests := []struct {
		name    string
		model   string
		flag    string // repeated, once per prompt
		prompts []string
		extra   []string
	}{
		{"greedy IDs", testdata("tiny-qwen3"), "--prompt-ids", []string{"165,77,202", "77,202,24,37,274", "5"}, []string{"--temperature", "0", "-n", "12"}},
		{"IDs with the adapter", testdata("tiny-qwen3"), "--prompt-ids", []string{"165,77,202", "9,8"}, []string{"--temperature", "0", "-n", "10", "--adapter", fixtureAdapter()}},
		{"sampled text", tok, "-p", []string{"Once upon a time", "Hello", "The capital of France is"}, []string{"--seed", "7", "-n", "8"}},
		{"chat messages", tok, "--chat", []string{"What is 2 + 2?", "Hi"}, []string{"--think=false", "--temperature", "0", "-n", "6"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--model", tt.model, "--json"}, tt.extra...)
			var together []generationResult
			var all []string
			for _, p := range tt.prompts {
				all = append(all, tt.flag, p)
			}
			generateJSON(t, append(args, all...), &together)
			if len(together) != len(tt.prompts) {
				t.Fatalf("%d results for %d prompts", len(together), len(tt.prompts))
			}
			for i, p := range tt.prompts {
				var alone generationResult
				generateJSON(t, append(args, tt.flag, p), &alone)
				got := together[i]
				if !reflect.DeepEqual(got.PromptIDs, alone.PromptIDs) || !reflect.DeepEqual(got.GeneratedIDs, alone.GeneratedIDs) ||
					got.Text != alone.Text || got.StopReason != alone.StopReason || got.Content != alone.Content {
					t.Errorf("prompt %d together: %v %q (%s)\nalone: %v %q (%s)", i+1, got.GeneratedIDs, got.Text, got.StopReason,
						alone.GeneratedIDs, alone.Text, alone.StopReason)
				}
			}

			// The text output: a [prompt I of N] line before each prompt's output, in order.
			var stdout, stderr bytes.Buffer
			if err := runGenerate(append(append([]string{"--model", tt.model}, tt.extra...), all...), &stdout, &stderr); err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			rest := stdout.String()
			for i := range tt.prompts {
				header := fmt.Sprintf("[prompt %d of %d]\n", i+1, len(tt.prompts))
				at := strings.Index(rest, header)
				if at < 0 {
					t.Fatalf("no %q in order in:\n%s", header, stdout.String())
				}
				rest = rest[at+len(header):]
			}
			if got := strings.Count(stderr.String(), fmt.Sprintf(" of %d: ", len(tt.prompts))); got != len(tt.prompts) {
				t.Errorf("%d summary lines on stderr, want %d:\n%s", got, len(tt.prompts), stderr.String())
			}
		})
	}
}

// generateJSON runs generate with args and decodes its stdout into v.
func generateJSON(t *testing.T, args []string, v any) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := runGenerate(args, &stdout, &stderr); err != nil {
		t.Fatalf("generate %q: %v\n%s", args, err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), v); err != nil {
		t.Fatalf("generate %q: %v\n%s", args, err, stdout.String())
	}
}

// TestGenerateSeveralPromptsRefused: several prompts of different kinds, or one bad among them,
// are refused before anything runs.
func TestGenerateSeveralPromptsRefused(t *testing.T) {
	t.Setenv(xla.EnvBackend, "go")
	tests := []struct {
		name string
		args []string
	}{
		{"text and IDs", []string{"-p", "a", "--prompt-ids", "1"}},
		{"a file and text", []string{"--prompt-file", "-", "-p", "a"}},
		{"an empty text among them", []string{"-p", "a", "-p", ""}},
		{"a bad ID in the second list", []string{"--prompt-ids", "1,2", "--prompt-ids", "3,x"}},
		{"an ID outside the vocabulary in the second list", []string{"--prompt-ids", "1,2", "--prompt-ids", "320"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := runGenerate(append([]string{"--model", testdata("tiny-qwen3")}, tt.args...), &stdout, &stderr)
			var ue usageError
			if !errors.As(err, &ue) || strings.Contains(stderr.String(), "loading") {
				t.Fatalf("err = %v (stderr %q), want a usage error before loading", err, stderr.String())
			}
		})
	}
}

// TestGenerateChoosesByWorkload: where the automatic choice finds ONNX Runtime, one prompt (where
// the pure-Go backend's AVX-512 kernels run), several prompts (decoded together) and a long
// generation run on the pure-Go backend, and the backend line says why; a named backend is kept.
func TestGenerateChoosesByWorkload(t *testing.T) {
	t.Setenv(xla.EnvBackend, "")
	if name, _, _ := xla.DefaultPlaces().AutoName(); name != xla.ONNX {
		t.Skipf("the automatic choice here is %s, not ONNX Runtime", name)
	}
	model := testdata("tiny-qwen3-long") // a context of 40,960 positions
	onePrompt, onePromptWhy := "backend: go", "decodes one sequence faster"
	if !xla.OneSequenceOnGo() { // no AVX-512 kernels here: one sequence stays on ONNX Runtime
		onePrompt, onePromptWhy = "backend: onnx", ""
	}
	tests := []struct {
		name string
		args []string
		want string // the backend line's start
		why  string // a substring of it
	}{
		{"one prompt", []string{"--prompt-ids", "5,6", "-n", "2"}, onePrompt, onePromptWhy},
		{"one prompt, named", []string{"--backend", "onnx", "--prompt-ids", "5,6", "-n", "2"}, "backend: onnx", ""},
		{"two prompts", []string{"--prompt-ids", "5,6", "--prompt-ids", "7", "-n", "2"}, "backend: go", "decodes 2 sequences at once faster"},
		{"a long generation", []string{"--prompt-ids", "5,6", "-n", "1100"}, "backend: go", "decodes faster with 1102 positions"},
		{"two prompts, named", []string{"--backend", "onnx", "--prompt-ids", "5,6", "--prompt-ids", "7", "-n", "2"}, "backend: onnx", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := runGenerate(append([]string{"--model", model, "--temperature", "0"}, tt.args...), &stdout, &stderr); err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			// The backend line, and its note lines ("  note: ONNX Runtime passed over: …").
			var line string
			for l := range strings.Lines(stderr.String()) {
				if strings.HasPrefix(l, "backend: ") || line != "" && strings.HasPrefix(l, "  note: ") {
					line += l
				}
			}
			if !strings.HasPrefix(line, tt.want) || !strings.Contains(line, tt.why) {
				t.Errorf("backend line %q, want %q … %q", line, tt.want, tt.why)
			}
			if tt.why != "" && !strings.Contains(line, "note: "+xla.ONNXPassedOver) {
				t.Errorf("backend line %q: no note that ONNX Runtime was passed over", line)
			}
		})
	}
}
