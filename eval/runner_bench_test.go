package eval

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkQuizContexts measures the fixture's multiple-choice task (6 documents, 3 choices
// each) with every request run whole, as HFLM runs it, and with each document's context run
// once and its choices scored from the cached prefix (Runner.ShareContexts).
func BenchmarkQuizContexts(b *testing.B) {
	m, tok := fixtureModel(b)
	task, err := LoadTask(filepath.Join(fixtureDir, "tasks", "quiz.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		share bool
	}{{"whole", false}, {"shared", true}} {
		b.Run(bc.name, func(b *testing.B) {
			r, err := NewRunner(m, tok, fixtureMaxLength, nil)
			if err != nil {
				b.Fatal(err)
			}
			r.ShareContexts = bc.share
			for b.Loop() {
				in, err := task.Build(BuildOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if err := r.Run(context.Background(), in, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
