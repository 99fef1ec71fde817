package chat

import (
	"errors"
	"fmt"
	"strings"
)

// Text of the template's tools block, around the tool definitions.
const (
	toolsHeader = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
	toolsFooter = "\n</tools>\n\nFor each function call, return a json object with function name and " +
		"arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n" +
		"{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
)

// Render returns the prompt text Qwen3's chat template renders for c. The comments in the
// bodies quote the template branch each step mirrors.
func Render(c Conversation) (string, error) {
	msgs := c.Messages
	if err := checkRoles(msgs); err != nil {
		return "", err
	}
	var b strings.Builder
	if err := writeSystemTurn(&b, c); err != nil {
		return "", err
	}
	lastQuery := lastQueryIndex(msgs)
	for i := range msgs {
		m := &msgs[i]
		// {%- if message.content is string %} content {%- else %} '' {%- endif %}
		content := m.Content
		if m.NullContent {
			content = ""
		}
		switch {
		case m.Role == "user" || (m.Role == "system" && i > 0):
			b.WriteString("<|im_start|>" + m.Role + "\n" + content + "<|im_end|>\n")
		case m.Role == "assistant":
			if err := writeAssistantTurn(&b, m, content, i > lastQuery, i == len(msgs)-1); err != nil {
				return "", fmt.Errorf("chat: message %d: %w", i, err)
			}
		case m.Role == "tool":
			// Consecutive tool responses share one user turn.
			if i == 0 || msgs[i-1].Role != "tool" {
				b.WriteString("<|im_start|>user")
			}
			b.WriteString("\n<tool_response>\n" + content + "\n</tool_response>")
			if i == len(msgs)-1 || msgs[i+1].Role != "tool" {
				b.WriteString("<|im_end|>\n")
			}
		}
		// A system message at index 0 was written by writeSystemTurn.
	}

	if c.AddGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
		// {%- if enable_thinking is defined and enable_thinking is false %}
		if c.EnableThinking != nil && !*c.EnableThinking {
			b.WriteString("<think>\n\n</think>\n\n")
		}
	}
	return b.String(), nil
}

// checkRoles refuses an empty conversation and a role the template does not render.
func checkRoles(msgs []Message) error {
	if len(msgs) == 0 {
		// messages[0].role raises in Jinja2 on an empty list.
		return errors.New("chat: conversation has no messages")
	}
	for i := range msgs {
		switch msgs[i].Role {
		case "system", "user", "assistant", "tool":
		default:
			// The template renders nothing for other roles; refuse rather than drop the turn.
			return fmt.Errorf("chat: message %d: unknown role %q (want system, user, assistant or tool)", i, msgs[i].Role)
		}
	}
	return nil
}

// writeSystemTurn writes the first turn: the system turn with the tools block when c has tools
// (holding the first message's content when it is a system message), else that system message
// alone, else nothing.
func writeSystemTurn(b *strings.Builder, c Conversation) error {
	first := &c.Messages[0]
	if first.Role == "system" && first.NullContent {
		return errors.New("chat: message 0: system message has null content (the template concatenates it)")
	}
	// {%- if tools %} ... the system turn with the tools block.
	if len(c.Tools) > 0 {
		b.WriteString("<|im_start|>system\n")
		if first.Role == "system" {
			b.WriteString(first.Content + "\n\n")
		}
		b.WriteString(toolsHeader)
		for i, tool := range c.Tools {
			s, err := ToJSON(tool)
			if err != nil {
				return fmt.Errorf("chat: tool %d: %w", i, err)
			}
			b.WriteString("\n" + s)
		}
		b.WriteString(toolsFooter)
	} else if first.Role == "system" {
		b.WriteString("<|im_start|>system\n" + first.Content + "<|im_end|>\n")
	}
	return nil
}

// writeAssistantTurn writes assistant message m, whose content as the template sees it is
// content. afterQuery says m comes after the last user query, isLast that it is the last message:
// together they decide whether its reasoning is kept in a <think> block.
func writeAssistantTurn(b *strings.Builder, m *Message, content string, afterQuery, isLast bool) error {
	reasoning := ""
	if m.reasoningIsString() {
		reasoning = m.ReasoningContent
	} else if strings.Contains(content, "</think>") {
		reasoning, content = splitThink(content)
	}
	if afterQuery && (isLast || reasoning != "") {
		b.WriteString("<|im_start|>assistant\n<think>\n" + strings.Trim(reasoning, "\n") +
			"\n</think>\n\n" + strings.TrimLeft(content, "\n"))
	} else {
		b.WriteString("<|im_start|>assistant\n" + content)
	}
	for j, tc := range m.ToolCalls {
		// {%- if (loop.first and content) or (not loop.first) %} '\n'
		if j > 0 || content != "" {
			b.WriteString("\n")
		}
		if tc.Name == "" {
			// The template would write an empty name; refuse instead.
			return fmt.Errorf("tool call %d has no name", j)
		}
		args, err := tc.ArgumentsText()
		if err != nil {
			return fmt.Errorf("tool call %d: %w", j, err)
		}
		b.WriteString("<tool_call>\n{\"name\": \"" + tc.Name + "\", \"arguments\": " + args + "}\n</tool_call>")
	}
	b.WriteString("<|im_end|>\n")
	return nil
}

// splitThink splits content that holds "</think>" into the reasoning inside the think block and
// the reply after it, as the template does.
func splitThink(content string) (reasoning, reply string) {
	// content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
	before, _, _ := strings.Cut(content, "</think>")
	before = strings.TrimRight(before, "\n")
	before = before[afterLast(before, "<think>"):]
	reasoning = strings.TrimLeft(before, "\n")
	// content.split('</think>')[-1].lstrip('\n')
	reply = strings.TrimLeft(content[afterLast(content, "</think>"):], "\n")
	return reasoning, reply
}

// lastQueryIndex mirrors the template's backwards scan: the index of the last user message whose
// content is a string and is not wrapped in <tool_response>...</tool_response>, or len(msgs)-1
// when there is none. Assistant turns after it keep their reasoning.
func lastQueryIndex(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := &msgs[i]
		if m.Role != "user" || m.NullContent {
			continue
		}
		if strings.HasPrefix(m.Content, "<tool_response>") && strings.HasSuffix(m.Content, "</tool_response>") {
			continue
		}
		return i
	}
	return len(msgs) - 1
}

// afterLast returns the index just after the last occurrence of sep in s, or 0 when sep does not
// occur: the start of Python's s.split(sep)[-1].
func afterLast(s, sep string) int {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return 0
	}
	return i + len(sep)
}
