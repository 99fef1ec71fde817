package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/octlm/octlm/units"
	"github.com/peterh/liner"
)

// maxChatLine is the longest line chat takes as one turn; a longer one is refused and the
// conversation goes on.
const maxChatLine = 16 << 20

// lineTooLongError is a line over maxChatLine, read to its end and dropped.
type lineTooLongError struct{ n int }

func (e lineTooLongError) Error() string {
	return fmt.Sprintf("a line of %s is longer than the %s chat takes in one turn: refused, the conversation goes on",
		units.Bytes(int64(e.n)), units.Bytes(maxChatLine))
}

// errPromptAborted is Ctrl-C typed at the line editor's prompt.
var errPromptAborted = errors.New("prompt aborted")

// chatInput is where chat's turns come from: a line editor on a terminal, plain lines otherwise.
type chatInput interface {
	// next returns the next input: a line, or the lines of a multi-line block joined by
	// newlines. At the end it returns io.EOF; a refused line is a lineTooLongError.
	next() (string, error)
	// close puts the terminal back as it was.
	close() error
}

// plainLines reads stdin line by line, with a prompt before each line where prompt is set.
type plainLines struct {
	r      *bufio.Reader
	prompt io.Writer // nil: no prompt
}

func newPlainLines(stdin io.Reader, prompt io.Writer) *plainLines {
	return &plainLines{r: bufio.NewReaderSize(stdin, 64<<10), prompt: prompt}
}

func (p *plainLines) next() (string, error) {
	if p.prompt != nil {
		fmt.Fprint(p.prompt, ">>> ")
	}
	line, err := readLimitedLine(p.r, maxChatLine)
	if err == io.EOF && p.prompt != nil {
		fmt.Fprintln(p.prompt)
	}
	return strings.TrimRight(line, "\r"), err
}

func (p *plainLines) close() error { return nil }

// readLimitedLine reads one line (without its newline) of at most limit bytes. A longer line is
// read to its end and dropped (lineTooLongError); a last line without a newline is a line; at
// the end of r it returns io.EOF.
func readLimitedLine(r *bufio.Reader, limit int) (string, error) {
	var buf bytes.Buffer
	n := 0
	for {
		chunk, err := r.ReadSlice('\n')
		n += len(chunk)
		if n <= limit+1 { // +1: the newline
			buf.Write(chunk)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && n == 0:
			return "", io.EOF
		case err != nil && err != io.EOF:
			return "", err
		}
		length := n
		if bytes.HasSuffix(chunk, []byte{'\n'}) {
			length--
		}
		if length > limit {
			return "", lineTooLongError{n: length}
		}
		line := strings.TrimSuffix(buf.String(), "\n")
		return line, nil
	}
}

// lineEditor reads turns on a terminal through liner: editing keys (arrows, Home/End, Ctrl-A/E,
// Ctrl-W, Ctrl-R history search), history kept across runs in a file only the user can read,
// and multi-line input (a line ending in \ goes on; """ opens and closes a block).
type lineEditor struct {
	state   *liner.State
	history string // the history file; "" keeps none
	stderr  io.Writer
}

// newLineEditor puts the terminal into the editor's mode and reads the history file, if any.
func newLineEditor(history string, stderr io.Writer) *lineEditor {
	e := &lineEditor{state: liner.NewLiner(), history: history, stderr: stderr}
	e.state.SetCtrlCAborts(true)
	e.state.SetMultiLineMode(true)
	if history != "" {
		if f, err := os.Open(history); err == nil {
			if _, err := e.state.ReadHistory(f); err != nil {
				fmt.Fprintf(stderr, "warning: chat history %s: %v\n", history, err)
			}
			f.Close()
		}
	}
	return e
}

func (e *lineEditor) next() (string, error) {
	first, err := e.prompt(">>> ")
	if err != nil {
		return "", err
	}
	var lines []string
	switch {
	case strings.HasPrefix(strings.TrimSpace(first), `"""`):
		// A block: from """ to the line ending in """.
		rest := strings.TrimPrefix(strings.TrimSpace(first), `"""`)
		for line := rest; ; {
			if strings.HasSuffix(strings.TrimSpace(line), `"""`) && (len(lines) > 0 || rest != "") {
				lines = append(lines, strings.TrimSuffix(strings.TrimRight(line, " \t"), `"""`))
				break
			}
			lines = append(lines, line)
			if line, err = e.prompt("... "); err != nil {
				return "", err
			}
		}
		if len(lines) > 0 && lines[0] == "" {
			lines = lines[1:]
		}
	default:
		line := first
		for strings.HasSuffix(line, `\`) {
			lines = append(lines, strings.TrimSuffix(line, `\`))
			if line, err = e.prompt("... "); err != nil {
				return "", err
			}
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n"), nil
}

// prompt reads one line, adds it to the history and saves the history.
func (e *lineEditor) prompt(p string) (string, error) {
	line, err := e.state.Prompt(p)
	switch {
	case errors.Is(err, liner.ErrPromptAborted):
		return "", errPromptAborted
	case err == io.EOF:
		fmt.Println() // Ctrl-D: end the prompt's line
		return "", io.EOF
	case err != nil:
		return "", err
	}
	if strings.TrimSpace(line) != "" {
		e.state.AppendHistory(line)
		if err := e.saveHistory(); err != nil {
			fmt.Fprintf(e.stderr, "warning: saving the chat history: %v\n", err)
			e.history = "" // said once
		}
	}
	return line, nil
}

// saveHistory writes the history file (mode 0600, its folder 0700) through a temporary file.
func (e *lineEditor) saveHistory() error {
	if e.history == "" {
		return nil
	}
	dir := filepath.Dir(e.history)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(e.history)+".tmp*") // mode 0600
	if err != nil {
		return err
	}
	_, err = e.state.WriteHistory(tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), e.history)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

func (e *lineEditor) close() error { return e.state.Close() }

// chatHistoryFile is where the line editor keeps the history: $XDG_STATE_HOME/octlm/chat_history,
// else ~/.local/state/octlm/chat_history; "" when neither is known.
func chatHistoryFile() string {
	if dir := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "octlm", "chat_history")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, ".local", "state", "octlm", "chat_history")
}

// openChatInput chooses how chat reads: the line editor when stdin and stdout are a terminal
// that can take it (not TERM=dumb; see prepareTerminal), plain lines with a ">>> " prompt when
// only stdin is one, plain lines and no prompt otherwise.
func openChatInput(stdin io.Reader, stdout, stderr io.Writer, history bool) chatInput {
	if !isTerminal(stdin) {
		return newPlainLines(stdin, nil)
	}
	if stdin != os.Stdin || stdout != os.Stdout || !isTerminal(stdout) {
		return newPlainLines(stdin, stdout)
	}
	prepareTerminal(os.Stdout)
	if !liner.TerminalSupported() { // TERM=dumb
		return newPlainLines(stdin, stdout)
	}
	file := ""
	if history {
		file = chatHistoryFile()
	}
	return newLineEditor(file, stderr)
}
