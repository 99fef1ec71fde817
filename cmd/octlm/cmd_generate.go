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

	"github.com/octlm/octlm/internal/fileio"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/chat"
	"github.com/octlm/octlm/octlm/tokenizer"
)

func init() {
	register("generate", "continue a prompt with the decoder, streaming text as tokens arrive", func(args []string) error {
		ctx, stop := interruptContext()
		defer stop()
		err := runGenerateIO(ctx, args, os.Stdin, os.Stdout, os.Stderr)
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return interruptedBy(ctx) // stopped while loading (a Hub download)
		}
		return err
	})
}

// generationResult is what --json prints.
type generationResult struct {
	PromptIDs        []int           `json:"prompt_ids"`
	GeneratedIDs     []int           `json:"generated_ids"`
	Text             string          `json:"text"`
	StopReason       string          `json:"stop_reason"`
	Seed             uint64          `json:"seed"`
	TokensPerSecond  *float64        `json:"tokens_per_second"` // null with fewer than two tokens (no decode step)
	TimeToFirstToken float64         `json:"time_to_first_token_seconds"`
	Thinking         string          `json:"thinking,omitempty"`
	Content          string          `json:"content,omitempty"`
	ToolCalls        []chat.ToolCall `json:"tool_calls,omitempty"`
}

// runGenerate is runGenerateIO without stdin and without Ctrl-C.
func runGenerate(args []string, stdout, stderr io.Writer) error {
	return runGenerateIO(context.Background(), args, strings.NewReader(""), stdout, stderr)
}

// generateArgs is what generate's flags ask for, checked.
type generateArgs struct {
	model  modelFlags
	opts   octlm.GenerateOptions
	prompt generatePrompt
	asJSON bool
}

// generatePrompt is the one prompt given: raw text, a chat message or token IDs.
type generatePrompt struct {
	text  string // --prompt, -p or --prompt-file
	chat  string // --chat, rendered with the chat template
	think bool   // with chat: enable_thinking
	ids   []int  // --prompt-ids
}

func runGenerateIO(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	a, err := parseGenerateArgs(args, stdin, stderr)
	if err != nil {
		return err
	}
	dir, err := a.model.resolve(ctx)
	if err != nil {
		return err
	}
	ids, tok, err := encodePrompt(dir, a.prompt)
	if err != nil {
		return err
	}
	stops, err := stopIDs(dir, tok)
	if err != nil {
		return err
	}
	m, err := a.model.openDir(dir, len(ids)+a.opts.MaxNewTokens, stderr)
	if err != nil {
		return err
	}
	defer m.Close()

	opts := a.opts
	opts.StopIDs = stops
	opts.Context = ctx
	out := &errWriter{fileio.ErrWriter{W: stdout}}
	g, text, unknown, genErr := streamGeneration(m, tok, ids, opts, a.asJSON, out, modelText(out, isTerminal(stdout)))
	res := newGenerationResult(g, text, opts.Sampling.Seed, a.prompt.chat != "", stderr)
	if unknown > 0 {
		fmt.Fprintf(stderr, "%d generated IDs have no token in the tokenizer and were left out of the text\n", unknown)
	}
	switch {
	case a.asJSON && genErr == nil:
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		enc.Encode(res)
	case tok == nil && len(g.GeneratedIDs) > 0:
		fmt.Fprintln(out, strings.Trim(fmt.Sprint(g.GeneratedIDs), "[]"))
	}
	if out.Err != nil {
		return fmt.Errorf("writing the output: %w", out.Err)
	}
	if genErr != nil {
		if errors.Is(genErr, octlm.ErrNonFinite) {
			return checkFailure{fmt.Errorf("%w (after %d generated tokens)", genErr, len(g.GeneratedIDs))}
		}
		return genErr
	}
	if !a.asJSON {
		for _, call := range res.ToolCalls {
			args, _ := call.ArgumentsText()
			fmt.Fprintf(stderr, "tool call: %s(%s)\n", printable(call.Name), printableText(args))
		}
		fmt.Fprintln(stderr, generationSummary(g, opts.Sampling))
	}
	if g.StopReason == octlm.StopInterrupted {
		return interruptedBy(ctx)
	}
	return nil
}

// parseGenerateArgs reads generate's flags and the prompt they name (a --prompt-file, stdin
// for -), refusing anything but exactly one non-empty prompt.
func parseGenerateArgs(args []string, stdin io.Reader, stderr io.Writer) (generateArgs, error) {
	var a generateArgs
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	a.model.register(fs, "")
	prompt := fs.String("prompt", "", "raw prompt `text` (no chat template)")
	promptFile := fs.String("prompt-file", "", "read the raw prompt from `FILE` (- for stdin)")
	chatText := fs.String("chat", "", "a user `message`, rendered with the model's chat template")
	promptIDs := fs.String("prompt-ids", "", "comma-separated prompt token `IDs` (for checkpoints without a tokenizer, such as Qwen3.5's)")
	think := fs.Bool("think", true, "with --chat: let Qwen3 reason in a <think> block first (enable_thinking)")
	var gf generationFlags
	gf.register(fs, 256, "most tokens to generate", "printed so the run can be repeated")
	asJSON := fs.Bool("json", false, "print one JSON object instead of streaming text")
	alias(fs, "m", "model")
	alias(fs, "p", "prompt")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "usage: octlm generate -m DIR|Org/Name (-p TEXT | --prompt-file FILE | --chat MESSAGE | --prompt-ids 1,2,3) [flags]\n\n"+
			"Continues the prompt and streams the text to stdout as tokens arrive; a summary line\n"+
			"(tokens, stop reason, speed, seed) goes to stderr. --chat renders one user turn with\n"+
			"Qwen3's chat template ('octlm chat' holds a conversation). Sampling is random unless\n"+
			"--seed is given or --temperature is 0. Ctrl-C stops: what was generated and the summary\n"+
			"are printed, exit status 130.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return a, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	given := 0
	for _, name := range []string{"prompt", "prompt-file", "chat", "prompt-ids"} {
		if set[name] {
			given++
		}
	}
	switch {
	case set["p"] && set["prompt"]:
		return a, usageError{"give -p or --prompt, not both"}
	case set["p"]:
		given++
	}
	if given != 1 {
		return a, usageError{"give exactly one of --prompt (-p), --prompt-file, --chat or --prompt-ids"}
	}
	var err error
	if a.opts, err = gf.options(fs); err != nil {
		return a, err
	}
	if *promptFile != "" {
		text, err := readPromptFile(*promptFile, stdin)
		if err != nil {
			return a, err
		}
		*prompt = text
	}
	switch {
	case (set["prompt"] || set["p"] || set["prompt-file"]) && *prompt == "":
		return a, usageError{"the prompt is empty: give some text to continue"}
	case set["chat"] && *chatText == "":
		return a, usageError{"--chat is empty: give a message"}
	}
	a.prompt = generatePrompt{text: *prompt, chat: *chatText, think: *think}
	if set["prompt-ids"] {
		if a.prompt.ids, err = parseIDs(*promptIDs); err != nil {
			return a, usageError{err.Error()}
		}
	}
	a.asJSON = *asJSON
	return a, nil
}

// encodePrompt turns the prompt into token IDs with the tokenizer of the checkpoint in dir,
// which it returns (nil when dir has none: then only --prompt-ids works).
func encodePrompt(dir string, p generatePrompt) ([]int, *tokenizer.Tokenizer, error) {
	// Checked before the weights are loaded: a wrong ID should not cost a load.
	if p.ids != nil {
		if err := checkIDsInVocab(dir, p.ids); err != nil {
			return nil, nil, err
		}
	}
	tok, err := optionalTokenizer(dir)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case p.ids != nil:
		return p.ids, tok, nil
	case tok == nil:
		return nil, nil, usageError{fmt.Sprintf("%s has no tokenizer.json: use --prompt-ids%s", dir, tokenizerNote(dir))}
	case p.chat != "":
		if err := chat.CheckModelDir(dir); err != nil {
			return nil, nil, err
		}
		rendered, err := chat.Render(chat.UserPrompt(p.chat, p.think))
		if err != nil {
			return nil, nil, err
		}
		return tok.Encode(rendered), tok, nil
	default:
		return tok.Encode(p.text), tok, nil
	}
}

// streamGeneration generates from ids, writing the text as it arrives to shown (which writes to
// out: see modelText), unless asJSON, and nothing but a final newline without a tokenizer; it
// returns the generation, its whole text, how many generated IDs had no text, and the error
// that stopped it.
func streamGeneration(m *loadedModel, tok *tokenizer.Tokenizer, ids []int, opts octlm.GenerateOptions, asJSON bool, out *errWriter, shown io.Writer) (g octlm.Generation, text string, unknown int, err error) {
	var all strings.Builder
	streamer := newTokenStreamer(tok, func(piece string) {
		all.WriteString(piece)
		if !asJSON {
			io.WriteString(shown, piece)
		}
	})
	opts.OnToken = func(id int) bool {
		// A failed write (a full disk, a closed pipe) stops: nobody receives the rest.
		return streamer.add(id) && out.Err == nil
	}
	g, err = m.Generate(ids, opts)
	streamer.flush()
	flushText(shown)
	if !asJSON && tok != nil {
		fmt.Fprintln(out)
	}
	if err == nil {
		err = streamer.err
	}
	return g, all.String(), streamer.unknown, err
}

// newGenerationResult is what --json prints for g; a chat reply is taken apart into thinking,
// content and tool calls, and what does not parse is reported on stderr.
func newGenerationResult(g octlm.Generation, text string, seed uint64, isChat bool, stderr io.Writer) generationResult {
	res := generationResult{PromptIDs: g.PromptIDs, GeneratedIDs: g.GeneratedIDs, Text: text,
		StopReason: g.StopReason, Seed: seed, TimeToFirstToken: g.TimeToFirstToken.Seconds()}
	if tps := g.TokensPerSecond(); len(g.GeneratedIDs) >= 2 {
		res.TokensPerSecond = &tps
	}
	if isChat {
		reply := chat.ParseReply(res.Text)
		res.Thinking, res.Content, res.ToolCalls = reply.Thinking, reply.Content, reply.ToolCalls
		for _, e := range reply.Errors {
			fmt.Fprintf(stderr, "reply: %s\n", printableText(e.Error()))
		}
	}
	return res
}

// generationSummary is the line generate writes to stderr after the text.
func generationSummary(g octlm.Generation, s octlm.Sampling) string {
	line := fmt.Sprintf("%d prompt tokens, %d generated (%s); first token after %.2fs, %s",
		len(g.PromptIDs), len(g.GeneratedIDs), g.StopReason, g.TimeToFirstToken.Seconds(), tokensPerSecond(g))
	if s.Temperature > 0 {
		line += fmt.Sprintf("; seed %d", s.Seed)
	}
	return line
}

// tokensPerSecond is the decode speed for a summary line, or says why there is none.
func tokensPerSecond(g octlm.Generation) string {
	if len(g.GeneratedIDs) < 2 {
		return "tokens/s n/a (no decode step after the first token)"
	}
	return fmt.Sprintf("%.1f tokens/s", g.TokensPerSecond())
}

// readPromptFile reads a prompt from path, or from stdin when path is "-".
func readPromptFile(path string, stdin io.Reader) (string, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
		path = "stdin"
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("--prompt-file: %w", err)
	}
	if len(data) == 0 {
		return "", usageError{fmt.Sprintf("--prompt-file: %s is empty", path)}
	}
	return string(data), nil
}

// checkIDsInVocab refuses prompt IDs outside the vocabulary of dir/config.json.
func checkIDsInVocab(dir string, ids []int) error {
	path := filepath.Join(dir, "config.json")
	cfg, err := octlm.ReadConfig(path)
	if err != nil {
		return err
	}
	for i, id := range ids {
		if id < 0 || id >= cfg.VocabSize {
			return usageError{fmt.Sprintf("--prompt-ids: token %d at position %d is outside the vocabulary [0, %d) of %s",
				id, i, cfg.VocabSize, path)}
		}
	}
	return nil
}

// tokenStreamer turns generated IDs into text pieces as they arrive (nothing without a
// tokenizer). IDs past the tokenizer's vocabulary (Qwen3's embedding has 267 padding rows) have
// no text; they are counted and skipped, as Hugging Face's decoder skips them.
type tokenStreamer struct {
	stream  *tokenizer.StreamDecoder
	emit    func(piece string)
	unknown int
	err     error
}

func newTokenStreamer(tok *tokenizer.Tokenizer, emit func(string)) *tokenStreamer {
	s := &tokenStreamer{emit: emit}
	if tok != nil {
		s.stream = tokenizer.NewStreamDecoder(tok)
	}
	return s
}

// add decodes one ID; false stops the generation (a decoding error, kept in err).
func (s *tokenStreamer) add(id int) bool {
	if s.stream == nil {
		return true
	}
	piece, err := s.stream.Add(id)
	if errors.Is(err, tokenizer.ErrUnknownID) {
		s.unknown++
		return true
	}
	if err != nil {
		s.err = err
		return false
	}
	if piece != "" {
		s.emit(piece)
	}
	return true
}

// flush emits what the decoder still holds (an incomplete UTF-8 sequence).
func (s *tokenStreamer) flush() {
	if s.stream != nil {
		if rest := s.stream.Flush(); rest != "" {
			s.emit(rest)
		}
	}
}

// optionalTokenizer reads dir/tokenizer.json, or returns nil when the checkpoint has none.
func optionalTokenizer(dir string) (*tokenizer.Tokenizer, error) {
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return loadTokenizer(dir)
}

// stopIDs are the stop tokens of the checkpoint in dir (see octlm.ReadStopIDs); tok may be nil.
func stopIDs(dir string, tok *tokenizer.Tokenizer) ([]int, error) {
	if tok == nil {
		return octlm.ReadStopIDs(dir, nil) // a nil *Tokenizer in the interface would not read as none
	}
	return octlm.ReadStopIDs(dir, tok)
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

// tokenizerNote explains, for a Qwen3.5 folder, why it has no tokenizer.
func tokenizerNote(dir string) string {
	data, err := fileio.ReadFile(filepath.Join(dir, "config.json"), octlm.MaxConfigBytes)
	if err != nil || !octlm.IsQwen35Config(data) {
		return ""
	}
	return " (Qwen3.5's tokenizer, 248,320 entries, is not available here: Qwen3.5 runs on token IDs)"
}
