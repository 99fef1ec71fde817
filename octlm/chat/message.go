package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Message is one turn of a conversation, in the shape the chat template reads: role "system",
// "user", "assistant" or "tool", its text, and for an assistant its reasoning and tool calls.
//
// It decodes from the usual JSON form ({"role": ..., "content": ..., "reasoning_content": ...,
// "tool_calls": [...]}); other fields (name, tool_call_id, ...) are ignored, as the template
// ignores them.
type Message struct {
	Role             string     `json:"role"`
	Content          string     `json:"content"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`

	// NullContent marks content that was null or absent in JSON. The template treats such content
	// as empty but, unlike an empty string, a user message with null content does not count as the
	// latest query, and a first system message with null content is an error.
	NullContent bool `json:"-"`

	// HasReasoningContent marks a reasoning_content that was present as a string, even an empty
	// one. The template then uses it as is and does not look for a <think> block in Content. A
	// non-empty ReasoningContent implies it.
	HasReasoningContent bool `json:"-"`
}

// reasoningIsString reports whether the template's "message.reasoning_content is string" holds.
func (m *Message) reasoningIsString() bool {
	return m.HasReasoningContent || m.ReasoningContent != ""
}

// UnmarshalJSON decodes a message, keeping track of null content and of an explicit
// reasoning_content, which the template distinguishes from empty and absent ones.
func (m *Message) UnmarshalJSON(data []byte) error {
	var raw struct {
		Role             *string         `json:"role"`
		Content          json.RawMessage `json:"content"`
		ReasoningContent json.RawMessage `json:"reasoning_content"`
		ToolCalls        []ToolCall      `json:"tool_calls"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("message: %w", err)
	}
	if raw.Role == nil {
		return fmt.Errorf("message: no role")
	}
	*m = Message{Role: *raw.Role, ToolCalls: raw.ToolCalls}
	var isString bool
	var err error
	m.Content, isString, err = decodeOptionalString(raw.Content)
	if err != nil {
		return fmt.Errorf("message (role %q): content: %w", m.Role, err)
	}
	m.NullContent = !isString
	m.ReasoningContent, m.HasReasoningContent, err = decodeOptionalString(raw.ReasoningContent)
	if err != nil {
		return fmt.Errorf("message (role %q): reasoning_content: %w", m.Role, err)
	}
	return nil
}

// MarshalJSON encodes a message in the form UnmarshalJSON reads, content null where NullContent
// is set and reasoning_content present where HasReasoningContent is.
func (m Message) MarshalJSON() ([]byte, error) {
	out := struct {
		Role             string     `json:"role"`
		Content          *string    `json:"content"`
		ReasoningContent *string    `json:"reasoning_content,omitempty"`
		ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	}{Role: m.Role, ToolCalls: m.ToolCalls}
	if !m.NullContent {
		out.Content = &m.Content
	}
	if m.reasoningIsString() {
		out.ReasoningContent = &m.ReasoningContent
	}
	return json.Marshal(out)
}

// decodeOptionalString decodes a JSON string, or null/absent (ok false). Anything else, such as
// the list-of-parts content of multimodal messages, is an error: the template would render it as
// an empty string.
func decodeOptionalString(raw json.RawMessage) (s string, ok bool, err error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", false, nil
	}
	if raw[0] != '"' {
		return "", false, fmt.Errorf("want a string or null, got %s", describeJSON(raw))
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, err
	}
	return s, true, nil
}

// describeJSON names the kind of a JSON value for error messages.
func describeJSON(raw json.RawMessage) string {
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '"':
		return "a string"
	default:
		return "a number"
	}
}

// ToolCall is one function call: its name, and its arguments as raw JSON. Arguments that are a
// JSON string are text written verbatim into the prompt (the template's "arguments is string"
// branch); any other JSON value is serialized the way the template's tojson filter does.
//
// It decodes from both the flat form {"name": ..., "arguments": ...} and the OpenAI form
// {"type": "function", "function": {"name": ..., "arguments": ...}} (a non-empty "function"
// object wins, as in the template).
type ToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"` // nil when absent, "null" for null
}

// UnmarshalJSON decodes the flat or the OpenAI form of a tool call.
func (tc *ToolCall) UnmarshalJSON(data []byte) error {
	type flat struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	var raw struct {
		flat
		Function json.RawMessage `json:"function"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("tool call: %w", err)
	}
	f := raw.flat
	if len(raw.Function) > 0 && !bytes.Equal(raw.Function, []byte("null")) {
		if raw.Function[0] != '{' {
			return fmt.Errorf("tool call: function: want an object, got %s", describeJSON(raw.Function))
		}
		var fn map[string]json.RawMessage
		if err := json.Unmarshal(raw.Function, &fn); err != nil {
			return fmt.Errorf("tool call: function: %w", err)
		}
		// An empty object is false in Jinja: the template then reads the outer fields.
		if len(fn) > 0 {
			f = flat{}
			if err := json.Unmarshal(raw.Function, &f); err != nil {
				return fmt.Errorf("tool call: function: %w", err)
			}
		}
	}
	*tc = ToolCall{Arguments: f.Arguments}
	if f.Name != nil {
		tc.Name = *f.Name
	}
	return nil
}

// ArgumentsText returns the arguments as the template writes them: a JSON string's text
// verbatim, any other value serialized like the template's tojson filter.
func (tc ToolCall) ArgumentsText() (string, error) {
	if len(tc.Arguments) == 0 {
		return "", fmt.Errorf("tool call %q: no arguments", tc.Name)
	}
	raw := bytes.TrimSpace(tc.Arguments)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("tool call %q: arguments: %w", tc.Name, err)
		}
		return s, nil
	}
	s, err := ToJSON(raw)
	if err != nil {
		return "", fmt.Errorf("tool call %q: arguments: %w", tc.Name, err)
	}
	return s, nil
}

// Conversation is one input to Render, in the form of a line of chat.jsonl: the messages, the
// tool definitions (each serialized into the system turn with tojson), whether to open an
// assistant turn at the end, and enable_thinking (nil when absent; false puts an empty think
// block into the generation prompt).
type Conversation struct {
	Messages            []Message         `json:"messages"`
	Tools               []json.RawMessage `json:"tools,omitempty"`
	AddGenerationPrompt bool              `json:"add_generation_prompt,omitempty"`
	EnableThinking      *bool             `json:"enable_thinking,omitempty"`
}

// UserPrompt returns a conversation of one user message that ends in an open assistant turn; with
// think false the model is told to skip its reasoning (enable_thinking=false).
func UserPrompt(text string, think bool) Conversation {
	return Conversation{
		Messages:            []Message{{Role: "user", Content: text}},
		AddGenerationPrompt: true,
		EnableThinking:      &think,
	}
}
