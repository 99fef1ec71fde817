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

// Render returns the prompt text Qwen3's chat template renders for c. The comments in the body
// quote the template branch each step mirrors.
func Render(c Conversation) (string, error) {
	msgs := c.Messages
	if len(msgs) == 0 {
		// messages[0].role raises in Jinja2 on an empty list.
		return "", errors.New("chat: conversation has no messages")
	}
	for i := range msgs {
		switch msgs[i].Role {
		case "system", "user", "assistant", "tool":
		default:
			// The template renders nothing for other roles; refuse rather than drop the turn.
			return "", fmt.Errorf("chat: message %d: unknown role %q (want system, user, assistant or tool)", i, msgs[i].Role)
		}
	}
	var b strings.Builder

	// {%- if tools %} ... the system turn with the tools block.
	first := &msgs[0]
	if len(c.Tools) > 0 {
		b.WriteString("<|im_start|>system\n")
		if first.Role == "system" {
			if first.NullContent {
				return "", errors.New("chat: message 0: system message has null content (the template concatenates it)")
			}
			b.WriteString(first.Content + "\n\n")
		}
		b.WriteString(toolsHeader)
		for i, tool := range c.Tools {
			s, err := ToJSON(tool)
			if err != nil {
				return "", fmt.Errorf("chat: tool %d: %w", i, err)
			}
			b.WriteString("\n" + s)
		}
		b.WriteString(toolsFooter)
	} else if first.Role == "system" {
		if first.NullContent {
			return "", errors.New("chat: message 0: system message has null content (the template concatenates it)")
		}
		b.WriteString("<|im_start|>system\n" + first.Content + "<|im_end|>\n")
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
			reasoning := ""
			if m.reasoningIsString() {
				reasoning = m.ReasoningContent
			} else if strings.Contains(content, "</think>") {
				// content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
				before, _, _ := strings.Cut(content, "</think>")
				before = strings.TrimRight(before, "\n")
				before = before[afterLast(before, "<think>"):]
				reasoning = strings.TrimLeft(before, "\n")
				// content.split('</think>')[-1].lstrip('\n')
				content = strings.TrimLeft(content[afterLast(content, "</think>"):], "\n")
			}
			isLast := i == len(msgs)-1
			if i > lastQuery && (isLast || reasoning != "") {
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
					return "", fmt.Errorf("chat: message %d: tool call %d has no name", i, j)
				}
				args, err := tc.ArgumentsText()
				if err != nil {
					return "", fmt.Errorf("chat: message %d: tool call %d: %w", i, j, err)
				}
				b.WriteString("<tool_call>\n{\"name\": \"" + tc.Name + "\", \"arguments\": " + args + "}\n</tool_call>")
			}
			b.WriteString("<|im_end|>\n")

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
		// A system message at index 0 was written above.
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
