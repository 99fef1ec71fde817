package train

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/octlm/octlm/octlm/chat"
)

// IgnoreIndex is the label that is not counted in the loss (PyTorch's cross_entropy
// ignore_index, which transformers' data collators write for padding and prompts).
const IgnoreIndex = -100

// Example is one training row as token IDs: Labels has the length of IDs, IgnoreIndex where
// the position is not learned. Labels are unshifted, as in Hugging Face datasets: the loss
// predicts Labels[t+1] from the tokens up to t.
type Example struct {
	IDs    []int32
	Labels []int32
}

// Counted is the number of tokens the causal-LM loss counts for e (labels after the shift).
func (e Example) Counted() int {
	n := 0
	for _, l := range e.Labels[min(1, len(e.Labels)):] {
		if l != IgnoreIndex {
			n++
		}
	}
	return n
}

// Tokenizer is what text, prompt/completion and messages rows need: the IDs of a text and the
// bytes of each ID (for the positions of assistant turns).
type Tokenizer interface {
	Encode(text string) []int
	DecodeToken(id int) ([]byte, error)
}

// DataOptions say how rows are checked and turned into IDs.
type DataOptions struct {
	// Vocab is the model's vocabulary size: every ID and label must be below it.
	Vocab int
	// MaxLength refuses longer rows (0: no limit).
	MaxLength int
	// Tokenizer turns text into IDs; nil refuses rows that hold text.
	Tokenizer Tokenizer
	// Template, when not nil, is why the model's chat template is not Qwen3's (chat.CheckModelDir):
	// messages rows are then refused with it instead of rendered with another template.
	Template error
	// EOS, when ≥ 0, is appended (and learned) after a text row and after a completion, as
	// TRL's SFTTrainer appends the EOS token.
	EOS int
}

// RowError is a bad row: the file, its line (1-based), the field at fault and why.
type RowError struct {
	File  string
	Line  int
	Field string
	Err   error
}

func (e *RowError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: %s: %v", e.File, e.Line, e.Field, e.Err)
}

func (e *RowError) Unwrap() error { return e.Err }

// maxLineBytes bounds one JSONL row (a long conversation fits; a file with no newline does not
// exhaust memory).
const maxLineBytes = 64 << 20

// ReadJSONL reads the training rows of the JSONL file at path; see ParseJSONL.
func ReadJSONL(path string, opts DataOptions) ([]Example, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("train: %s: not a regular file", path)
	}
	return ParseJSONL(f, path, opts)
}

// ParseJSONL reads training rows, one JSON object a line (blank lines skipped), named name in
// errors. A row is one of:
//
//	{"input_ids": [...], "labels": [...]}   labels optional (then the IDs); -100 is not learned
//	{"text": "..."}                         every token learned
//	{"prompt": "...", "completion": "..."}  only the completion's tokens learned
//	{"messages": [...], "tools": [...]}     Qwen3's chat template; only assistant turns learned
//
// Every row is checked before any is used; the first bad one is returned as a *RowError.
func ParseJSONL(r io.Reader, name string, opts DataOptions) ([]Example, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes)
	var rows []Example
	line := 0
	for sc.Scan() {
		line++
		text := sc.Bytes()
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		ex, field, err := parseRow(text, opts)
		if err != nil {
			return nil, &RowError{File: name, Line: line, Field: field, Err: err}
		}
		rows = append(rows, ex)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &RowError{File: name, Line: line + 1, Err: fmt.Errorf("row longer than %d bytes", maxLineBytes)}
		}
		return nil, fmt.Errorf("train: reading %s: %w", name, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("train: %s: no rows", name)
	}
	return rows, nil
}

// rawRow is a row as JSON; a nil field was absent (or null).
type rawRow struct {
	InputIDs      *[]int64        `json:"input_ids"`
	Labels        *[]int64        `json:"labels"`
	AttentionMask *[]int64        `json:"attention_mask"`
	Text          *string         `json:"text"`
	Prompt        *string         `json:"prompt"`
	Completion    *string         `json:"completion"`
	Messages      json.RawMessage `json:"messages"`
	Tools         json.RawMessage `json:"tools"`
}

// parseRow decodes and checks one row; on error it names the field at fault.
func parseRow(text []byte, opts DataOptions) (Example, string, error) {
	if !utf8.Valid(text) {
		return Example{}, "", errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	var raw rawRow
	if err := dec.Decode(&raw); err != nil {
		return Example{}, jsonErrorField(err), fmt.Errorf("invalid row: %w", err)
	}
	if dec.More() {
		return Example{}, "", errors.New("invalid row: more than one JSON value on the line")
	}
	var ex Example
	var field string
	var err error
	switch {
	case raw.InputIDs != nil:
		if raw.Text != nil || raw.Prompt != nil || raw.Completion != nil || raw.Messages != nil {
			return Example{}, "input_ids", errors.New("a row holds either input_ids or text, not both")
		}
		ex, field, err = idsRow(raw, opts)
	case raw.Labels != nil || raw.AttentionMask != nil:
		return Example{}, "input_ids", errors.New("labels or attention_mask without input_ids")
	case raw.Messages != nil:
		if raw.Text != nil || raw.Prompt != nil || raw.Completion != nil {
			return Example{}, "messages", errors.New("a row holds one of messages, text or prompt/completion")
		}
		ex, err = messagesRow(raw, opts)
		field = "messages"
	case raw.Prompt != nil || raw.Completion != nil:
		if raw.Text != nil {
			return Example{}, "text", errors.New("a row holds either text or prompt/completion, not both")
		}
		if raw.Prompt == nil || raw.Completion == nil {
			return Example{}, "prompt", errors.New("prompt and completion go together")
		}
		ex, field, err = promptRow(*raw.Prompt, *raw.Completion, opts)
	case raw.Text != nil:
		ex, err = textRow(*raw.Text, opts)
		field = "text"
	default:
		return Example{}, "", errors.New(`no input_ids, text, prompt/completion or messages field`)
	}
	if raw.Tools != nil && raw.Messages == nil {
		return Example{}, "tools", errors.New("tools without messages")
	}
	if err != nil {
		return Example{}, field, err
	}
	if f, err := checkExample(ex, opts); err != nil {
		if f == "" {
			f = field
		}
		return Example{}, f, err
	}
	return ex, "", nil
}

// jsonErrorField names the field a decoding error is about, when it says.
func jsonErrorField(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field
	}
	return ""
}

// idsRow is a row of token IDs with optional labels.
func idsRow(raw rawRow, opts DataOptions) (Example, string, error) {
	ids := *raw.InputIDs
	ex := Example{IDs: make([]int32, len(ids))}
	for i, id := range ids {
		if id < 0 || (opts.Vocab > 0 && id >= int64(opts.Vocab)) {
			return Example{}, fmt.Sprintf("input_ids[%d]", i), fmt.Errorf("token ID %d outside the vocabulary (0 … %d)", id, opts.Vocab-1)
		}
		ex.IDs[i] = int32(id)
	}
	if raw.AttentionMask != nil {
		m := *raw.AttentionMask
		if len(m) != len(ids) {
			return Example{}, "attention_mask", fmt.Errorf("%d entries for %d input_ids", len(m), len(ids))
		}
		for i, v := range m {
			if v != 1 {
				return Example{}, fmt.Sprintf("attention_mask[%d]", i), fmt.Errorf("%d: only unpadded rows (all ones) are read; padding is added per batch", v)
			}
		}
	}
	if raw.Labels == nil {
		ex.Labels = append([]int32(nil), ex.IDs...)
		return ex, "", nil
	}
	labels := *raw.Labels
	if len(labels) != len(ids) {
		return Example{}, "labels", fmt.Errorf("%d labels for %d input_ids", len(labels), len(ids))
	}
	ex.Labels = make([]int32, len(labels))
	for i, l := range labels {
		if l != IgnoreIndex && (l < 0 || (opts.Vocab > 0 && l >= int64(opts.Vocab))) {
			return Example{}, fmt.Sprintf("labels[%d]", i), fmt.Errorf("label %d is neither -100 nor a token ID (0 … %d)", l, opts.Vocab-1)
		}
		ex.Labels[i] = int32(l)
	}
	return ex, "", nil
}

// encode returns the IDs of text, refusing when there is no tokenizer.
func encode(opts DataOptions, text string) ([]int32, error) {
	if opts.Tokenizer == nil {
		return nil, errors.New("text rows need the model's tokenizer (tokenizer.json)")
	}
	ids := opts.Tokenizer.Encode(text)
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out, nil
}

// withEOS appends the EOS token when one is set.
func withEOS(ids []int32, opts DataOptions) []int32 {
	if opts.EOS >= 0 {
		ids = append(ids, int32(opts.EOS))
	}
	return ids
}

// textRow learns every token of text.
func textRow(text string, opts DataOptions) (Example, error) {
	if text == "" {
		return Example{}, errors.New("empty text")
	}
	ids, err := encode(opts, text)
	if err != nil {
		return Example{}, err
	}
	ids = withEOS(ids, opts)
	return Example{IDs: ids, Labels: append([]int32(nil), ids...)}, nil
}

// promptRow learns the completion's tokens only. As TRL does, prompt + completion is
// tokenized as one text and the first len(enc(prompt)) tokens are the prompt.
func promptRow(prompt, completion string, opts DataOptions) (Example, string, error) {
	if completion == "" {
		return Example{}, "completion", errors.New("empty completion")
	}
	p, err := encode(opts, prompt)
	if err != nil {
		return Example{}, "prompt", err
	}
	ids, err := encode(opts, prompt+completion)
	if err != nil {
		return Example{}, "completion", err
	}
	if len(p) > len(ids) {
		return Example{}, "prompt", errors.New("the prompt has more tokens than prompt + completion")
	}
	ids = withEOS(ids, opts)
	labels := append([]int32(nil), ids...)
	for i := range p {
		labels[i] = IgnoreIndex
	}
	return Example{IDs: ids, Labels: labels}, "", nil
}

// Rendered text around each assistant turn: Qwen3's template opens it with assistantStart and
// closes it with turnEnd. The learned span is what follows assistantStart up to and including
// turnEnd (the model learns to end its turn), the span TRL's assistant_only_loss takes from a
// template whose {% generation %} block wraps the assistant's content and <|im_end|>.
const (
	assistantStart = "<|im_start|>assistant\n"
	turnEnd        = "<|im_end|>"
)

// messagesRow renders a conversation with Qwen3's chat template and learns the assistant turns.
func messagesRow(raw rawRow, opts DataOptions) (Example, error) {
	if opts.Template != nil {
		return Example{}, fmt.Errorf("messages rows are rendered with Qwen3's chat template, and this model's is another: %w", opts.Template)
	}
	var conv chat.Conversation
	if err := json.Unmarshal(raw.Messages, &conv.Messages); err != nil {
		return Example{}, err
	}
	if raw.Tools != nil {
		if err := json.Unmarshal(raw.Tools, &conv.Tools); err != nil {
			return Example{}, fmt.Errorf("tools: %w", err)
		}
	}
	assistants := 0
	for i, m := range conv.Messages {
		if strings.Contains(m.Content, "<|im_start|>") || strings.Contains(m.Content, turnEnd) ||
			strings.Contains(m.ReasoningContent, "<|im_start|>") || strings.Contains(m.ReasoningContent, turnEnd) {
			return Example{}, fmt.Errorf("message %d: holds the template's turn markers (<|im_start|>, <|im_end|>)", i)
		}
		if m.Role == "assistant" {
			assistants++
		}
	}
	if assistants == 0 {
		return Example{}, errors.New("no assistant message to learn")
	}
	text, err := chat.Render(conv)
	if err != nil {
		return Example{}, err
	}
	spans, err := assistantSpans(text, assistants)
	if err != nil {
		return Example{}, err
	}
	ids, err := encode(opts, text)
	if err != nil {
		return Example{}, err
	}
	labels := make([]int32, len(ids))
	off := 0
	for i, id := range ids {
		b, err := opts.Tokenizer.DecodeToken(int(id))
		if err != nil {
			return Example{}, err
		}
		end := off + len(b)
		labels[i] = IgnoreIndex
		for _, s := range spans {
			if off < s[1] && end > s[0] { // the token overlaps the span
				labels[i] = id
				break
			}
		}
		off = end
	}
	if off != len(text) {
		return Example{}, fmt.Errorf("the tokens of the rendered conversation span %d bytes, the text %d", off, len(text))
	}
	return Example{IDs: ids, Labels: labels}, nil
}

// assistantSpans returns the byte ranges [start, end) of the want assistant turns of text.
func assistantSpans(text string, want int) ([][2]int, error) {
	var spans [][2]int
	for from := 0; ; {
		i := strings.Index(text[from:], assistantStart)
		if i < 0 {
			break
		}
		start := from + i + len(assistantStart)
		j := strings.Index(text[start:], turnEnd)
		if j < 0 {
			return nil, errors.New("an assistant turn is not closed")
		}
		end := start + j + len(turnEnd)
		spans = append(spans, [2]int{start, end})
		from = end
	}
	if len(spans) != want {
		return nil, fmt.Errorf("the rendered conversation has %d assistant turns for %d assistant messages", len(spans), want)
	}
	return spans, nil
}

// checkExample refuses a row that is empty, over-long or has nothing to learn.
func checkExample(ex Example, opts DataOptions) (string, error) {
	switch {
	case len(ex.IDs) == 0:
		return "input_ids", errors.New("empty row")
	case opts.MaxLength > 0 && len(ex.IDs) > opts.MaxLength:
		return "input_ids", fmt.Errorf("%d tokens, more than --max-length %d", len(ex.IDs), opts.MaxLength)
	case ex.Counted() == 0:
		return "labels", errors.New("no token to learn (every label after the first is -100)")
	}
	if opts.Vocab > 0 {
		for i, id := range ex.IDs {
			if int(id) >= opts.Vocab {
				return fmt.Sprintf("token %d", i), fmt.Errorf("token ID %d outside the model's vocabulary (0 … %d)", id, opts.Vocab-1)
			}
		}
	}
	return "", nil
}
