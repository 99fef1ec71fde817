package chat

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseReply(t *testing.T) {
	type want struct {
		thinking, content string
		calls             []ToolCall
		errs              []string // substrings, one per error, in order
	}
	call := func(name, args string) ToolCall { return ToolCall{Name: name, Arguments: json.RawMessage(args)} }
	for _, tc := range []struct {
		name, text string
		want       want
	}{
		{"plain answer", "4", want{content: "4"}},
		{"empty", "", want{}},
		{"trailing im_end removed", "4<|im_end|>", want{content: "4"}},
		{"trailing endoftext removed", "4<|endoftext|>", want{content: "4"}},
		{"think then answer", "<think>\nTwo plus two.\n</think>\n\nIt is 4.",
			want{thinking: "Two plus two.", content: "It is 4."}},
		{"empty think block (enable_thinking=false echo)", "<think>\n\n</think>\n\nIt is 4.",
			want{content: "It is 4."}},
		{"spaces kept, newlines trimmed", "<think>\n\n r \n\n</think>\n\n a \n",
			want{thinking: " r ", content: " a \n"}},
		{"think opened by the prompt", "reasoning here\n</think>\n\nanswer",
			want{thinking: "reasoning here", content: "answer"}},
		{"unclosed think", "<think>\nstill going",
			want{thinking: "still going", errs: []string{"<think> block not closed"}}},
		{"text before think dropped", "junk<think>r</think>a",
			want{thinking: "r", content: "a", errs: []string{`text before <think> dropped: "junk"`}}},
		{"several think blocks", "<think>x</think>b<think>y</think>\nc",
			want{thinking: "x", content: "c", errs: []string{`2 </think> tags; text between the first and the last dropped: "b<think>y"`}}},
		{"one tool call", "<think>\nNeed the file.\n</think>\n\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\"}}\n</tool_call>",
			want{thinking: "Need the file.", calls: []ToolCall{call("read_file", `{"path": "notes.txt"}`)}}},
		{"content and two tool calls", "Let me add.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 3}\"}\n</tool_call><|im_end|>",
			want{content: "Let me add.", calls: []ToolCall{call("add", `{"a": 1, "b": 2}`), call("add", `"{\"a\": 3}"`)}}},
		{"text after tool call kept", "A\n<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>\nB\n",
			want{content: "A\n\nB", calls: []ToolCall{call("f", `{}`)}}},
		{"malformed JSON names the block", "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {\"a\": }}\n</tool_call>",
			want{calls: []ToolCall{call("f", `{}`)}, errs: []string{"tool call block 1", "invalid JSON"}}},
		{"missing name", "<tool_call>{\"arguments\": {}}</tool_call>",
			want{errs: []string{`tool call block 0 ("{\"arguments\": {}}"): no "name" field`}}},
		{"name not a string", "<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call>",
			want{errs: []string{`"name" is a number, want a string`}}},
		{"empty name", "<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>",
			want{errs: []string{`"name" is empty`}}},
		{"missing arguments", "<tool_call>{\"name\": \"f\"}</tool_call>",
			want{errs: []string{`tool "f": no "arguments" field`}}},
		{"not an object", "<tool_call>[1]</tool_call>",
			want{errs: []string{"want a JSON object, got an array"}}},
		{"empty block", "<tool_call>\n\n</tool_call>", want{errs: []string{"empty block"}}},
		{"unclosed tool call", "Sure.\n<tool_call>\n{\"name\": \"f\", \"argu",
			want{content: "Sure.", errs: []string{"tool call block 0", "<tool_call> not closed"}}},
		{"tool call tags inside thinking are not calls", "<think><tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call></think>done",
			want{thinking: "<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>", content: "done"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ParseReply(tc.text)
			if r.Thinking != tc.want.thinking {
				t.Errorf("Thinking = %q, want %q", r.Thinking, tc.want.thinking)
			}
			if r.Content != tc.want.content {
				t.Errorf("Content = %q, want %q", r.Content, tc.want.content)
			}
			if !reflect.DeepEqual(r.ToolCalls, tc.want.calls) {
				t.Errorf("ToolCalls = %v, want %v", r.ToolCalls, tc.want.calls)
			}
			var msgs []string
			for _, err := range r.Errors {
				msgs = append(msgs, err.Error())
			}
			all := strings.Join(msgs, "\n")
			for _, w := range tc.want.errs {
				if !strings.Contains(all, w) {
					t.Errorf("Errors %q lack %q", msgs, w)
				}
			}
			if len(tc.want.errs) == 0 && len(r.Errors) > 0 {
				t.Errorf("unexpected Errors %q", msgs)
			}
		})
	}
}

func TestToolCallErrorUnwraps(t *testing.T) {
	r := ParseReply("<tool_call>{\"name\": \"f\", \"arguments\": {} </tool_call>")
	if len(r.Errors) != 1 {
		t.Fatalf("Errors = %v, want one", r.Errors)
	}
	var tce *ToolCallError
	if !errors.As(r.Errors[0], &tce) {
		t.Fatalf("error %T is not a *ToolCallError", r.Errors[0])
	}
	if tce.Index != 0 || tce.Block != "{\"name\": \"f\", \"arguments\": {} " {
		t.Errorf("ToolCallError = %+v", tce)
	}
	var syntax *json.SyntaxError
	if !errors.As(r.Errors[0], &syntax) {
		t.Errorf("error %v does not unwrap to a *json.SyntaxError", r.Errors[0])
	}
}

// A reply taken apart and put back as history renders as the raw reply text would have.
func TestReplyMessageRendersLikeRawText(t *testing.T) {
	for _, text := range []string{
		"<think>\nTwo plus two.\n</think>\n\nIt is 4.",
		"<think>\n\n</think>\n\nIt is 4.",
		"It is 4.",
		"\n</think>\n\n\nok",
	} {
		r := ParseReply(text)
		for _, lastTurn := range []bool{true, false} {
			raw := Conversation{Messages: []Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: text}}}
			parsed := Conversation{Messages: []Message{{Role: "user", Content: "q"}, r.Message()}}
			if !lastTurn {
				next := Message{Role: "user", Content: "next"}
				raw.Messages = append(raw.Messages, next)
				parsed.Messages = append(parsed.Messages, next)
			}
			want, err := Render(raw)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Render(parsed)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%q (last turn %v): %s", text, lastTurn, diff(got, want))
			}
		}
	}
}

func TestReplyMessageWithToolCalls(t *testing.T) {
	r := ParseReply("<think>\nplan\n</think>\n\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\":\"notes.txt\"}}\n</tool_call>")
	got, err := Render(Conversation{Messages: []Message{{Role: "user", Content: "Read notes.txt"}, r.Message()}})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>user\nRead notes.txt<|im_end|>\n<|im_start|>assistant\n<think>\nplan\n</think>\n\n" +
		"<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\"}}\n</tool_call><|im_end|>\n"
	if got != want {
		t.Error(diff(got, want))
	}
}

// FuzzParseReply checks that ParseReply never panics and that what it returns is usable: content
// free of </think>, tool calls with a name and valid JSON arguments, and a message that renders.
func FuzzParseReply(f *testing.F) {
	for _, s := range []string{
		"<think>\nr\n</think>\n\na",
		"x</think>y<think>z",
		"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
		"<tool_call>{\"name\": \"f\", \"arguments\": {</tool_call><tool_call>",
		"<think><tool_call></think></tool_call><|im_end|>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		r := ParseReply(text)
		if strings.Contains(r.Content, "</think>") {
			t.Fatalf("Content %q holds </think>", r.Content)
		}
		for i, tc := range r.ToolCalls {
			if tc.Name == "" || !json.Valid(tc.Arguments) {
				t.Fatalf("tool call %d = %+v", i, tc)
			}
		}
		for _, err := range r.Errors {
			if err == nil || err.Error() == "" {
				t.Fatalf("empty error in %v", r.Errors)
			}
		}
		if _, err := Render(Conversation{Messages: []Message{{Role: "user", Content: "q"}, r.Message()}}); err != nil {
			t.Fatalf("Render of the reply's message: %v", err)
		}
	})
}
