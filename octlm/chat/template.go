package chat

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/octlm/octlm/internal/fileio"
)

// QwenTemplateSHA256 is the SHA-256 (hex) of the chat_template string in Qwen/Qwen3-0.6B's
// tokenizer_config.json, the template Render implements (the copy in
// testdata/qwen3-tokenizer/tokenizer_config.json).
const QwenTemplateSHA256 = "a55ee1b1660128b7098723e0abcd92caa0788061051c62d51cbe87d9cf1974d8"

// ErrOtherTemplate is wrapped by CheckTemplate and CheckModelDir when a template is not the one
// Render implements.
var ErrOtherTemplate = errors.New("chat template is not Qwen3's (Render implements only Qwen/Qwen3-0.6B's)")

// CheckTemplate returns nil when template is, byte for byte, the chat template Render implements.
func CheckTemplate(template string) error {
	sum := sha256.Sum256([]byte(template))
	if got := hex.EncodeToString(sum[:]); got != QwenTemplateSHA256 {
		return fmt.Errorf("%w: SHA-256 %s, want %s", ErrOtherTemplate, got, QwenTemplateSHA256)
	}
	return nil
}

// maxTemplateFileBytes bounds chat_template.jinja and tokenizer_config.json.
const maxTemplateFileBytes = 16 << 20

// ModelTemplate reads the chat template of the model folder dir the way transformers does: the
// file chat_template.jinja when present, else the "chat_template" string of tokenizer_config.json.
// It returns the template text and the file it came from.
func ModelTemplate(dir string) (template, path string, err error) {
	path = filepath.Join(dir, "chat_template.jinja")
	data, err := fileio.ReadFile(path, maxTemplateFileBytes)
	if err == nil {
		return string(data), path, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", path, fmt.Errorf("chat: %w", err)
	}
	path = filepath.Join(dir, "tokenizer_config.json")
	data, err = fileio.ReadFile(path, maxTemplateFileBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", path, fmt.Errorf("chat: %s: no chat template (neither chat_template.jinja nor tokenizer_config.json)", dir)
		}
		return "", path, fmt.Errorf("chat: %w", err)
	}
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return "", path, fmt.Errorf("chat: %s: %w", path, err)
	}
	if len(cfg.ChatTemplate) == 0 || string(cfg.ChatTemplate) == "null" {
		return "", path, fmt.Errorf("chat: %s: no chat_template field", path)
	}
	if err := json.Unmarshal(cfg.ChatTemplate, &template); err != nil {
		return "", path, fmt.Errorf("chat: %s: chat_template is %s, want a string (named template lists are not supported)", path, describeJSON(cfg.ChatTemplate))
	}
	return template, path, nil
}

// CheckModelDir returns nil when the model folder dir carries the chat template Render
// implements, and an error naming the file otherwise (no template, unreadable, or another one).
func CheckModelDir(dir string) error {
	template, path, err := ModelTemplate(dir)
	if err != nil {
		return err
	}
	if err := CheckTemplate(template); err != nil {
		return fmt.Errorf("chat: %s: %w", path, err)
	}
	return nil
}
