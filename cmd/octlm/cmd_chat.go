package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/term"

	"github.com/octlm/octlm/internal/fileio"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/chat"
	"github.com/octlm/octlm/octlm/tokenizer"
	"github.com/octlm/octlm/xla"
)

func init() {
	register("chat", "talk with a Qwen3 model in the terminal: history, system prompt, thinking on/off", func(args []string) error {
		return runChatIO(args, os.Stdin, os.Stdout, os.Stderr)
	})
}

const chatHelp = `commands:
  /think, /no_think   let the model reason in a <think> block first, or not (from the next turn)
  /system TEXT        set the system prompt and clear the conversation
  /clear              forget the conversation (the system prompt stays)
  /stats              speed of the last reply and the context used
  /save FILE          write the conversation as JSON (messages, as 'octlm template' reads them);
                      a new file gets mode 0600, an existing one keeps its mode, a symbolic
                      link is written through to its file
  """ ... """         on a terminal: a message of several lines (or end a line with \ to
                      go on); arrows edit the line, Up/Down and Ctrl-R recall earlier ones
  /bye                quit (also /exit, Ctrl-D)
Ctrl-C stops a reply; the conversation goes on.`

// chatSession is one conversation with a loaded model: its history, its KV cache (kept between
// turns: the part of the rendered conversation it holds is not recomputed) and its settings.
type chatSession struct {
	m        *loadedModel
	tok      *tokenizer.Tokenizer
	cache    *octlm.Cache
	stops    []int
	opts     octlm.GenerateOptions
	system   string
	think    bool
	messages []chat.Message
	last     octlm.Generation
	lastSeed uint64 // the sampling seed of the last reply
	out      *errWriter
	text     io.Writer // the model's text: out, escaped on a terminal (modelText)
	stderr   io.Writer
	faint    bool // dim the thinking part (ANSI faint): stdout is a terminal
	verbose  bool // a statistics line on stderr after each reply
	speed    bool // a short dim line with tokens and tokens/s on stderr after each reply
	refused  int  // input lines refused (too long); with piped stdin the exit status is then 2

	mu     sync.Mutex
	cancel context.CancelFunc // stops the reply in progress; nil between replies
	// finished is closed once the reply in progress has returned; nil between replies.
	finished chan struct{}
}

// chatArgs is what chat's flags ask for.
type chatArgs struct {
	model   modelFlags
	opts    octlm.GenerateOptions
	system  string
	think   bool
	verbose bool
	stats   bool
	history bool
}

// runChatIO holds a chat on stdin and stdout. Once the model is loaded (before, Ctrl-C ends the
// process as usual) it handles Ctrl-C itself: it stops the reply in progress.
func runChatIO(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	a, err := parseChatArgs(args, stderr)
	if err != nil {
		return err
	}
	dir, err := a.model.resolve(context.Background())
	if err != nil {
		return err
	}
	tok, stops, err := chatTokenizer(dir)
	if err != nil {
		return err
	}
	m, err := a.model.openDirVerbose(dir, a.opts.MaxNewTokens, xla.Workload{}, stderr, a.verbose) // one reply's worth; the conversation grows past it
	if err != nil {
		return err
	}
	defer m.Close()
	cache, err := m.NewGenerationCache(1, a.opts)
	if err != nil {
		return err
	}
	defer cache.Close()

	s := &chatSession{m: m, tok: tok, cache: cache, stops: stops, system: a.system, think: a.think,
		out: &errWriter{fileio.ErrWriter{W: stdout}}, stderr: stderr, verbose: a.verbose, faint: isTerminal(stdout) && os.Getenv("NO_COLOR") == "",
		opts: a.opts}
	s.text = modelText(s.out, isTerminal(stdout))
	s.opts.StopIDs = stops
	interactive := isTerminal(stdin)
	s.speed = a.stats && interactive && isTerminal(stderr)
	if interactive {
		fmt.Fprintf(stderr, "chatting with %s (thinking %s); /help for commands, /bye or Ctrl-D to quit\n", dir, onOff(s.think))
	}
	defer s.catchInterrupts(interactive)()
	in := openChatInput(stdin, stdout, stderr, a.history)
	defer in.close()
	if err := s.run(in); err != nil {
		return err
	}
	if s.refused > 0 && !interactive {
		return usageError{fmt.Sprintf("%d input line(s) refused (see above)", s.refused)}
	}
	return nil
}

// parseChatArgs reads chat's flags.
func parseChatArgs(args []string, stderr io.Writer) (chatArgs, error) {
	var a chatArgs
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	a.model.register(fs, "")
	a.model.registerAdapter(fs)
	fs.StringVar(&a.system, "system", "", "system prompt")
	fs.BoolVar(&a.think, "think", true, "let Qwen3 reason in a <think> block before answering (/think, /no_think switch it)")
	var gf generationFlags
	gf.register(fs, 2048, "most tokens in one reply", "shown by /stats")
	fs.BoolVar(&a.verbose, "verbose", false, "print a line of statistics to stderr after each reply, and the backend's library path")
	fs.BoolVar(&a.stats, "stats", true, "on a terminal, a short dim line with the reply's tokens and tokens/s after each reply (--stats=false: none)")
	fs.BoolVar(&a.history, "history", true, "on a terminal, keep the lines typed in $XDG_STATE_HOME/octlm/chat_history (default ~/.local/state/octlm; mode 0600) for Up/Down and Ctrl-R, across runs")
	alias(fs, "m", "model")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "usage: octlm chat -m DIR|Org/Name [--adapter DIR] [--system TEXT] [--think=false] [flags]\n\n"+
			"A conversation with a Qwen3 model, rendered with Qwen3's chat template. Each line you type\n"+
			"is a user turn; the reply streams as it is generated (on a terminal, the thinking part is\n"+
			"dimmed; otherwise it stays between <think> and </think>). With stdin not a terminal, each\n"+
			"line is a turn and nothing but the replies is printed, one after the other, each ending in\n"+
			"a newline. Ctrl-C stops a reply, not the chat. A line over 16 MiB is refused and the chat\n"+
			"goes on (piped, the exit status is then 2).\n\n"+chatHelp+"\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return a, err
	}
	var err error
	a.opts, err = gf.options(fs)
	return a, err
}

// chatTokenizer reads the tokenizer and stop tokens of the checkpoint in dir, refusing one
// without a tokenizer or a chat template chat can render.
func chatTokenizer(dir string) (*tokenizer.Tokenizer, []int, error) {
	tok, err := optionalTokenizer(dir)
	if err != nil {
		return nil, nil, err
	}
	if tok == nil {
		return nil, nil, usageError{fmt.Sprintf("%s has no tokenizer.json: chat needs one ('octlm generate --prompt-ids' runs without)", dir)}
	}
	if err := chat.CheckModelDir(dir); err != nil {
		return nil, nil, err
	}
	if err := checkVocabHoldsTokenizer(dir, tok); err != nil {
		return nil, nil, err
	}
	stops, err := stopIDs(dir, tok)
	if err != nil {
		return nil, nil, err
	}
	return tok, stops, nil
}

// catchInterrupts makes Ctrl-C stop the reply in progress (a reply that has not stopped
// within signalGrace ends the process, signals.go); between replies it only says how to quit.
// The returned function restores the default (Ctrl-C ends the process).
func (s *chatSession) catchInterrupts(interactive bool) (restore func()) {
	return claimSignals(true, func(os.Signal) <-chan struct{} {
		stopped, busy := s.stopReply()
		if !busy && interactive {
			fmt.Fprint(s.stderr, "\n(/bye or Ctrl-D quits)\n>>> ")
		}
		return stopped
	}, os.Interrupt)
}

// run reads the input turn by turn, each a command or a user turn, until /bye, the end of the
// input or an error. A refused line (too long) is said on stderr and the chat goes on.
func (s *chatSession) run(in chatInput) error {
	for {
		line, err := in.next()
		var long lineTooLongError
		switch {
		case err == io.EOF:
			return s.out.Err
		case errors.As(err, &long):
			s.refused++
			fmt.Fprintf(s.stderr, "%v\n", long)
			continue
		case errors.Is(err, errPromptAborted):
			fmt.Fprintln(s.stderr, "(/bye or Ctrl-D quits)")
			continue
		case err != nil:
			return fmt.Errorf("reading stdin: %w", err)
		}
		quit, err := s.handle(line)
		if err != nil {
			return err
		}
		if s.out.Err != nil {
			return fmt.Errorf("writing the output: %w", s.out.Err)
		}
		if quit {
			return nil
		}
	}
}

// handle runs one line: a command or a user turn. It reports whether the chat ends; errors that
// end the chat are returned, the others are printed.
func (s *chatSession) handle(line string) (quit bool, err error) {
	trimmed := strings.TrimSpace(line)
	if trimmed == "" {
		return false, nil
	}
	name, arg, _ := strings.Cut(trimmed, " ")
	arg = strings.TrimSpace(arg)
	switch name {
	case "/bye", "/exit", "/quit":
		return true, nil
	case "/help", "/?":
		fmt.Fprintln(s.out, chatHelp)
	case "/think", "/no_think":
		if arg != "" {
			// "/think Why is the sky blue?": Qwen3's own soft switch, inside a message.
			return false, s.reply(line)
		}
		s.think = name == "/think"
		fmt.Fprintf(s.out, "thinking %s\n", onOff(s.think))
	case "/clear":
		s.messages, s.last = nil, octlm.Generation{}
		fmt.Fprintln(s.out, "conversation cleared")
	case "/system":
		s.system, s.messages, s.last = arg, nil, octlm.Generation{}
		fmt.Fprintln(s.out, "system prompt set; conversation cleared")
	case "/stats":
		fmt.Fprintln(s.out, s.stats())
	case "/save":
		if arg == "" {
			fmt.Fprintln(s.stderr, "/save needs a file name: /save FILE")
			return false, nil
		}
		if err := s.save(arg); err != nil {
			fmt.Fprintf(s.stderr, "/save: %v\n", err)
			return false, nil
		}
		fmt.Fprintf(s.out, "saved %d messages to %s\n", len(s.conversation()), arg)
	default:
		// "/word ..." is a command; "/usr/bin is ..." (a path) is a message.
		if len(name) > 1 && name[0] == '/' && !strings.Contains(name[1:], "/") {
			fmt.Fprintf(s.stderr, "unknown command %s (/help lists them)\n", name)
			return false, nil
		}
		return false, s.reply(line)
	}
	return false, nil
}

// conversation is the history with the system prompt first.
func (s *chatSession) conversation() []chat.Message {
	var msgs []chat.Message
	if s.system != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: s.system})
	}
	return append(msgs, s.messages...)
}

// reply runs one user turn: render the conversation, generate on the kept cache, stream the
// reply, and add both turns to the history. Bad input (a conversation past the context length)
// is printed and the turn dropped; a failing model ends the chat.
func (s *chatSession) reply(text string) error {
	think := s.think
	msgs := append(s.conversation(), chat.Message{Role: "user", Content: text})
	rendered, err := chat.Render(chat.Conversation{Messages: msgs, AddGenerationPrompt: true, EnableThinking: &think})
	if err != nil {
		fmt.Fprintf(s.stderr, "%v\n", err)
		return nil
	}
	ids := s.tok.Encode(rendered)
	if n, limit := len(ids), s.m.Shape().Context; n+s.opts.MaxNewTokens > limit {
		fmt.Fprintf(s.stderr, "%s\n", pastContextMessage(n, s.opts.MaxNewTokens, limit))
		return nil
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	finished := make(chan struct{})
	s.mu.Lock()
	s.cancel, s.finished = cancel, finished
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.cancel, s.finished = nil, nil
		s.mu.Unlock()
		close(finished)
	}()

	var replyText strings.Builder
	view := &replyView{out: s.out, text: s.text, faint: s.faint, thinking: false}
	streamer := newTokenStreamer(s.tok, func(piece string) {
		replyText.WriteString(piece)
		view.write(piece)
	})
	opts := s.opts
	opts.Context = ctx
	opts.OnToken = func(id int) bool {
		if slices.Contains(s.stops, id) {
			return true // the end-of-turn token is not shown
		}
		return streamer.add(id) && s.out.Err == nil
	}
	s.lastSeed = opts.Sampling.Seed
	g, err := s.m.GenerateOn(s.cache, ids, opts)
	streamer.flush()
	view.end()
	if err == nil {
		err = streamer.err
	}
	s.last = g
	if g.StopReason == octlm.StopInterrupted {
		fmt.Fprint(s.out, " [interrupted]")
	}
	fmt.Fprintln(s.out)
	if err != nil {
		if errors.Is(err, octlm.ErrNonFinite) {
			return checkFailure{err}
		}
		if errors.Is(err, octlm.ErrBadInput) {
			fmt.Fprintf(s.stderr, "%v\n", err)
			return nil
		}
		return err
	}
	s.messages = append(s.messages, chat.Message{Role: "user", Content: text}, showReply(s.text, replyText.String()))
	if s.verbose {
		fmt.Fprintf(s.stderr, "%s; %d prompt tokens reused from the cache\n", generationSummary(g, opts.Sampling), g.Reused)
	} else if s.speed && os.Getenv("NO_COLOR") != "" {
		fmt.Fprintf(s.stderr, "%s\n", replySpeed(g))
	} else if s.speed {
		fmt.Fprintf(s.stderr, "%s%s%s\n", ansiFaint, replySpeed(g), ansiReset)
	}
	if s.opts.Sampling.Temperature > 0 {
		s.opts.Sampling.Seed++ // the next reply draws other numbers
	}
	return nil
}

// showReply takes a finished reply apart, shows each tool call it makes on a line of its own
// ("[tool call] name(arguments)": octlm runs no tools) and returns it as a history message.
func showReply(w io.Writer, text string) chat.Message {
	reply := chat.ParseReply(text)
	for _, call := range reply.ToolCalls {
		args, _ := call.ArgumentsText()
		fmt.Fprintf(w, "[tool call] %s(%s)\n", call.Name, args)
	}
	return reply.Message()
}

// stopReply cancels the reply in progress and returns a channel closed once it has stopped;
// busy is false when there is none.
func (s *chatSession) stopReply() (stopped <-chan struct{}, busy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil {
		return nil, false
	}
	s.cancel()
	return s.finished, true
}

// stats describes the last reply and the context used.
func (s *chatSession) stats() string {
	g := s.last
	used := 0
	if len(g.PromptIDs) > 0 {
		// The cache holds the conversation but the last generated token, which no step has seen.
		used = len(g.PromptIDs) + len(g.GeneratedIDs)
	}
	limit := s.m.Shape().Context
	line := fmt.Sprintf("context: %d of %d tokens (%.1f%%); %d messages", used, limit, 100*float64(used)/float64(limit), len(s.messages))
	if len(g.PromptIDs) == 0 {
		return line + "; no reply yet"
	}
	return line + fmt.Sprintf("\nlast reply: %d tokens (%s), first after %.2fs, %s; prompt %d tokens, %d reused from the cache; seed %d",
		len(g.GeneratedIDs), g.StopReason, g.TimeToFirstToken.Seconds(), tokensPerSecond(g), len(g.PromptIDs), g.Reused, s.lastSeed)
}

// chatTranscript is what /save writes: a conversation as 'octlm template' reads it, plus the
// model it was held with.
type chatTranscript struct {
	Model          string         `json:"model"`
	Messages       []chat.Message `json:"messages"`
	EnableThinking bool           `json:"enable_thinking"`
}

// save writes the transcript to path through a temporary file beside it, renamed on success,
// so that a failed save leaves no half-written file. A new file is made with mode 0600 (a
// conversation is private); an existing one keeps its mode; a symbolic link is written through
// (the file it points at is replaced, the link stays), and a link to nothing is refused.
func (s *chatSession) save(path string) error {
	data, err := json.MarshalIndent(chatTranscript{Model: s.m.Dir, Messages: s.conversation(), EnableThinking: s.think}, "", "  ")
	if err != nil {
		return err
	}
	target, mode, err := saveTarget(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".tmp*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(data, '\n'))
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), target)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// saveTarget is the file /save replaces for path (the end of its links) and the mode to give it.
func saveTarget(path string) (string, fs.FileMode, error) {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, 0o600, nil
	}
	if err != nil {
		return "", 0, err
	}
	target := path
	if st.Mode()&fs.ModeSymlink != 0 {
		if target, err = filepath.EvalSymlinks(path); err != nil {
			return "", 0, fmt.Errorf("%s is a symbolic link to nothing that exists; not followed", path)
		}
		if st, err = os.Stat(target); err != nil {
			return "", 0, err
		}
	}
	if !st.Mode().IsRegular() {
		return "", 0, fmt.Errorf("%s is not a regular file", target)
	}
	return target, st.Mode().Perm(), nil
}

// replyView writes a reply as it streams, dimming the think block on a terminal (ANSI faint).
// <think> and </think> are single tokens in Qwen3's vocabulary, so a piece holds a whole tag.
// The model's text goes to text (out when nil), the dimming sequences to out.
type replyView struct {
	out      io.Writer
	text     io.Writer
	faint    bool
	thinking bool
}

// show writes the model's text s.
func (v *replyView) show(s string) {
	if v.text == nil {
		io.WriteString(v.out, s)
		return
	}
	io.WriteString(v.text, s)
}

// control writes octlm's own terminal sequence s, after what text holds back.
func (v *replyView) control(s string) {
	flushText(v.text)
	io.WriteString(v.out, s)
}

const (
	ansiFaint = "\x1b[2m"
	ansiReset = "\x1b[0m"
)

func (v *replyView) write(piece string) {
	for piece != "" {
		tag := "<think>"
		if v.thinking {
			tag = "</think>"
		}
		i := strings.Index(piece, tag)
		if i < 0 {
			v.show(piece)
			return
		}
		if !v.thinking {
			v.show(piece[:i])
			if v.faint {
				v.control(ansiFaint)
			}
			v.show(tag)
		} else {
			v.show(piece[:i+len(tag)])
			if v.faint {
				v.control(ansiReset)
			}
		}
		v.thinking = !v.thinking
		piece = piece[i+len(tag):]
	}
}

// end closes a think block left open (the reply stopped while thinking).
func (v *replyView) end() {
	flushText(v.text)
	if v.thinking && v.faint {
		io.WriteString(v.out, ansiReset)
	}
	v.thinking = false
}

// isTerminal reports whether f is an *os.File open on a terminal (not merely a character
// device such as /dev/null).
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}
