package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Reply is a generated assistant reply taken apart.
type Reply struct {
	// Thinking is the text of the <think> block, without the tags and the newlines around it.
	Thinking string
	// Content is the answer: the text after the think block, less the tool-call blocks.
	Content string
	// ToolCalls are the well-formed <tool_call> blocks, in order.
	ToolCalls []ToolCall
	// Errors lists what could not be parsed or was dropped: a *ToolCallError for each malformed
	// or unclosed tool-call block, and plain errors for an unclosed think block or text lost
	// around it.
	Errors []error
}

// ToolCallError reports a <tool_call> block that is not a {"name": ..., "arguments": ...} object.
type ToolCallError struct {
	Index int    // position of the block among the reply's <tool_call> blocks, from 0
	Block string // the text between <tool_call> and </tool_call> (or the end, when unclosed)
	Err   error
}

func (e *ToolCallError) Error() string {
	return fmt.Sprintf("chat: tool call block %d (%s): %v", e.Index, excerpt(e.Block), e.Err)
}

func (e *ToolCallError) Unwrap() error { return e.Err }

// Tags of Qwen3's replies.
const (
	thinkOpen      = "<think>"
	thinkClose     = "</think>"
	toolCallOpen   = "<tool_call>"
	toolCallClose  = "</tool_call>"
	imEnd          = "<|im_end|>"
	endOfText      = "<|endoftext|>"
	excerptMaxRune = 60
)

// ParseReply takes apart the text a Qwen3 model generated after the prompt's
// "<|im_start|>assistant\n" (one trailing <|im_end|> or <|endoftext|>, if the decoder kept it,
// is removed first).
//
// The think block is separated exactly as the template separates it when the reply comes back
// as history: Thinking is the text between the last <think> before the first </think> and that
// </think> (all of it when the prompt already opened the block and the reply has no <think>), and
// Content is what follows the last </think>, less its leading newlines. Text dropped by this
// rule, and a <think> that is never closed (its text then goes to Thinking), are noted in Errors.
// A reply without </think> and <think> is all Content.
//
// Content is then scanned for <tool_call>...</tool_call> blocks. Each block's body must be a JSON
// object with a non-empty string "name" and an "arguments" value (kept as raw JSON); a block that
// is not, or is never closed, becomes a *ToolCallError in Errors and is left out of both
// ToolCalls and Content. When blocks were found, Content is the text outside them with trailing
// white space removed.
func ParseReply(text string) Reply {
	var r Reply
	if s, ok := strings.CutSuffix(text, imEnd); ok {
		text = s
	} else if s, ok := strings.CutSuffix(text, endOfText); ok {
		text = s
	}

	content := text
	if first := strings.Index(text, thinkClose); first >= 0 {
		before := text[:first]
		if open := strings.LastIndex(before, thinkOpen); open >= 0 {
			if dropped := before[:open]; strings.TrimSpace(dropped) != "" {
				r.Errors = append(r.Errors, fmt.Errorf("chat: reply: text before %s dropped: %s", thinkOpen, excerpt(dropped)))
			}
			before = before[open+len(thinkOpen):]
		}
		r.Thinking = strings.Trim(before, "\n")
		last := strings.LastIndex(text, thinkClose)
		if last > first {
			r.Errors = append(r.Errors, fmt.Errorf("chat: reply: %d %s tags; text between the first and the last dropped: %s",
				strings.Count(text, thinkClose), thinkClose, excerpt(text[first+len(thinkClose):last])))
		}
		content = strings.TrimLeft(text[last+len(thinkClose):], "\n")
	} else if open := strings.Index(text, thinkOpen); open >= 0 {
		if dropped := text[:open]; strings.TrimSpace(dropped) != "" {
			r.Errors = append(r.Errors, fmt.Errorf("chat: reply: text before %s dropped: %s", thinkOpen, excerpt(dropped)))
		}
		r.Thinking = strings.Trim(text[open+len(thinkOpen):], "\n")
		r.Errors = append(r.Errors, fmt.Errorf("chat: reply: %s block not closed (generation stopped while thinking?)", thinkOpen))
		content = ""
	}

	if !strings.Contains(content, toolCallOpen) {
		r.Content = content
		return r
	}
	var outside strings.Builder
	rest := content
	for index := 0; ; index++ {
		i := strings.Index(rest, toolCallOpen)
		if i < 0 {
			outside.WriteString(rest)
			break
		}
		outside.WriteString(rest[:i])
		rest = rest[i+len(toolCallOpen):]
		j := strings.Index(rest, toolCallClose)
		if j < 0 {
			r.Errors = append(r.Errors, &ToolCallError{Index: index, Block: rest,
				Err: fmt.Errorf("%s not closed (generation stopped inside it?)", toolCallOpen)})
			break
		}
		block := rest[:j]
		rest = rest[j+len(toolCallClose):]
		tc, err := parseToolCall(block)
		if err != nil {
			r.Errors = append(r.Errors, &ToolCallError{Index: index, Block: block, Err: err})
			continue
		}
		r.ToolCalls = append(r.ToolCalls, tc)
	}
	r.Content = strings.TrimRightFunc(outside.String(), unicode.IsSpace)
	return r
}

// parseToolCall decodes the body of one <tool_call> block.
func parseToolCall(block string) (ToolCall, error) {
	body := strings.TrimSpace(block)
	if body == "" {
		return ToolCall{}, errors.New("empty block")
	}
	if !json.Valid([]byte(body)) {
		// Unmarshal's error names the offset of the fault.
		var v any
		err := json.Unmarshal([]byte(body), &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return ToolCall{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if body[0] != '{' {
		return ToolCall{}, fmt.Errorf("want a JSON object, got %s", describeJSON(json.RawMessage(body)))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &fields); err != nil {
		return ToolCall{}, err
	}
	rawName, ok := fields["name"]
	if !ok {
		return ToolCall{}, errors.New(`no "name" field`)
	}
	var name string
	if rawName[0] != '"' || json.Unmarshal(rawName, &name) != nil {
		return ToolCall{}, fmt.Errorf(`"name" is %s, want a string`, describeJSON(rawName))
	}
	if name == "" {
		return ToolCall{}, errors.New(`"name" is empty`)
	}
	args, ok := fields["arguments"]
	if !ok {
		return ToolCall{}, fmt.Errorf(`tool %q: no "arguments" field`, name)
	}
	return ToolCall{Name: name, Arguments: args}, nil
}

// Message returns the reply as an assistant message for the conversation's history: Content,
// Thinking as reasoning_content, and the tool calls.
func (r Reply) Message() Message {
	return Message{
		Role:                "assistant",
		Content:             r.Content,
		ReasoningContent:    r.Thinking,
		HasReasoningContent: true,
		ToolCalls:           r.ToolCalls,
	}
}

// excerpt quotes at most the first excerptMaxRune runes of s for an error message.
func excerpt(s string) string {
	n := 0
	for i := range s {
		if n == excerptMaxRune {
			return fmt.Sprintf("%q...", s[:i])
		}
		n++
	}
	return fmt.Sprintf("%q", s)
}
