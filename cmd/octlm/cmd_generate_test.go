package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/synth"
	"github.com/octlm/octlm/xla"
)

func TestGenerateGreedyJSON(t *testing.T) {
	t.Setenv(xla.EnvBackend, "go")
	data, err := os.ReadFile(testdata("tiny-qwen3", "reference", "greedy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		PromptIDs    []int `json:"prompt_ids"`
		GeneratedIDs []int `json:"generated_ids"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		ids := strings.Trim(jsonText(c.PromptIDs), "[]") // "165,77,202"
		var stdout, stderr bytes.Buffer
		err := runGenerate([]string{"--model", testdata("tiny-qwen3"), "--prompt-ids", ids, "--temperature", "0",
			"--max-new-tokens", "24", "--json"}, &stdout, &stderr)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		var got generationResult
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
			t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
		}
		if !slices.Equal(got.GeneratedIDs, c.GeneratedIDs) || !slices.Equal(got.PromptIDs, c.PromptIDs) {
			t.Errorf("generated %v, reference %v", got.GeneratedIDs, c.GeneratedIDs)
		}
		if got.StopReason != "length" || got.Text != "" {
			t.Errorf("stop %q text %q: want length and no text (the fixture has no tokenizer)", got.StopReason, got.Text)
		}
	}
}

func TestGenerateChatWithTokenizer(t *testing.T) {
	t.Setenv(xla.EnvBackend, "go")
	// A small random checkpoint with Qwen3's full vocabulary and its real tokenizer files:
	// real tokens and template, random text.
	cfg := synth.Tiny()
	cfg.VocabSize, cfg.BOSTokenID, cfg.EOSTokenID = 151936, 151643, 151645
	dir := t.TempDir()
	if err := synth.Write(dir, cfg, 1, nil); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err := runGenerate([]string{"--model", dir, "--chat", "What is 2 + 2?", "--think=false", "--max-new-tokens", "4", "--seed", "3", "--json"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var got generationResult
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	// <|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n
	want := []int{151644, 872, 198, 3838, 374, 220, 17, 488, 220, 17, 30, 151645, 198, 151644, 77091, 198, 151667, 271, 151668, 271}
	if !slices.Equal(got.PromptIDs, want) {
		t.Errorf("prompt %v\nwant   %v", got.PromptIDs, want)
	}
	if len(got.GeneratedIDs) == 0 || got.StopReason == "" {
		t.Errorf("generated %v (%s)", got.GeneratedIDs, got.StopReason)
	}
}

func TestGenerateUsage(t *testing.T) {
	t.Setenv(xla.EnvBackend, "go")
	tests := []struct {
		name string
		args []string
	}{
		{"no prompt", []string{"--model", testdata("tiny-qwen3")}},
		{"two prompts", []string{"--model", testdata("tiny-qwen3"), "--prompt", "a", "--prompt-ids", "1"}},
		{"no model", []string{"--prompt-ids", "1"}},
		{"bad ids", []string{"--model", testdata("tiny-qwen3"), "--prompt-ids", "1,x"}},
		{"negative temperature", []string{"--model", testdata("tiny-qwen3"), "--prompt-ids", "1", "--temperature", "-1"}},
		{"text without tokenizer", []string{"--model", testdata("tiny-qwen3"), "--prompt", "hello"}},
		{"id outside the vocabulary", []string{"--model", testdata("tiny-qwen3"), "--prompt-ids", "1,320"}},
		{"bad dtype", []string{"--model", testdata("tiny-qwen3"), "--prompt-ids", "1", "--dtype", "int4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := runGenerate(tt.args, &stdout, &stderr)
			if err == nil || errors.Is(err, errCheckFailed) {
				t.Fatalf("err = %v, want bad input", err)
			}
		})
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestWarnHalfOnGo: the measured note on half precision, for the pure-Go backend only.
func TestWarnHalfOnGo(t *testing.T) {
	tests := []struct {
		backend string
		dtype   octlm.DType
		want    string
	}{
		{xla.Go, octlm.BFloat16, "bf16 decodes about"},
		{xla.Go, octlm.Float16, "f16 decodes about"},
		{xla.Go, octlm.Float32, ""},
		{xla.ONNX, octlm.Float16, ""},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		warnHalfOnGo(&buf, xla.Info{Name: tt.backend}, tt.dtype)
		if got := buf.String(); tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("%s %s: %q, want %q", tt.backend, tt.dtype, got, tt.want)
		}
	}
}
