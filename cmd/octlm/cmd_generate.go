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
	"github.com/octlm/octlm/xla"
)

func init() {
	register("generate", "continue a prompt with the decoder, streaming text as tokens arrive", func(args []string) error {
		return interruptible(func(ctx context.Context) error { return runGenerateIO(ctx, args, os.Stdin, os.Stdout, os.Stderr) })
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
	model   modelFlags
	opts    octlm.GenerateOptions
	prompts []generatePrompt // one, or several decoded together
	asJSON  bool
}

// generatePrompt is one prompt given: raw text, a chat message or token IDs.
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
	prompts, tok, err := encodePrompts(dir, a.prompts)
	if err != nil {
		return err
	}
	stops, err := stopIDs(dir, tok)
	if err != nil {
		return err
	}
	positions := 0 // every prompt's KV cache
	work := xla.Workload{Sequences: len(prompts)}
	for _, ids := range prompts {
		positions += len(ids) + a.opts.MaxNewTokens
		work.Longest = max(work.Longest, len(ids)+a.opts.MaxNewTokens)
	}
	m, err := a.model.openDir(dir, positions, work, stderr)
	if err != nil {
		return err
	}
	defer m.Close()

	opts := a.opts
	opts.StopIDs = stops
	opts.Context = ctx
	out := &errWriter{fileio.ErrWriter{W: stdout}}
	isChat := a.prompts[0].chat != ""
	if len(prompts) > 1 {
		return generateTogether(ctx, m, tok, prompts, opts, isChat, a.asJSON, out, modelText(out, isTerminal(stdout)), stderr)
	}
	ids := prompts[0]
	g, text, unknown, genErr := streamGeneration(m, tok, ids, opts, a.asJSON, out, modelText(out, isTerminal(stdout)))
	res := newGenerationResult(g, text, opts.Sampling.Seed, isChat, stderr)
	if unknown > 0 {
		fmt.Fprintf(stderr, "%d generated IDs have no token in the tokenizer and were left out of the text\n", unknown)
	}
	if !(a.asJSON && genErr == nil) && tok == nil && len(g.GeneratedIDs) > 0 {
		fmt.Fprintln(out, idsText(g.GeneratedIDs))
	}
	if errors.Is(genErr, octlm.ErrNonFinite) {
		genErr = fmt.Errorf("%w (after %d generated tokens)", genErr, len(g.GeneratedIDs))
	}
	if err := finishOutput(out, a.asJSON, res, genErr); err != nil {
		return err
	}
	if !a.asJSON {
		printToolCalls(stderr, res.ToolCalls)
		fmt.Fprintln(stderr, generationSummary(g, opts.Sampling))
	}
	if g.StopReason == octlm.StopInterrupted {
		return interruptedBy(ctx)
	}
	return nil
}

// generateTogether is generate with several prompts: they are decoded together
// (Model.GenerateBatch, each as it would be alone), then printed one after the other, each
// under a "[prompt I of N]" line (only its IDs without a tokenizer), or as one JSON list; one
// summary line per prompt goes to stderr.
func generateTogether(ctx context.Context, m *loadedModel, tok *tokenizer.Tokenizer, prompts [][]int, opts octlm.GenerateOptions, isChat, asJSON bool, out *errWriter, shown io.Writer, stderr io.Writer) error {
	gens, genErr := m.GenerateBatch(prompts, opts)
	if gens == nil {
		return genErr
	}
	results := make([]generationResult, len(gens))
	for i, g := range gens {
		text, unknown, err := decodeIDs(tok, g.GeneratedIDs)
		if err != nil && genErr == nil {
			genErr = err
		}
		if unknown > 0 {
			fmt.Fprintf(stderr, "prompt %d: %d generated IDs have no token in the tokenizer and were left out of the text\n", i+1, unknown)
		}
		results[i] = newGenerationResult(g, text, opts.Sampling.Seed, isChat, stderr)
		if asJSON {
			continue
		}
		fmt.Fprintf(out, "[prompt %d of %d]\n", i+1, len(gens))
		if tok == nil {
			fmt.Fprintln(out, idsText(g.GeneratedIDs))
			continue
		}
		io.WriteString(shown, text)
		flushText(shown)
		fmt.Fprintln(out)
	}
	if err := finishOutput(out, asJSON, results, genErr); err != nil {
		return err
	}
	interrupted := false
	for i, g := range gens {
		if !asJSON {
			printToolCalls(stderr, results[i].ToolCalls)
			fmt.Fprintf(stderr, "prompt %d of %d: %s\n", i+1, len(gens), generationSummary(g, opts.Sampling))
		}
		interrupted = interrupted || g.StopReason == octlm.StopInterrupted
	}
	if interrupted {
		return interruptedBy(ctx)
	}
	return nil
}

// finishOutput prints v as one JSON value when asJSON and the generation did not fail, then
// returns the first failure: a failed write, else genErr (non-finite logits: a failed check).
func finishOutput(out *errWriter, asJSON bool, v any, genErr error) error {
	if asJSON && genErr == nil {
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		enc.Encode(v)
	}
	if out.Err != nil {
		return fmt.Errorf("writing the output: %w", out.Err)
	}
	if errors.Is(genErr, octlm.ErrNonFinite) {
		return checkFailure{genErr}
	}
	return genErr
}

// idsText is "1 2 3": generated IDs as printed without a tokenizer.
func idsText(ids []int) string { return strings.Trim(fmt.Sprint(ids), "[]") }

// printToolCalls says on stderr which tool calls a chat reply holds.
func printToolCalls(stderr io.Writer, calls []chat.ToolCall) {
	for _, call := range calls {
		args, _ := call.ArgumentsText()
		fmt.Fprintf(stderr, "tool call: %s(%s)\n", printable(call.Name), printableText(args))
	}
}

// decodeIDs is the text of generated IDs (as streamed: see tokenStreamer), how many of them had
// no text, and a decoding error; "" without a tokenizer.
func decodeIDs(tok *tokenizer.Tokenizer, ids []int) (string, int, error) {
	var text strings.Builder
	s := newTokenStreamer(tok, func(piece string) { text.WriteString(piece) })
	for _, id := range ids {
		if !s.add(id) {
			break
		}
	}
	s.flush()
	return text.String(), s.unknown, s.err
}

// parseGenerateArgs reads generate's flags and the prompt they name (a --prompt-file, stdin
// for -), refusing anything but exactly one non-empty prompt.
func parseGenerateArgs(args []string, stdin io.Reader, stderr io.Writer) (generateArgs, error) {
	var a generateArgs
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	a.model.register(fs, "")
	a.model.registerAdapter(fs)
	var texts, chats, idLists stringList
	fs.Var(&texts, "prompt", "raw prompt `text` (no chat template); repeat for several prompts, decoded together")
	promptFile := fs.String("prompt-file", "", "read the raw prompt from `FILE` (- for stdin)")
	fs.Var(&chats, "chat", "a user `message`, rendered with the model's chat template; repeat for several")
	fs.Var(&idLists, "prompt-ids", "comma-separated prompt token `IDs` (for checkpoints without a tokenizer, such as Qwen3.5's); repeat for several")
	think := fs.Bool("think", true, "with --chat: let Qwen3 reason in a <think> block first (enable_thinking)")
	var gf generationFlags
	gf.register(fs, 256, "most tokens to generate", "printed so the run can be repeated")
	asJSON := fs.Bool("json", false, "print one JSON object instead of streaming text")
	alias(fs, "m", "model")
	alias(fs, "p", "prompt")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "usage: octlm generate -m DIR|Org/Name [--adapter DIR] (-p TEXT... | --prompt-file FILE | --chat MESSAGE... | --prompt-ids 1,2,3...) [flags]\n\n"+
			"Continues the prompt and streams the text to stdout as tokens arrive; a summary line\n"+
			"(tokens, stop reason, speed, seed) goes to stderr. --chat renders one user turn with\n"+
			"Qwen3's chat template ('octlm chat' holds a conversation). Sampling is random unless\n"+
			"--seed is given or --temperature is 0. Ctrl-C stops: what was generated and the summary\n"+
			"are printed, exit status 130. Several -p, --chat or --prompt-ids are decoded together\n"+
			"(one batched step per token), each as it would be alone, and printed when all are done,\n"+
			"each under a [prompt I of N] line (--json: a list).\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return a, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	given := 0
	for _, name := range []string{"prompt", "prompt-file", "chat", "prompt-ids"} {
		if set[name] || name == "prompt" && set["p"] {
			given++
		}
	}
	if given != 1 {
		return a, usageError{"give one kind of prompt: --prompt (-p), --prompt-file, --chat or --prompt-ids (each but --prompt-file may be repeated)"}
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
		texts = stringList{text}
	}
	for _, text := range texts {
		if text == "" {
			return a, usageError{"the prompt is empty: give some text to continue"}
		}
		a.prompts = append(a.prompts, generatePrompt{text: text})
	}
	for _, msg := range chats {
		if msg == "" {
			return a, usageError{"--chat is empty: give a message"}
		}
		a.prompts = append(a.prompts, generatePrompt{chat: msg, think: *think})
	}
	for _, list := range idLists {
		ids, err := parseIDs(list)
		if err != nil {
			return a, usageError{err.Error()}
		}
		a.prompts = append(a.prompts, generatePrompt{ids: ids})
	}
	a.asJSON = *asJSON
	return a, nil
}

// stringList is a flag that may be repeated: each value in the order given.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ", ") }

// Set appends a value.
func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// encodePrompts turns the prompts into token IDs with the tokenizer of the checkpoint in dir,
// which it returns (nil when dir has none: then only --prompt-ids works).
func encodePrompts(dir string, ps []generatePrompt) ([][]int, *tokenizer.Tokenizer, error) {
	// Checked before the weights are loaded: a wrong ID should not cost a load.
	for _, p := range ps {
		if p.ids != nil {
			if err := checkIDsInVocab(dir, p.ids); err != nil {
				return nil, nil, err
			}
		}
	}
	tok, err := optionalTokenizer(dir)
	if err != nil {
		return nil, nil, err
	}
	out := make([][]int, len(ps))
	for i, p := range ps {
		if out[i], err = encodePrompt(dir, tok, p); err != nil {
			return nil, nil, err
		}
	}
	return out, tok, nil
}

// encodePrompt turns one prompt into token IDs with tok (nil: only IDs can be given).
func encodePrompt(dir string, tok *tokenizer.Tokenizer, p generatePrompt) ([]int, error) {
	switch {
	case p.ids != nil:
		return p.ids, nil
	case tok == nil:
		return nil, usageError{fmt.Sprintf("%s has no tokenizer.json: use --prompt-ids%s", dir, tokenizerNote(dir))}
	case p.chat != "":
		if err := chat.CheckModelDir(dir); err != nil {
			return nil, err
		}
		rendered, err := chat.Render(chat.UserPrompt(p.chat, p.think))
		if err != nil {
			return nil, err
		}
		return tok.Encode(rendered), nil
	default:
		return tok.Encode(p.text), nil
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
	shape, err := octlm.ReadShape(path)
	if err != nil {
		return err
	}
	for i, id := range ids {
		if id < 0 || id >= shape.Vocab {
			return usageError{fmt.Sprintf("--prompt-ids: token %d at position %d is outside the vocabulary [0, %d) of %s",
				id, i, shape.Vocab, path)}
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
