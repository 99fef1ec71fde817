package tokenizer

import (
	"path/filepath"
	"testing"
)

func BenchmarkLoad(b *testing.B) {
	path := filepath.Join(fixtureDir, "tokenizer.json")
	for b.Loop() {
		if _, err := Load(path); err != nil {
			b.Fatal(err)
		}
	}
}
