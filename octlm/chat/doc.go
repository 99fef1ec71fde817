// Package chat owns Qwen3's conversation format: rendering a conversation into the prompt text that
// Qwen3's official chat template produces, and parsing a generated reply back into its thinking,
// its answer and its tool calls.
//
// # Rendering
//
// Render implements the template's logic in Go, branch by branch, rather than executing the Jinja
// source with a Go Jinja engine. The reasons:
//
//   - Exactness is cheaper to own than to borrow. The one pure-Go engine usable here
//     (github.com/ardanlabs/jinja v1.8.0) sorts the keys of Go maps, so decoding the tools from
//     JSON into maps re-orders them and golden cases 4 and 5 fail; it formats floats with Go's %g
//     rather than Python's repr, and its tojson filter turns encoding errors into an empty string.
//     Working around each would mean building the engine's value tree by hand and still trusting
//     the rest of its semantics (strip with arguments, truthiness, Undefined) case by case.
//   - Even the reference engines disagree. transformers.js 4.3.1's Jinja engine (which rendered
//     testdata/qwen3-tokenizer/chat.expected.jsonl) ignores the argument of strip('\n'),
//     lstrip('\n') and rstrip('\n') and trims all whitespace; it also prints 1.0 as 1, loses
//     integers beyond 2^53 and hoists integer-like object keys to the front. Python's Jinja2 with
//     Hugging Face transformers' tojson (json.dumps with ensure_ascii=False, default ", " and ": "
//     separators, keys in input order) does what the template's text says, and is what Qwen3 was
//     trained and is served with. Render follows the template as Python executes it. It matches
//     both engines on every golden case, and Python's Jinja2 on 400 random conversations
//     (testdata/random.jsonl, made and rendered by the scripts beside it; transformers.js renders
//     90 of those differently).
//   - A typed API: Message, ToolCall and Conversation decode from the JSON that chat.jsonl and
//     OpenAI-style clients use, and bad input gets an error naming the message, not a different
//     prompt.
//
// The template is pinned: QwenTemplateSHA256 is the SHA-256 of Qwen3-0.6B's chat_template, and
// CheckTemplate and CheckModelDir refuse a template or a model folder that differs, instead of
// silently rendering Qwen3's.
//
// Where the template itself raises (no messages, a null first system content, a tool call without
// arguments), Render returns an error. Render also refuses input that the template would silently
// drop or mangle: an unknown role (the template emits nothing for it), a tool call without a name,
// and content or reasoning_content that is neither a string nor null (multimodal parts).
//
// # Parsing replies
//
// ParseReply splits generated text into Thinking (the <think> block, separated exactly as the
// template separates it when the reply comes back as history), Content, and ToolCalls parsed from
// <tool_call>{"name": ..., "arguments": ...}</tool_call> blocks. A malformed block is reported in
// Reply.Errors as a *ToolCallError naming the block; ParseReply never panics.
//
// The package knows nothing of tokens, token IDs or models: stop tokens and generation live in
// package octlm, the text-to-ID mapping in package tokenizer.
package chat
