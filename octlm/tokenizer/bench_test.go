package tokenizer

import (
	"path/filepath"
	"testing"
)

// The reference (Rust tokenizers 0.23.2 through its Node binding) encodes this corpus at about
// 1 MB/s on the development machine.

func BenchmarkLoad(b *testing.B) {
	path := filepath.Join(fixtureDir, "tokenizer.json")
	for b.Loop() {
		if _, err := Load(path); err != nil {
			b.Fatal(err)
		}
	}
}

func corpusBytes(texts []string) int64 {
	n := 0
	for _, s := range texts {
		n += len(s)
	}
	return int64(n)
}

// BenchmarkEncode encodes the whole corpus with the word cache warm, as in steady use.
func BenchmarkEncode(b *testing.B) { benchmarkEncode(b, qwen(b)) }

// BenchmarkEncodeNoCache encodes the whole corpus running BPE on every word.
func BenchmarkEncodeNoCache(b *testing.B) {
	tok, err := LoadDir(fixtureDir)
	if err != nil {
		b.Fatal(err)
	}
	tok.noCache = true
	benchmarkEncode(b, tok)
}

func benchmarkEncode(b *testing.B, tok *Tokenizer) {
	texts, _ := corpus(b)
	b.SetBytes(corpusBytes(texts))
	for b.Loop() {
		for _, s := range texts {
			tok.Encode(s)
		}
	}
}

// decodedBytes sets the benchmark's bytes to the length of the text of ids.
func decodedBytes(b *testing.B, tok *Tokenizer, ids [][]int) {
	var n int64
	for _, x := range ids {
		s, err := tok.Decode(x)
		if err != nil {
			b.Fatal(err)
		}
		n += int64(len(s))
	}
	b.SetBytes(n)
}

// BenchmarkDecode decodes the reference IDs of the whole corpus; bytes are those of the text.
func BenchmarkDecode(b *testing.B) {
	tok := qwen(b)
	_, ids := corpus(b)
	decodedBytes(b, tok, ids)
	for b.Loop() {
		for _, x := range ids {
			tok.Decode(x)
		}
	}
}

// BenchmarkStreamDecode decodes the corpus one token at a time, as generation does.
func BenchmarkStreamDecode(b *testing.B) {
	tok := qwen(b)
	_, ids := corpus(b)
	decodedBytes(b, tok, ids)
	for b.Loop() {
		for _, x := range ids {
			sd := NewStreamDecoder(tok)
			for _, id := range x {
				sd.Add(id)
			}
			sd.Flush()
		}
	}
}

// BenchmarkSplitWords pre-tokenizes the whole corpus (NFC already applied), the regex step alone.
func BenchmarkSplitWords(b *testing.B) {
	texts, _ := corpus(b)
	for i, s := range texts {
		texts[i] = nfc(lossy(s))
	}
	b.SetBytes(corpusBytes(texts))
	pieces := 0
	for b.Loop() {
		for _, s := range texts {
			splitWords(s, 1, func(start, end int) { pieces++ })
		}
	}
}
