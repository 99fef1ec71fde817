package chat

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

const fixtureDir = "../../testdata/qwen3-tokenizer"

// readLines returns the non-empty lines of a JSONL file, split on '\n' only.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// diff describes where got and want first differ, with some context around it.
func diff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-40)
	return fmt.Sprintf("first difference at byte %d (got %d bytes, want %d)\n got: ...%q\nwant: ...%q\nfull got:  %q\nfull want: %q",
		i, len(got), len(want), got[lo:min(len(got), i+40)], want[lo:min(len(want), i+40)], got, want)
}

func TestRenderGolden(t *testing.T) {
	convs := readLines(t, fixtureDir+"/chat.jsonl")
	wants := readLines(t, fixtureDir+"/chat.expected.jsonl")
	if len(convs) != len(wants) || len(convs) == 0 {
		t.Fatalf("chat.jsonl has %d lines, chat.expected.jsonl %d", len(convs), len(wants))
	}
	for i := range convs {
		t.Run(fmt.Sprintf("line%d", i+1), func(t *testing.T) {
			var c Conversation
			if err := json.Unmarshal([]byte(convs[i]), &c); err != nil {
				t.Fatalf("decode conversation: %v", err)
			}
			var want string
			if err := json.Unmarshal([]byte(wants[i]), &want); err != nil {
				t.Fatalf("decode expected: %v", err)
			}
			got, err := Render(c)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got != want {
				t.Errorf("Render mismatch: %s", diff(got, want))
			}
		})
	}
}

// renderCases were derived by reading the template, then checked against Python's Jinja2 3.1.6
// running the template with transformers' environment and tojson (json.dumps, ensure_ascii=False).
// transformers.js 4.3.1 agrees on all but two: "split keeps spaces, strips newlines only" (it
// strips all white space in strip/lstrip/rstrip) and "tools: Python json.dumps formatting" (it
// writes JavaScript numbers and hoists integer-like keys).
var renderCases = []struct {
	name string
	conv string
	want string
}{
	{
		name: "history reasoning stripped before last query, kept after",
		conv: `{"messages":[{"role":"user","content":"q1"},{"role":"assistant","content":"<think>\nr1\n</think>\n\na1"},{"role":"user","content":"q2"},{"role":"assistant","content":"<think>\nr2\n</think>\n\na2"},{"role":"assistant","content":"a3"},{"role":"assistant","content":"a4"}],"add_generation_prompt":true}`,
		want: "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\na1<|im_end|>\n<|im_start|>user\nq2<|im_end|>\n<|im_start|>assistant\n<think>\nr2\n</think>\n\na2<|im_end|>\n<|im_start|>assistant\na3<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\na4<|im_end|>\n<|im_start|>assistant\n",
	},
	{
		name: "reasoning_content field",
		conv: `{"messages":[{"role":"user","content":"q1"},{"role":"assistant","content":"a1","reasoning_content":"r1"},{"role":"user","content":"q2"},{"role":"assistant","content":"\n\na2","reasoning_content":"\n\nr2\n\n"}]}`,
		want: "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\na1<|im_end|>\n<|im_start|>user\nq2<|im_end|>\n<|im_start|>assistant\n<think>\nr2\n</think>\n\na2<|im_end|>\n",
	},
	{
		name: "empty reasoning_content keeps think tags in content",
		conv: `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"<think>x</think>b","reasoning_content":""}]}`,
		want: "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n<think>x</think>b<|im_end|>\n",
	},
	{
		name: "null reasoning_content falls back to content",
		conv: `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"<think>x</think>b","reasoning_content":null}]}`,
		want: "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nx\n</think>\n\nb<|im_end|>\n",
	},
	{
		name: "split keeps spaces, strips newlines only",
		conv: `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"\n\n<think>\n\n r1 \n\n</think>\n\n\n ans \n"}]}`,
		want: "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n r1 \n</think>\n\n ans \n<|im_end|>\n",
	},
	{
		name: "several think blocks",
		conv: `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a<think>x</think>b<think>y</think>\nc"}]}`,
		want: "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nx\n</think>\n\nc<|im_end|>\n",
	},
	{
		name: "close tag without open tag",
		conv: `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"plan\n</think>\n\nanswer"}]}`,
		want: "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nplan\n</think>\n\nanswer<|im_end|>\n",
	},
	{
		name: "multi-step tool: tool_response user turns are not queries",
		conv: `{"messages":[{"role":"user","content":"q1"},{"role":"assistant","content":"<think>t1</think>a","tool_calls":[{"name":"f","arguments":"{}"}]},{"role":"user","content":"<tool_response>\nr\n</tool_response>"},{"role":"assistant","content":"<think>t2</think>done"}],"add_generation_prompt":true}`,
		want: "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\n<think>\nt1\n</think>\n\na\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nr\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\nt2\n</think>\n\ndone<|im_end|>\n<|im_start|>assistant\n",
	},
	{
		name: "user text that only starts with tool_response is a query",
		conv: `{"messages":[{"role":"user","content":"q1"},{"role":"assistant","content":"<think>t1</think>a"},{"role":"user","content":"<tool_response> is a tag"},{"role":"assistant","content":"<think>t2</think>b"}]}`,
		want: "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\na<|im_end|>\n<|im_start|>user\n<tool_response> is a tag<|im_end|>\n<|im_start|>assistant\n<think>\nt2\n</think>\n\nb<|im_end|>\n",
	},
	{
		name: "no user message: no think blocks",
		conv: `{"messages":[{"role":"system","content":"s"},{"role":"assistant","content":"<think>t</think>a"},{"role":"assistant","content":"b"}]}`,
		want: "<|im_start|>system\ns<|im_end|>\n<|im_start|>assistant\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n",
	},
	{
		name: "null user content is not a query",
		conv: `{"messages":[{"role":"user","content":"q1"},{"role":"assistant","content":"<think>t1</think>a"},{"role":"user","content":null},{"role":"assistant","content":"<think>t2</think>b"}]}`,
		want: "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\n<think>\nt1\n</think>\n\na<|im_end|>\n<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n<think>\nt2\n</think>\n\nb<|im_end|>\n",
	},
	{
		name: "empty user content is a query",
		conv: `{"messages":[{"role":"user","content":"q1"},{"role":"assistant","content":"<think>t1</think>a"},{"role":"user","content":""},{"role":"assistant","content":"<think>t2</think>b"}]}`,
		want: "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\na<|im_end|>\n<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n<think>\nt2\n</think>\n\nb<|im_end|>\n",
	},
	{
		name: "tool first and tools split by a system turn",
		conv: `{"messages":[{"role":"tool","content":"r0"},{"role":"tool","content":"r1"},{"role":"system","content":"s2"},{"role":"tool","content":null}],"add_generation_prompt":true}`,
		want: "<|im_start|>user\n<tool_response>\nr0\n</tool_response>\n<tool_response>\nr1\n</tool_response><|im_end|>\n<|im_start|>system\ns2<|im_end|>\n<|im_start|>user\n<tool_response>\n\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
	},
	{
		name: "tool calls: string, object, null, array arguments; both forms",
		conv: `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"Calling.","tool_calls":[{"id":"c1","type":"function","function":{"name":"a","arguments":"{\"x\":1,  \"y\" : [2]}"}},{"name":"b","arguments":{"z":{"y":[1,2.50,{}]},"e":[]}},{"name":"c","arguments":null},{"type":"function","function":{"name":"d","arguments":[1,"two"]}}]},{"role":"tool","content":"ra"},{"role":"tool","content":"rb"},{"role":"tool","content":"rc"},{"role":"tool","content":"rd"},{"role":"assistant","content":"done"}]}`,
		want: "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\nCalling.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\":1,  \"y\" : [2]}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"z\": {\"y\": [1, 2.5, {}]}, \"e\": []}}\n</tool_call>\n<tool_call>\n{\"name\": \"c\", \"arguments\": null}\n</tool_call>\n<tool_call>\n{\"name\": \"d\", \"arguments\": [1, \"two\"]}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nra\n</tool_response>\n<tool_response>\nrb\n</tool_response>\n<tool_response>\nrc\n</tool_response>\n<tool_response>\nrd\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\ndone<|im_end|>\n",
	},
	{
		name: "tool call after empty content has no leading newline",
		conv: `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"","tool_calls":[{"name":"a","arguments":{}},{"name":"b","arguments":{}}]}]}`,
		want: "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call><|im_end|>\n",
	},
	{
		name: "tool call after null content",
		conv: `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[{"name":"a","arguments":{}}]}]}`,
		want: "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call><|im_end|>\n",
	},
	{
		name: "newline content with reasoning before tool call",
		conv: `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"\n","reasoning_content":"r","tool_calls":[{"name":"a","arguments":{"k":"v"}}]}]}`,
		want: "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\n\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"k\": \"v\"}}\n</tool_call><|im_end|>\n",
	},
	{
		name: "tool call in history before last query",
		conv: `{"messages":[{"role":"user","content":"q1"},{"role":"assistant","content":"<think>t</think>\n\nok","tool_calls":[{"name":"a","arguments":{"k":"v"}}]},{"role":"tool","content":"r"},{"role":"assistant","content":"fine"},{"role":"user","content":"q2"}],"add_generation_prompt":true,"enable_thinking":false}`,
		want: "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\nok\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"k\": \"v\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nr\n</tool_response><|im_end|>\n<|im_start|>assistant\nfine<|im_end|>\n<|im_start|>user\nq2<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
	},
	{
		name: "enable_thinking true adds nothing",
		conv: `{"messages":[{"role":"user","content":"q"}],"add_generation_prompt":true,"enable_thinking":true}`,
		want: "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n",
	},
	{
		name: "enable_thinking false without generation prompt",
		conv: `{"messages":[{"role":"user","content":"q"}],"enable_thinking":false}`,
		want: "<|im_start|>user\nq<|im_end|>\n",
	},
	{
		name: "empty tools list: no tools block",
		conv: `{"messages":[{"role":"system","content":"s"},{"role":"user","content":"q"}],"tools":[]}`,
		want: "<|im_start|>system\ns<|im_end|>\n<|im_start|>user\nq<|im_end|>\n",
	},
	{
		name: "tools without system message, second system later",
		conv: `{"messages":[{"role":"user","content":"q"},{"role":"system","content":"late"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"add_generation_prompt":true}`,
		want: "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nq<|im_end|>\n<|im_start|>system\nlate<|im_end|>\n<|im_start|>assistant\n",
	},
	{
		name: "tools: Python json.dumps formatting",
		conv: `{"messages":[{"role":"system","content":""},{"role":"user","content":"q"}],"tools":[{"b":1,"2":2,"1":3,"a":{"10":1,"9":2},"dup":1,"dup":[2],"f":[1.0,1e5,-0.0,1.5e-7,0.0001,1e-5,1e16,1e15,123456789012345678.0,2.5E+3,1e400,-1e400,1e-400,-0,12345678901234567890,0.1,3.14159],"s":"é<>&'\u2028\u2029\u0001\u001f\u007f\t\n\r\b\f\"\\/ 😀 中","t":true,"n":null,"e":{},"l":[]}]}`,
		want: "<|im_start|>system\n\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"b\": 1, \"2\": 2, \"1\": 3, \"a\": {\"10\": 1, \"9\": 2}, \"dup\": [2], \"f\": [1.0, 100000.0, -0.0, 1.5e-07, 0.0001, 1e-05, 1e+16, 1000000000000000.0, 1.2345678901234568e+17, 2500.0, Infinity, -Infinity, 0.0, 0, 12345678901234567890, 0.1, 3.14159], \"s\": \"é<>&'\u2028\u2029\\u0001\\u001f\x7f\\t\\n\\r\\b\\f\\\"\\\\/ 😀 中\", \"t\": true, \"n\": null, \"e\": {}, \"l\": []}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nq<|im_end|>\n",
	},
	{
		name: "think tags in user content are verbatim",
		conv: `{"messages":[{"role":"user","content":"<think>x</think>y"}],"add_generation_prompt":true}`,
		want: "<|im_start|>user\n<think>x</think>y<|im_end|>\n<|im_start|>assistant\n",
	},
	{
		name: "assistant first",
		conv: `{"messages":[{"role":"assistant","content":"hello"},{"role":"user","content":"q"}],"add_generation_prompt":true}`,
		want: "<|im_start|>assistant\nhello<|im_end|>\n<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n",
	},
	{
		name: "system only",
		conv: `{"messages":[{"role":"system","content":"s"}],"add_generation_prompt":true,"enable_thinking":false}`,
		want: "<|im_start|>system\ns<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
	},
}

func TestRenderCases(t *testing.T) {
	for _, tc := range renderCases {
		t.Run(tc.name, func(t *testing.T) {
			var c Conversation
			if err := json.Unmarshal([]byte(tc.conv), &c); err != nil {
				t.Fatalf("decode conversation: %v", err)
			}
			got, err := Render(c)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got != tc.want {
				t.Errorf("Render mismatch: %s", diff(got, tc.want))
			}
		})
	}
}

// TestRenderRandom compares Render with Python's Jinja2 on 400 random conversations
// (testdata/README.md tells how they were made).
func TestRenderRandom(t *testing.T) {
	convs := readLines(t, "testdata/random.jsonl")
	wants := readLines(t, "testdata/random.expected.jsonl")
	if len(convs) != len(wants) || len(convs) < 400 {
		t.Fatalf("random.jsonl has %d lines, random.expected.jsonl %d", len(convs), len(wants))
	}
	failures := 0
	for i := range convs {
		var c Conversation
		if err := json.Unmarshal([]byte(convs[i]), &c); err != nil {
			t.Fatalf("line %d: decode conversation: %v", i+1, err)
		}
		var want string
		if err := json.Unmarshal([]byte(wants[i]), &want); err != nil {
			t.Fatalf("line %d: decode expected: %v", i+1, err)
		}
		got, err := Render(c)
		if err != nil {
			t.Errorf("line %d: Render: %v", i+1, err)
		} else if got != want {
			t.Errorf("line %d: %s\nconversation: %s", i+1, diff(got, want), convs[i])
		} else {
			continue
		}
		if failures++; failures == 5 {
			t.Fatalf("stopping after %d failures", failures)
		}
	}
}
