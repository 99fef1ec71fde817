package train

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/octlm/octlm/octlm/tokenizer"
)

// byteTokenizer is a tokenizer for tests: one ID per byte, and IDs 256 and 257 for the chat
// template's <|im_start|> and <|im_end|>.
type byteTokenizer struct{}

var byteSpecials = []string{"<|im_start|>", "<|im_end|>"}

func (byteTokenizer) Encode(text string) []int {
	var ids []int
	for len(text) > 0 {
		matched := false
		for k, s := range byteSpecials {
			if strings.HasPrefix(text, s) {
				ids = append(ids, 256+k)
				text = text[len(s):]
				matched = true
				break
			}
		}
		if !matched {
			ids = append(ids, int(text[0]))
			text = text[1:]
		}
	}
	return ids
}

func (byteTokenizer) DecodeToken(id int) ([]byte, error) {
	if id >= 256 {
		return []byte(byteSpecials[id-256]), nil
	}
	return []byte{byte(id)}, nil
}

func ids32(s string) []int32 {
	var out []int32
	for _, id := range (byteTokenizer{}).Encode(s) {
		out = append(out, int32(id))
	}
	return out
}

func masked(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = IgnoreIndex
	}
	return out
}

func TestParseJSONLRows(t *testing.T) {
	opts := DataOptions{Vocab: 300, Tokenizer: byteTokenizer{}, EOS: 299}
	conv := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
	convIDs := ids32(conv)
	replyIDs := ids32("yo<|im_end|>")
	tests := []struct {
		name string
		row  string
		want Example
	}{
		{"ids and labels", `{"input_ids": [1, 2, 3], "labels": [-100, 2, 3]}`, Example{IDs: []int32{1, 2, 3}, Labels: []int32{-100, 2, 3}}},
		{"ids only", `{"input_ids": [4, 5]}`, Example{IDs: []int32{4, 5}, Labels: []int32{4, 5}}},
		{"attention mask of ones", `{"input_ids": [4, 5], "attention_mask": [1, 1]}`, Example{IDs: []int32{4, 5}, Labels: []int32{4, 5}}},
		{"text", `{"text": "ab"}`, Example{IDs: []int32{'a', 'b', 299}, Labels: []int32{'a', 'b', 299}}},
		{"prompt and completion", `{"prompt": "Q:", "completion": " A"}`, Example{IDs: []int32{'Q', ':', ' ', 'A', 299}, Labels: []int32{-100, -100, ' ', 'A', 299}}},
		{"messages", `{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}`,
			Example{IDs: slices.Concat(convIDs, ids32("<think>\n\n</think>\n\nyo<|im_end|>\n")),
				Labels: slices.Concat(masked(len(convIDs)), ids32("<think>\n\n</think>\n\n"), replyIDs, masked(1))}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := ParseJSONL(strings.NewReader(tc.row+"\n\n"), "d.jsonl", opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 {
				t.Fatalf("%d rows, want 1", len(rows))
			}
			if !slices.Equal(rows[0].IDs, tc.want.IDs) || !slices.Equal(rows[0].Labels, tc.want.Labels) {
				t.Errorf("got\n ids %v\n labels %v\nwant\n ids %v\n labels %v", rows[0].IDs, rows[0].Labels, tc.want.IDs, tc.want.Labels)
			}
		})
	}
}

func TestParseJSONLErrors(t *testing.T) {
	opts := DataOptions{Vocab: 300, MaxLength: 4, Tokenizer: byteTokenizer{}, EOS: -1}
	tests := []struct {
		name, rows, want string
	}{
		{"id outside the vocabulary", `{"input_ids": [1, 300]}`, "d.jsonl:1: input_ids[1]: token ID 300 outside"},
		{"negative id", `{"input_ids": [1, -1]}`, "d.jsonl:1: input_ids[1]"},
		{"labels of another length", `{"input_ids": [1, 2], "labels": [1]}`, "d.jsonl:1: labels: 1 labels for 2 input_ids"},
		{"bad label", `{"input_ids": [1, 2], "labels": [1, -5]}`, "d.jsonl:1: labels[1]"},
		{"empty row", `{"input_ids": []}`, "d.jsonl:1: input_ids: empty row"},
		{"over-long", `{"input_ids": [1, 2, 3, 4, 5]}`, "d.jsonl:1: input_ids: 5 tokens, more than --max-length 4"},
		{"nothing to learn", `{"input_ids": [1, 2], "labels": [1, -100]}`, "d.jsonl:1: labels: no token to learn"},
		{"second line", "{\"input_ids\": [1, 2]}\n{\"input_ids\": [1, 2.5]}", "d.jsonl:2: input_ids"},
		{"invalid JSON", `{"input_ids": [1, 2}`, "d.jsonl:1: invalid row"},
		{"invalid UTF-8", "{\"text\": \"a\xffb\"}", "d.jsonl:1: not valid UTF-8"},
		{"unknown field", `{"input_ids": [1, 2], "label": [1, 2]}`, `unknown field "label"`},
		{"no known field", `{}`, "d.jsonl:1: no input_ids"},
		{"prompt without completion", `{"prompt": "a"}`, "d.jsonl:1: prompt: prompt and completion go together"},
		{"two values", `{"input_ids": [1, 2]} {"input_ids": [1, 2]}`, "more than one JSON value"},
		{"template rejects", `{"messages": [{"role": "robot", "content": "x"}, {"role": "assistant", "content": "y"}]}`, "d.jsonl:1: messages:"},
		{"no assistant", `{"messages": [{"role": "user", "content": "x"}]}`, "d.jsonl:1: messages: no assistant message"},
		{"turn markers in content", `{"messages": [{"role": "user", "content": "<|im_end|>"}, {"role": "assistant", "content": "y"}]}`, "message 0: holds the template's turn markers"},
		{"no rows", "\n\n", "no rows"},
	}
	other := opts
	other.Template = errors.New("tokenizer_config.json: another template")
	if _, err := ParseJSONL(strings.NewReader(`{"messages": [{"role": "assistant", "content": "y"}]}`), "d.jsonl", other); err == nil || !strings.Contains(err.Error(), "d.jsonl:1: messages: messages rows are rendered with Qwen3's chat template") {
		t.Errorf("messages for a model of another template: %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseJSONL(strings.NewReader(tc.rows), "d.jsonl", opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	_, err := ParseJSONL(strings.NewReader(`{"text": "abc"}`), "d.jsonl", DataOptions{Vocab: 300, EOS: -1})
	var re *RowError
	if !errors.As(err, &re) || re.Line != 1 || re.Field != "text" {
		t.Errorf("text without a tokenizer: %v, want a RowError for line 1, field text", err)
	}
}

func TestMakeBatch(t *testing.T) {
	rows := []Example{
		{IDs: []int32{1, 2, 3}, Labels: []int32{-100, 2, 3}},
		{IDs: []int32{4, 5}, Labels: []int32{4, 5}},
	}
	b := MakeBatch(rows, 4, 0)
	if b.B != 2 || b.S != 4 || b.Tokens != 3 {
		t.Fatalf("B %d S %d tokens %d, want 2, 4, 3", b.B, b.S, b.Tokens)
	}
	if want := []int32{1, 2, 3, 0, 4, 5, 0, 0}; !slices.Equal(b.IDs, want) {
		t.Errorf("ids %v, want %v", b.IDs, want)
	}
	if want := []int32{2, 3, -100, -100, 5, -100, -100, -100}; !slices.Equal(b.Targets, want) {
		t.Errorf("targets %v, want %v", b.Targets, want)
	}
	if want := []int32{3, 2}; !slices.Equal(b.Lengths, want) {
		t.Errorf("lengths %v, want %v", b.Lengths, want)
	}
	if b := MakeBatch(rows, 4, 3); b.S != 3 {
		t.Errorf("S %d with max length 3, want 3", b.S)
	}
}

func TestPadLength(t *testing.T) {
	var got []int
	for _, n := range []int{1, 8, 9, 17, 25, 33, 49, 65, 100, 1000} {
		got = append(got, PadLength(n, 8))
	}
	if want := []int{8, 8, 16, 24, 32, 48, 64, 96, 128, 1024}; !slices.Equal(got, want) {
		t.Errorf("buckets %v, want %v", got, want)
	}
	if PadLength(13, 1) != 13 {
		t.Error("unit 1 rounded")
	}
}

func TestOrder(t *testing.T) {
	o := NewOrder(3, false, 0)
	var got []int
	for p := range int64(7) {
		got = append(got, o.Row(p))
	}
	if want := []int{0, 1, 2, 0, 1, 2, 0}; !slices.Equal(got, want) {
		t.Errorf("file order %v, want %v", got, want)
	}
	a, b := NewOrder(10, true, 7), NewOrder(10, true, 7)
	seen := map[int]bool{}
	for p := range int64(10) {
		seen[a.Row(p)] = true
	}
	if len(seen) != 10 {
		t.Errorf("a shuffled epoch visits %d of 10 rows", len(seen))
	}
	for p := int64(25); p >= 0; p-- { // any visiting order gives the same rows
		if x, y := a.Row(p), b.Row(25-p); p == 25-p && x != y {
			t.Errorf("position %d: %d and %d", p, x, y)
		}
	}
	if a.Row(12) != NewOrder(10, true, 7).Row(12) {
		t.Error("a resumed order reads another row")
	}
}

// FuzzParseJSONL checks that any input gives rows or a RowError-style error, never a panic, and
// that every row it accepts is within the vocabulary and has something to learn.
func FuzzParseJSONL(f *testing.F) {
	for _, s := range []string{
		`{"input_ids": [1, 2, 3], "labels": [-100, 2, 3]}`,
		`{"text": "hello"}`,
		`{"prompt": "a", "completion": "b"}`,
		`{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "<think>x</think>yo"}]}`,
		"{\"input_ids\": [1]}\n{\"text\": \"\xff\"}",
		`{"messages": [{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}], "tools": [{}]}`,
	} {
		f.Add(s)
	}
	opts := DataOptions{Vocab: 260, MaxLength: 64, Tokenizer: byteTokenizer{}, EOS: 259}
	f.Fuzz(func(t *testing.T, s string) {
		rows, err := ParseJSONL(strings.NewReader(s), "f.jsonl", opts)
		if err != nil {
			return
		}
		for _, r := range rows {
			if len(r.IDs) == 0 || len(r.IDs) > 64 || len(r.Labels) != len(r.IDs) || r.Counted() == 0 {
				t.Fatalf("accepted a bad row %+v", r)
			}
			for _, id := range r.IDs {
				if id < 0 || id >= 260 {
					t.Fatalf("accepted ID %d", id)
				}
			}
		}
	})
}

// TestMessagesWithQwen3Tokenizer renders a conversation with Qwen3's template and tokenizer and
// checks that exactly the assistant turns (through <|im_end|>) are learned.
func TestMessagesWithQwen3Tokenizer(t *testing.T) {
	tok, err := tokenizer.LoadDir("../testdata/qwen3-tokenizer")
	if err != nil {
		t.Fatal(err)
	}
	row := `{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}`
	rows, err := ParseJSONL(strings.NewReader(row), "chat.jsonl", DataOptions{Vocab: 151936, Tokenizer: tok, EOS: -1})
	if err != nil {
		t.Fatal(err)
	}
	var learned []int
	for i, l := range rows[0].Labels {
		if l != IgnoreIndex {
			if l != rows[0].IDs[i] {
				t.Fatalf("label %d is %d, the token %d", i, l, rows[0].IDs[i])
			}
			learned = append(learned, int(l))
		}
	}
	got, err := tok.Decode(learned)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Hello!<|im_end|><think>\n\n</think>\n\n4<|im_end|>"; got != want {
		t.Errorf("learned text %q, want %q", got, want)
	}
}
