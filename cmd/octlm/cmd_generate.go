package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/chat"
	"github.com/octlm/octlm/octlm/tokenizer"
)

func init() {
	register("generate", "continue a prompt with the decoder, streaming text as tokens arrive", func(args []string) error {
		return runGenerate(args, os.Stdout, os.Stderr)
	})
}

// generationResult is what --json prints.
type generationResult struct {
	PromptIDs        []int           `json:"prompt_ids"`
	GeneratedIDs     []int           `json:"generated_ids"`
	Text             string          `json:"text"`
	StopReason       string          `json:"stop_reason"`
	TokensPerSecond  float64         `json:"tokens_per_second"`
	TimeToFirstToken float64         `json:"time_to_first_token_seconds"`
	Thinking         string          `json:"thinking,omitempty"`
	Content          string          `json:"content,omitempty"`
	ToolCalls        []chat.ToolCall `json:"tool_calls,omitempty"`
}

func runGenerate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var mf modelFlags
	mf.register(fs, "")
	prompt := fs.String("prompt", "", "raw prompt text (no chat template)")
	chatText := fs.String("chat", "", "a user message, rendered with the model's chat template")
	promptIDs := fs.String("prompt-ids", "", "comma-separated prompt token IDs (for checkpoints without a tokenizer)")
	think := fs.Bool("think", true, "with --chat: let Qwen3 reason in a <think> block first (enable_thinking)")
	maxNew := fs.Int("max-new-tokens", 256, "most tokens to generate")
	temperature := fs.Float64("temperature", 0.6, "sampling temperature; 0 means greedy")
	topK := fs.Int("top-k", 20, "keep the k most likely tokens; 0 keeps all")
	topP := fs.Float64("top-p", 0.95, "keep the smallest set of tokens whose probability reaches p")
	minP := fs.Float64("min-p", 0, "drop tokens less likely than min-p × the most likely one")
	repetition := fs.Float64("repetition-penalty", 1, "divide the logits of tokens already seen (1 is none)")
	seed := fs.Uint64("seed", 0, "random seed for sampling")
	asJSON := fs.Bool("json", false, "print one JSON object instead of streaming text")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	given := 0
	for _, s := range []string{*prompt, *chatText, *promptIDs} {
		if s != "" {
			given++
		}
	}
	if given != 1 {
		return usageError{"give exactly one of --prompt, --chat or --prompt-ids"}
	}
	if *maxNew < 1 {
		return usageError{fmt.Sprintf("--max-new-tokens must be at least 1, got %d", *maxNew)}
	}
	sampling := octlm.Sampling{Temperature: *temperature, TopK: *topK, TopP: *topP, MinP: *minP,
		RepetitionPenalty: *repetition, Seed: *seed}
	if err := sampling.Validate(); err != nil {
		return usageError{err.Error()}
	}

	m, err := mf.open(context.Background(), *maxNew, stderr) // the prompt's positions come on top
	if err != nil {
		return err
	}
	defer m.Close()
	tok, err := optionalTokenizer(m.Dir)
	if err != nil {
		return err
	}

	var ids []int
	switch {
	case *promptIDs != "":
		if ids, err = parseIDs(*promptIDs); err != nil {
			return usageError{err.Error()}
		}
	case tok == nil:
		return fmt.Errorf("%s has no tokenizer.json: use --prompt-ids", m.Dir)
	case *chatText != "":
		if err := chat.CheckModelDir(m.Dir); err != nil {
			return err
		}
		rendered, err := chat.Render(chat.UserPrompt(*chatText, *think))
		if err != nil {
			return err
		}
		ids = tok.Encode(rendered)
	default:
		ids = tok.Encode(*prompt)
	}

	stops, err := stopIDs(m.Dir, tok)
	if err != nil {
		return err
	}
	var stream *tokenizer.StreamDecoder
	if tok != nil {
		stream = tokenizer.NewStreamDecoder(tok)
	}
	var text strings.Builder
	var streamErr error
	unknown := 0
	opts := octlm.GenerateOptions{
		MaxNewTokens: *maxNew,
		Sampling:     sampling,
		StopIDs:      stops,
		OnToken: func(id int) bool {
			if stream != nil {
				piece, err := stream.Add(id)
				if errors.Is(err, tokenizer.ErrUnknownID) {
					// IDs past the tokenizer's vocabulary (Qwen3's embedding has 267 padding
					// rows) have no text; Hugging Face's decoder skips them too.
					unknown++
					return true
				}
				if err != nil {
					streamErr = err
					return false
				}
				text.WriteString(piece)
				if !*asJSON {
					fmt.Fprint(stdout, piece)
				}
			}
			return true
		},
	}
	g, err := m.Generate(ids, opts)
	if err == nil {
		err = streamErr
	}
	if err != nil {
		return err
	}
	if stream != nil {
		rest := stream.Flush()
		text.WriteString(rest)
		if !*asJSON {
			fmt.Fprintln(stdout, rest)
		}
	}
	res := generationResult{PromptIDs: g.PromptIDs, GeneratedIDs: g.GeneratedIDs, Text: text.String(),
		StopReason: g.StopReason, TokensPerSecond: g.TokensPerSecond(), TimeToFirstToken: g.TimeToFirstToken.Seconds()}
	if *chatText != "" {
		reply := chat.ParseReply(res.Text)
		res.Thinking, res.Content, res.ToolCalls = reply.Thinking, reply.Content, reply.ToolCalls
		for _, e := range reply.Errors {
			fmt.Fprintf(stderr, "reply: %v\n", e)
		}
	}
	if unknown > 0 {
		fmt.Fprintf(stderr, "%d generated IDs have no token in the tokenizer and were left out of the text\n", unknown)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(res)
	}
	if tok == nil {
		fmt.Fprintln(stdout, strings.Trim(fmt.Sprint(g.GeneratedIDs), "[]"))
	}
	for _, call := range res.ToolCalls {
		args, _ := call.ArgumentsText()
		fmt.Fprintf(stderr, "tool call: %s(%s)\n", call.Name, args)
	}
	fmt.Fprintf(stderr, "%d prompt tokens, %d generated (%s); first token after %.2fs, %.1f tokens/s\n",
		len(g.PromptIDs), len(g.GeneratedIDs), g.StopReason, g.TimeToFirstToken.Seconds(), g.TokensPerSecond())
	return nil
}

// optionalTokenizer reads dir/tokenizer.json, or returns nil when the checkpoint has none.
func optionalTokenizer(dir string) (*tokenizer.Tokenizer, error) {
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return loadTokenizer(dir)
}

// stopIDs are generation_config.json's eos_token_id (absent or null: not given), else Qwen3's
// stop tokens when the tokenizer knows them, else none. A generation_config.json that cannot be
// read or whose eos_token_id is neither an ID nor a list of IDs is an error.
func stopIDs(dir string, tok *tokenizer.Tokenizer) ([]int, error) {
	path := filepath.Join(dir, "generation_config.json")
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err == nil {
		var gc struct {
			EOS json.RawMessage `json:"eos_token_id"`
		}
		if err := json.Unmarshal(data, &gc); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(gc.EOS) > 0 && string(gc.EOS) != "null" {
			var one int
			var many []int
			if json.Unmarshal(gc.EOS, &many) == nil {
				return many, nil
			}
			if err := json.Unmarshal(gc.EOS, &one); err != nil {
				return nil, fmt.Errorf("%s: eos_token_id %s is neither a token ID nor a list of them", path, gc.EOS)
			}
			return []int{one}, nil
		}
	}
	if tok == nil {
		return nil, nil
	}
	var ids []int
	for _, s := range []string{"<|im_end|>", "<|endoftext|>"} {
		if id, ok := tok.TokenID(s); ok {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// parseIDs reads "1,2,3".
func parseIDs(s string) ([]int, error) {
	var ids []int
	for _, f := range strings.Split(s, ",") {
		id, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--prompt-ids: %q is not a token ID", f)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
