package eval

import (
	"context"
	"strings"
	"testing"
)

const toolTask = "../examples/tasks/tool-calls/tool_calls.yaml"

// TestToolCallAST checks BFCL's simple AST rules on replies to the example's first document.
func TestToolCallAST(t *testing.T) {
	in := buildTask(t, toolTask)
	weather := in.Docs[0].Target
	area := in.Docs[1].Target
	call := func(body string) string { return "<tool_call>\n" + body + "\n</tool_call>" }
	for _, c := range []struct {
		name   string
		reply  string
		target any
		want   float64
	}{
		{"exact", call(`{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}`), weather, 1},
		{"optional left out", call(`{"name": "get_weather", "arguments": {"city": "paris, france"}}`), weather, 1},
		{"thinking and text around", "<think>\nhm\n</think>\n\nSure.\n" + call(`{"name": "get_weather", "arguments": {"city": "Paris"}}`), weather, 1},
		{"wrong value", call(`{"name": "get_weather", "arguments": {"city": "Rome"}}`), weather, 0},
		{"unknown parameter", call(`{"name": "get_weather", "arguments": {"city": "Paris", "day": "today"}}`), weather, 0},
		{"wrong function", call(`{"name": "get_time", "arguments": {"city": "Paris"}}`), weather, 0},
		{"two calls", call(`{"name": "get_weather", "arguments": {"city": "Paris"}}`) + call(`{"name": "get_weather", "arguments": {"city": "Paris"}}`), weather, 0},
		{"no call", "It is sunny in Paris.", weather, 0},
		{"malformed", call(`{"name": "get_weather", "arguments": {"city": "Paris"`), weather, 0},
		{"int for a number", call(`{"name": "triangle_area", "arguments": {"base": 10, "height": 5}}`), area, 1},
		{"float equal to the int", call(`{"name": "triangle_area", "arguments": {"base": 10.0, "height": 5}}`), area, 0},
		{"required left out", call(`{"name": "triangle_area", "arguments": {"base": 10}}`), area, 0},
	} {
		got, err := toolCallAST(c.reply, c.target)
		if err != nil || got != c.want {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	if _, err := toolCallAST("x", "not an answer"); err == nil {
		t.Error("a target that is not a possible answer was accepted")
	}
}

// TestToolCallTask renders the example's prompts with the chat template and its tools, and runs
// the task end to end on the fixture model (a random model: its score is whatever it is, but
// every document is answered and scored).
func TestToolCallTask(t *testing.T) {
	task, err := LoadTask(toolTask)
	if err != nil {
		t.Fatal(err)
	}
	in, err := task.Build(BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := in.Docs[0].Requests[0].Context
	for _, w := range []string{"<|im_start|>system\n# Tools", `"name": "get_weather"`, "<|im_start|>user\nWhat is the weather like in Paris, in celsius?<|im_end|>\n", "<|im_start|>assistant\n<think>\n\n</think>\n\n"} {
		if !strings.Contains(ctx, w) {
			t.Errorf("prompt lacks %q:\n%s", w, ctx)
		}
	}
	if !strings.HasSuffix(ctx, "</think>\n\n") {
		t.Errorf("prompt does not end with the open assistant turn: %q", ctx[max(0, len(ctx)-40):])
	}
	m, tok := fixtureModel(t)
	r, err := NewRunner(m, tok, 1024, nil)
	if err != nil {
		t.Fatal(err)
	}
	task.Generation.MaxGenToks = 8
	if err := r.Run(context.Background(), in, nil); err != nil {
		t.Fatal(err)
	}
	res := in.Aggregate()
	if v, ok := res.Values["tool_call_ast,none"].(float64); !ok || v < 0 || v > 1 {
		t.Errorf("tool_call_ast,none = %v", res.Values["tool_call_ast,none"])
	}
	bad := writeTask(t, strings.Replace(mcHeader, "multiple_choice", "multiple_choice\nchat_template: true", 1)+"doc_to_text: q\ndoc_to_target: gold\ndoc_to_choice: options\n", map[string]string{"d.jsonl": mcData})
	if _, err := LoadTask(bad); err == nil || !strings.Contains(err.Error(), "generate_until tasks only") {
		t.Errorf("chat_template on a multiple_choice task: %v", err)
	}
}
