package tokenizer

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

const fixtureDir = "../../testdata/qwen3-tokenizer"

var (
	qwenOnce sync.Once
	qwenTok  *Tokenizer
	qwenErr  error
)

// qwen loads the Qwen3 tokenizer fixture once for all tests.
func qwen(tb testing.TB) *Tokenizer {
	tb.Helper()
	qwenOnce.Do(func() { qwenTok, qwenErr = LoadDir(fixtureDir) })
	if qwenErr != nil {
		tb.Fatal(qwenErr)
	}
	return qwenTok
}

// corpus returns the fixture's strings and reference IDs. The files are split on '\n' only:
// lines may hold raw U+2028 and U+0085.
func corpus(tb testing.TB) (texts []string, want [][]int) {
	tb.Helper()
	read := func(name string) [][]byte {
		data, err := os.ReadFile(filepath.Join(fixtureDir, name))
		if err != nil {
			tb.Fatal(err)
		}
		return bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	}
	in, exp := read("corpus.jsonl"), read("corpus.expected.jsonl")
	if len(in) != len(exp) {
		tb.Fatalf("corpus.jsonl has %d lines, corpus.expected.jsonl %d", len(in), len(exp))
	}
	texts = make([]string, len(in))
	want = make([][]int, len(in))
	for i := range in {
		if err := json.Unmarshal(in[i], &texts[i]); err != nil {
			tb.Fatalf("corpus.jsonl line %d: %v", i+1, err)
		}
		if err := json.Unmarshal(exp[i], &want[i]); err != nil {
			tb.Fatalf("corpus.expected.jsonl line %d: %v", i+1, err)
		}
	}
	return texts, want
}
