package eval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

type parquetRow struct {
	Question string   `parquet:"question"`
	Options  []string `parquet:"options,list"`
	Gold     int64    `parquet:"gold"`
	Score    float32  `parquet:"score"`
}

// TestParquetTask reads a multiple-choice task whose data is a Parquet file: columns in the
// schema's order, lists, integers and floats as Python's datasets gives them.
func TestParquetTask(t *testing.T) {
	dir := t.TempDir()
	rows := []parquetRow{
		{"Which one can fly?", []string{"a stone", "a sparrow"}, 1, 0.5},
		{"Which is wet?", []string{"water", "sand"}, 0, 2},
	}
	f, err := os.Create(filepath.Join(dir, "d.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[parquetRow](f)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	yaml := strings.Replace(strings.Replace(mcHeader, "d.jsonl", "d.parquet", 1), "dataset_path: json", "dataset_path: parquet", 1) +
		"doc_to_text: \"{{question}} ({{score}})\"\ndoc_to_target: gold\ndoc_to_choice: \"{{options}}\"\n"
	os.WriteFile(filepath.Join(dir, "task.yaml"), []byte(yaml), 0o644)
	task, err := LoadTask(filepath.Join(dir, "task.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := task.Build(BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Docs) != 2 {
		t.Fatalf("%d documents, want 2", len(in.Docs))
	}
	d := in.Docs[0]
	if got := strings.Join(d.Doc.Keys, ","); got != "question,options,gold,score" {
		t.Errorf("columns %s", got)
	}
	if got := d.Requests[0].Context; got != "Which one can fly? (0.5)" {
		t.Errorf("context %q", got)
	}
	if got := d.Requests[1].Continuation; got != " a sparrow" || d.Gold[0] != 1 {
		t.Errorf("choice %q, gold %v", got, d.Gold)
	}
	if got := in.Docs[1].Requests[0].Context; got != "Which is wet? (2.0)" {
		t.Errorf("context %q (a float stays a float)", got)
	}
	// A file that is not Parquet.
	os.WriteFile(filepath.Join(dir, "d.parquet"), []byte("not parquet"), 0o644)
	if _, err := task.Build(BuildOptions{}); err == nil || !strings.Contains(err.Error(), "d.parquet") {
		t.Errorf("a broken Parquet file: %v", err)
	}
}
