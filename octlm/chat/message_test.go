package chat

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestMessageDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want Message
	}{
		{"plain", `{"role":"user","content":"hi","name":"ignored"}`,
			Message{Role: "user", Content: "hi"}},
		{"null content", `{"role":"assistant","content":null}`,
			Message{Role: "assistant", NullContent: true}},
		{"absent content", `{"role":"tool"}`,
			Message{Role: "tool", NullContent: true}},
		{"empty reasoning is present", `{"role":"assistant","content":"a","reasoning_content":""}`,
			Message{Role: "assistant", Content: "a", HasReasoningContent: true}},
		{"null reasoning is absent", `{"role":"assistant","content":"a","reasoning_content":null}`,
			Message{Role: "assistant", Content: "a"}},
		{"reasoning", `{"role":"assistant","content":"a","reasoning_content":"r"}`,
			Message{Role: "assistant", Content: "a", ReasoningContent: "r", HasReasoningContent: true}},
		{"openai tool call", `{"role":"assistant","content":"","tool_calls":[{"id":"x","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}}]}`,
			Message{Role: "assistant", ToolCalls: []ToolCall{{Name: "f", Arguments: json.RawMessage(`"{\"a\": 1}"`)}}}},
		{"flat tool call", `{"role":"assistant","content":"","tool_calls":[{"name":"f","arguments":{"a": [1]}}]}`,
			Message{Role: "assistant", ToolCalls: []ToolCall{{Name: "f", Arguments: json.RawMessage(`{"a": [1]}`)}}}},
		{"empty function object reads the outer fields", `{"role":"assistant","content":"","tool_calls":[{"function":{},"name":"g","arguments":1}]}`,
			Message{Role: "assistant", ToolCalls: []ToolCall{{Name: "g", Arguments: json.RawMessage(`1`)}}}},
		{"null arguments", `{"role":"assistant","content":"","tool_calls":[{"name":"f","arguments":null}]}`,
			Message{Role: "assistant", ToolCalls: []ToolCall{{Name: "f", Arguments: json.RawMessage(`null`)}}}},
		{"missing arguments", `{"role":"assistant","content":"","tool_calls":[{"name":"f"}]}`,
			Message{Role: "assistant", ToolCalls: []ToolCall{{Name: "f"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m Message
			if err := json.Unmarshal([]byte(tc.in), &m); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(m, tc.want) {
				t.Errorf("got %#v\nwant %#v", m, tc.want)
			}
			// MarshalJSON writes a form that decodes back to the same message.
			data, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			var back Message
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatalf("decode %s: %v", data, err)
			}
			// encoding/json compacts raw arguments; compare them compacted.
			for i := range m.ToolCalls {
				if a := m.ToolCalls[i].Arguments; a != nil {
					var buf bytes.Buffer
					if err := json.Compact(&buf, a); err != nil {
						t.Fatal(err)
					}
					m.ToolCalls[i].Arguments = buf.Bytes()
				}
			}
			if !reflect.DeepEqual(back, m) {
				t.Errorf("round trip through %s: got %#v", data, back)
			}
		})
	}
}

func TestMessageDecodeErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"content":"x"}`, "no role"},
		{`{"role":"user","content":[{"type":"text","text":"x"}]}`, "content: want a string or null, got an array"},
		{`{"role":"user","content":5}`, "content: want a string or null, got a number"},
		{`{"role":"assistant","content":"","reasoning_content":{}}`, "reasoning_content: want a string or null, got an object"},
		{`{"role":"assistant","content":"","tool_calls":[{"function":"f"}]}`, "function: want an object, got a string"},
		{`{"role":7}`, "message"},
		{`[]`, "message"},
	} {
		var m Message
		err := json.Unmarshal([]byte(tc.in), &m)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("decode %s: error %v, want one containing %q", tc.in, err, tc.want)
		}
	}
}

func TestRenderErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		conv string
		want string
	}{
		{"no messages", `{"messages":[],"add_generation_prompt":true}`, "no messages"},
		{"unknown role", `{"messages":[{"role":"user","content":"q"},{"role":"developer","content":"x"}]}`,
			`message 1: unknown role "developer"`},
		{"null first system", `{"messages":[{"role":"system","content":null},{"role":"user","content":"q"}]}`,
			"message 0: system message has null content"},
		{"null first system with tools", `{"messages":[{"role":"system"},{"role":"user","content":"q"}],"tools":[{}]}`,
			"message 0: system message has null content"},
		{"tool call without name", `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"","tool_calls":[{"arguments":{}}]}]}`,
			"message 1: tool call 0 has no name"},
		{"tool call without arguments", `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"","tool_calls":[{"name":"a","arguments":{}},{"name":"f"}]}]}`,
			`message 1: tool call 1: tool call "f": no arguments`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Conversation
			if err := json.Unmarshal([]byte(tc.conv), &c); err != nil {
				t.Fatal(err)
			}
			got, err := Render(c)
			if err == nil {
				t.Fatalf("Render = %q, want an error containing %q", got, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want one containing %q", err, tc.want)
			}
		})
	}
	// Tools built in Go can hold invalid JSON.
	_, err := Render(Conversation{Messages: []Message{{Role: "user", Content: "q"}}, Tools: []json.RawMessage{[]byte(`{"a":`)}})
	if err == nil || !strings.Contains(err.Error(), "chat: tool 0: tojson:") {
		t.Errorf("invalid tool JSON: error %v", err)
	}
}

func TestUserPrompt(t *testing.T) {
	for _, tc := range []struct {
		think bool
		want  string
	}{
		{true, "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n"},
		{false, "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
	} {
		got, err := Render(UserPrompt("What is 2 + 2?", tc.think))
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("think=%v: %s", tc.think, diff(got, tc.want))
		}
	}
}

// A Go-built message with an empty ReasoningContent behaves like an absent one: the template looks
// for the think block in Content. HasReasoningContent makes the empty string count.
func TestReasoningContentPresence(t *testing.T) {
	msgs := func(m Message) Conversation {
		return Conversation{Messages: []Message{{Role: "user", Content: "q"}, m}}
	}
	got, err := Render(msgs(Message{Role: "assistant", Content: "<think>r</think>a"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\na<|im_end|>\n"; got != want {
		t.Errorf("absent: %s", diff(got, want))
	}
	got, err = Render(msgs(Message{Role: "assistant", Content: "<think>r</think>a", HasReasoningContent: true}))
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n<think>r</think>a<|im_end|>\n"; got != want {
		t.Errorf("present and empty: %s", diff(got, want))
	}
}
