package eval

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/octlm/octlm/octlm/chat"
)

// Tool-call tasks are octlm's extension of the task format (lm-eval has none): a generate_until
// task with
//
//	chat_template: true   # the context becomes one user turn of Qwen3's chat template
//	                      # (enable_thinking false), as lm-eval's --apply_chat_template renders it
//	doc_to_tools: tools   # the feature holding the document's tools (OpenAI function schemas),
//	                      # written into the system turn as the template writes them
//	metric_list:
//	  - metric: tool_call_ast
//
// and a target in the Berkeley Function-Calling Leaderboard's "possible answer" form: a list of
// one {function name: {parameter: [allowed values]}} object ("" among the values: the parameter
// may be left out). tool_call_ast is BFCL's simple AST check: the reply's <tool_call> blocks
// (octlm/chat's parser) must hold exactly one call, of that function, with every parameter it
// passes allowed and every required one passed.

// chatContext renders the request's context as one user turn with the document's tools.
func (t *Task) chatContext(doc *Object, context string) (string, error) {
	conv := chat.UserPrompt(context, false)
	if t.DocToTools != "" {
		v, ok := doc.Get(t.DocToTools)
		if !ok {
			return "", fmt.Errorf("doc_to_tools: the document has no feature %q", t.DocToTools)
		}
		tools, ok := v.([]any)
		if !ok {
			return "", fmt.Errorf("doc_to_tools: %s is %s, not a list of tools", t.DocToTools, pyTypeName(v))
		}
		for i, tool := range tools {
			b, err := marshalValue(tool)
			if err != nil {
				return "", fmt.Errorf("doc_to_tools: tool %d: %w", i, err)
			}
			conv.Tools = append(conv.Tools, json.RawMessage(b))
		}
	}
	s, err := chat.Render(conv)
	if err != nil {
		return "", fmt.Errorf("chat template: %w", err)
	}
	return s, nil
}

// toolCallAST scores a generated reply against a BFCL possible answer: 1 when it passes the
// simple AST check, else 0.
func toolCallAST(reply string, target any) (float64, error) {
	want, err := possibleAnswer(target)
	if err != nil {
		return 0, err
	}
	r := chat.ParseReply(reply)
	if len(r.ToolCalls) != 1 || len(r.Errors) > 0 {
		return 0, nil
	}
	call := r.ToolCalls[0]
	if call.Name != want.name {
		return 0, nil
	}
	args, err := parseJSONValue(call.Arguments)
	if err != nil {
		return 0, nil
	}
	got, ok := args.(*Object)
	if !ok {
		return 0, nil
	}
	for _, k := range got.Keys {
		allowed, ok := want.params.Get(k)
		if !ok {
			return 0, nil // a parameter the answer does not have
		}
		if !anyAllowed(got.Values[k], allowed.([]any)) {
			return 0, nil
		}
	}
	for _, k := range want.params.Keys {
		if _, passed := got.Get(k); passed {
			continue
		}
		optional := false
		for _, v := range want.params.Values[k].([]any) {
			if v == "" {
				optional = true
			}
		}
		if !optional {
			return 0, nil // a required parameter left out
		}
	}
	return 1, nil
}

type bfclAnswer struct {
	name   string
	params *Object // parameter → allowed values
}

func possibleAnswer(target any) (bfclAnswer, error) {
	if list, ok := target.([]any); ok && len(list) == 1 {
		target = list[0]
	}
	o, ok := target.(*Object)
	if !ok || len(o.Keys) != 1 {
		return bfclAnswer{}, fmt.Errorf("tool_call_ast: the target is %s; want BFCL's possible answer, [{function: {parameter: [allowed values]}}]", pyTypeName(target))
	}
	params, ok := o.Values[o.Keys[0]].(*Object)
	if !ok {
		return bfclAnswer{}, fmt.Errorf("tool_call_ast: the parameters of %s are not a mapping", o.Keys[0])
	}
	for _, k := range params.Keys {
		if _, ok := params.Values[k].([]any); !ok {
			return bfclAnswer{}, fmt.Errorf("tool_call_ast: the allowed values of %s.%s are not a list", o.Keys[0], k)
		}
	}
	return bfclAnswer{name: o.Keys[0], params: params}, nil
}

func anyAllowed(v any, allowed []any) bool {
	for _, a := range allowed {
		if bfclEqual(v, a) {
			return true
		}
	}
	return false
}

// bfclStrip is BFCL's standardize_string: spaces and ,./-_*^ removed, lower case, ' as ".
var bfclStrip = regexp.MustCompile(`[ ,./\-_*^]`)

func bfclString(s string) string {
	return strings.ReplaceAll(strings.ToLower(bfclStrip.ReplaceAllString(s, "")), "'", `"`)
}

// bfclEqual compares a passed value with an allowed one as BFCL's checker does: strings after
// standardizing, an integer where a float is allowed, lists element by element, dicts key by key.
func bfclEqual(v, a any) bool {
	switch x := v.(type) {
	case string:
		y, ok := a.(string)
		return ok && bfclString(x) == bfclString(y)
	case bool:
		y, ok := a.(bool)
		return ok && x == y
	case int64, float64:
		fx, _ := pyNumber(x)
		if _, isBool := a.(bool); isBool {
			return false
		}
		fy, ok := pyNumber(a)
		if _, isFloat := x.(float64); isFloat {
			if _, wantInt := a.(int64); wantInt {
				return false // BFCL: a float where an integer is wanted is a type error
			}
		}
		return ok && math.Abs(fx-fy) == 0
	case []any:
		y, ok := a.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !bfclEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case *Object:
		y, ok := a.(*Object)
		if !ok || len(x.Keys) != len(y.Keys) {
			return false
		}
		for _, k := range x.Keys {
			w, ok := y.Get(k)
			if !ok {
				return false
			}
			if list, isList := w.([]any); isList && !isListValue(x.Values[k]) {
				if !anyAllowed(x.Values[k], list) {
					return false
				}
				continue
			}
			if !bfclEqual(x.Values[k], w) {
				return false
			}
		}
		return true
	case nil:
		return a == nil
	}
	return false
}

func isListValue(v any) bool {
	_, ok := v.([]any)
	return ok
}
