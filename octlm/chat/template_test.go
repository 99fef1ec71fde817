package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckModelDirFixture(t *testing.T) {
	if err := CheckModelDir(fixtureDir); err != nil {
		t.Fatalf("the Qwen3-0.6B fixture: %v", err)
	}
}

func TestModelTemplate(t *testing.T) {
	qwen, _, err := ModelTemplate(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	write := func(t *testing.T, files map[string]string) string {
		dir := t.TempDir()
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	config := func(template any) string {
		data, err := json.Marshal(map[string]any{"chat_template": template, "eos_token": "<|im_end|>"})
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	for _, tc := range []struct {
		name    string
		files   map[string]string
		wantErr string // "" for success
		other   bool   // error wraps ErrOtherTemplate
	}{
		{"tokenizer_config.json", map[string]string{"tokenizer_config.json": config(qwen)}, "", false},
		{"chat_template.jinja", map[string]string{"chat_template.jinja": qwen}, "", false},
		{"jinja file wins over the config", map[string]string{"chat_template.jinja": qwen, "tokenizer_config.json": config("{{ x }}")}, "", false},
		{"another template", map[string]string{"tokenizer_config.json": config(qwen + " ")}, "tokenizer_config.json: chat template is not Qwen3's", true},
		{"another jinja file", map[string]string{"chat_template.jinja": strings.Replace(qwen, "<think>", "<reason>", 1), "tokenizer_config.json": config(qwen)}, "chat_template.jinja: chat template is not Qwen3's", true},
		{"no template files", map[string]string{}, "no chat template", false},
		{"no chat_template field", map[string]string{"tokenizer_config.json": `{"eos_token": "<|im_end|>"}`}, "no chat_template field", false},
		{"template list", map[string]string{"tokenizer_config.json": config([]map[string]string{{"name": "default", "template": qwen}})}, "chat_template is an array, want a string", false},
		{"bad JSON", map[string]string{"tokenizer_config.json": `{"chat_template": `}, "tokenizer_config.json: unexpected end of JSON input", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := write(t, tc.files)
			err := CheckModelDir(dir)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckModelDir: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("CheckModelDir error %v, want one containing %q", err, tc.wantErr)
			}
			if errors.Is(err, ErrOtherTemplate) != tc.other {
				t.Errorf("errors.Is(err, ErrOtherTemplate) = %v, want %v", !tc.other, tc.other)
			}
		})
	}
}
