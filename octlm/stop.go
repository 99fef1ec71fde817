package octlm

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/octlm/octlm/internal/fileio"
)

// Qwen3's stop tokens: <|im_end|> and <|endoftext|>, as Qwen3's vocabulary numbers them.
const (
	QwenIMEnd     = 151645
	QwenEndOfText = 151643
)

// Qwen3StopIDs are the token IDs that end a Qwen3 generation: qwenStopTokens in Qwen3's
// vocabulary (a new slice on each call).
func Qwen3StopIDs() []int { return []int{QwenIMEnd, QwenEndOfText} }

// qwenStopTokens are Qwen3's stop tokens as text, in Qwen3StopIDs' order.
var qwenStopTokens = [...]string{"<|im_end|>", "<|endoftext|>"}

// TokenLookup finds a token's ID by its text; *tokenizer.Tokenizer is one.
type TokenLookup interface {
	TokenID(text string) (int, bool)
}

// ReadStopIDs returns the token IDs that end a generation from the checkpoint folder dir: the
// eos_token_id of generation_config.json, else that of config.json (as transformers does: absent
// or null means not given), else that of config.json's text_config (Qwen3.5's multimodal
// form keeps it there), else Qwen3's stop tokens (Qwen3StopIDs) as vocab numbers them, those
// it knows, else none (vocab nil). A file that cannot be read, or whose eos_token_id is neither
// an ID nor a list of IDs, is an error naming it.
func ReadStopIDs(dir string, vocab TokenLookup) ([]int, error) {
	for _, name := range []string{"generation_config.json", "config.json"} {
		ids, err := readEOSTokenIDs(filepath.Join(dir, name))
		if err != nil || ids != nil {
			return ids, err
		}
	}
	if ids, err := readTextConfigEOS(filepath.Join(dir, "config.json")); err != nil || ids != nil {
		return ids, err
	}
	if vocab == nil {
		return nil, nil
	}
	var ids []int
	for _, s := range qwenStopTokens {
		if id, ok := vocab.TokenID(s); ok {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// readTextConfigEOS reads text_config.eos_token_id of a config.json; nil when absent.
func readTextConfigEOS(path string) ([]int, error) {
	data, err := fileio.ReadFile(path, MaxConfigBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var top struct {
		Text json.RawMessage `json:"text_config"`
	}
	if json.Unmarshal(data, &top) != nil || len(top.Text) == 0 || string(top.Text) == "null" {
		return nil, nil
	}
	return parseEOSTokenIDs(top.Text, path+": text_config")
}

// readEOSTokenIDs reads the eos_token_id of a JSON file; nil when the file or the field is absent.
func readEOSTokenIDs(path string) ([]int, error) {
	data, err := fileio.ReadFile(path, MaxConfigBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseEOSTokenIDs(data, path)
}

// parseEOSTokenIDs reads eos_token_id from a JSON object; nil when the field is absent.
func parseEOSTokenIDs(data []byte, path string) ([]int, error) {
	var gc struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(data, &gc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(gc.EOS) == 0 || string(gc.EOS) == "null" {
		return nil, nil
	}
	var one int
	var many []int
	if json.Unmarshal(gc.EOS, &many) == nil {
		if many == nil {
			many = []int{}
		}
		return many, nil
	}
	if err := json.Unmarshal(gc.EOS, &one); err != nil {
		return nil, fmt.Errorf("%s: eos_token_id %s is neither a token ID nor a list of them", path, gc.EOS)
	}
	return []int{one}, nil
}
