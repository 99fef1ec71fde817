package eval

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTask writes a task YAML and data files into a new folder and returns the YAML's path.
func writeTask(t *testing.T, yaml string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, "task.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const mcHeader = "task: t\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: d.jsonl\ntest_split: test\noutput_type: multiple_choice\n"

const mcData = `{"q": "one", "options": ["a", "b"], "gold": 1}
{"q": "two", "options": ["c", "d"], "gold": 0}
`

// TestBadTasks checks that each bad task or data file is refused with an error naming the
// file, the line or document, and the field.
func TestBadTasks(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret.jsonl"), []byte(mcData), 0o644)
	for _, c := range []struct {
		name  string
		yaml  string
		files map[string]string
		want  []string // substrings of the error
	}{
		{"malformed YAML", mcHeader + "doc_to_text: [unclosed\n", nil, []string{"task.yaml", "malformed YAML", "yaml: line"}},
		{"unknown field", mcHeader + "doc_to_txt: q\n", nil, []string{"task.yaml:8", "doc_to_txt", "unknown task field"}},
		{"function tag", mcHeader + "doc_to_text: !function utils.doc_to_text\n", nil, []string{"task.yaml:8", "doc_to_text", "!function"}},
		{"process_docs", mcHeader + "process_docs: x\n", nil, []string{"task.yaml:8", "process_docs", "Python hooks"}},
		{"absolute data file", strings.Replace(mcHeader, "d.jsonl", "/etc/passwd", 1) + "doc_to_text: q\ndoc_to_target: gold\ndoc_to_choice: options\n", nil, []string{"task.yaml:5", "data_files", "relative paths inside"}},
		{"data file escaping", strings.Replace(mcHeader, "d.jsonl", "../x/d.jsonl", 1) + "doc_to_text: q\ndoc_to_target: gold\ndoc_to_choice: options\n", nil, []string{"task.yaml:5", "leaves the task's folder"}},
		{"no output type", "task: t\ndataset_path: hf/x\n", nil, []string{"dataset_path", "only local data"}},
		{"bad output type", mcHeader + "output_type: ranking\n", nil, []string{"given twice"}},
		{"missing choices", mcHeader + "doc_to_text: q\ndoc_to_target: gold\n", map[string]string{"d.jsonl": mcData}, []string{"doc_to_choice", "missing"}},
		{"bad metric", mcHeader + "doc_to_text: q\ndoc_to_target: gold\ndoc_to_choice: options\nmetric_list:\n  - metric: bleu\n", map[string]string{"d.jsonl": mcData}, []string{"task.yaml:12", "metric_list[0].metric", "bleu"}},
		{"sampling", strings.Replace(mcHeader, "multiple_choice", "generate_until", 1) + "doc_to_text: q\ndoc_to_target: q\ngeneration_kwargs:\n  do_sample: true\n  temperature: 0.7\n", map[string]string{"d.jsonl": mcData}, []string{"do_sample", "greedy"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeTask(t, c.yaml, c.files)
			_, err := LoadTask(p)
			if err == nil {
				t.Fatalf("accepted")
			}
			if !errors.Is(err, ErrBadTask) {
				t.Errorf("error %v does not match ErrBadTask", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	// A symbolic link out of the task's folder.
	p := writeTask(t, strings.Replace(mcHeader, "d.jsonl", "link.jsonl", 1)+"doc_to_text: q\ndoc_to_target: gold\ndoc_to_choice: options\n", nil)
	if err := os.Symlink(filepath.Join(outside, "secret.jsonl"), filepath.Join(filepath.Dir(p), "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTask(p); err == nil || !strings.Contains(err.Error(), "outside the task's folder") {
		t.Errorf("a link out of the folder: %v", err)
	}
}

// TestBadDocuments checks the errors found when the documents are read and rendered.
func TestBadDocuments(t *testing.T) {
	fields := "doc_to_text: \"{{q}}\"\ndoc_to_target: gold\ndoc_to_choice: options\n"
	for _, c := range []struct {
		name string
		yaml string
		data string
		want []string
	}{
		{"malformed JSON line", mcHeader + fields, mcData + "{\"q\": \n", []string{"d.jsonl:3", "malformed JSON"}},
		{"not an object", mcHeader + fields, "[1, 2]\n", []string{"item 0", "not an object"}},
		{"missing feature", mcHeader + strings.Replace(fields, "{{q}}", "{{question}}", 1), mcData, []string{"document 0", "doc_to_text (line 8)", "'question' is undefined"}},
		{"index out of range", mcHeader + fields, `{"q": "x", "options": ["a"], "gold": 1}`, []string{"document 0", "out of range"}},
		{"no documents", mcHeader + fields, "\n\n", []string{"no documents"}},
		{"missing split", strings.Replace(mcHeader, "test_split: test", "test_split: validation", 1) + fields, mcData, []string{"split \"validation\"", "[test]"}},
		{"choices not a list", mcHeader + strings.Replace(fields, "doc_to_choice: options", "doc_to_choice: \"{{q}}\"", 1), mcData, []string{"doc_to_choice", "ast.literal_eval"}},
		{"random sampler", mcHeader + fields + "num_fewshot: 1\n", mcData, []string{"random.Random(1234)", "first_n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeTask(t, c.yaml, map[string]string{"d.jsonl": c.data})
			task, err := LoadTask(p)
			if err == nil {
				_, err = task.Build(BuildOptions{})
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestFewshotContext builds first_n few-shot contexts by lm-eval's rules: description, then
// each shot as question + target delimiter + answer + few-shot delimiter, the evaluated
// document left out of its own shots when the few-shot split is the test split.
func TestFewshotContext(t *testing.T) {
	yaml := mcHeader + "fewshot_split: test\nnum_fewshot: 1\nfewshot_config:\n  sampler: first_n\n" +
		"description: \"Answer.\\n\\n\"\ndoc_to_text: \"Q: {{q}}\\nA:\"\ndoc_to_target: gold\ndoc_to_choice: options\n"
	p := writeTask(t, yaml, map[string]string{"d.jsonl": mcData})
	task, err := LoadTask(p)
	if err != nil {
		t.Fatal(err)
	}
	in, err := task.Build(BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Answer.\n\nQ: two\nA: c\n\nQ: one\nA:", // document 0: its own shot is skipped
		"Answer.\n\nQ: one\nA: b\n\nQ: two\nA:",
	}
	for i, d := range in.Docs {
		if got := d.Requests[0].Context; got != want[i] {
			t.Errorf("document %d context %q, want %q", i, got, want[i])
		}
		if got := d.Requests[1].Continuation; got != " "+d.Choices[1] {
			t.Errorf("document %d continuation %q", i, got)
		}
	}
	shots := 0
	in, err = task.Build(BuildOptions{NumFewshot: &shots, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Docs) != 1 || in.Docs[0].Requests[0].Context != "Answer.\n\nQ: one\nA:" {
		t.Errorf("0 shots, limit 1: %d documents, context %q", len(in.Docs), in.Docs[0].Requests[0].Context)
	}
}

// TestTargetForms reads doc_to_target as lm-eval does: a template rendering digits is an
// index, one rendering a list is read as a list, a choice's text is found among the choices.
func TestTargetForms(t *testing.T) {
	for _, c := range []struct {
		target string
		want   []int
	}{
		{"gold", []int{1}},
		{"\"{{gold}}\"", []int{1}},
		{"\"{{options[1]}}\"", []int{1}},
		{"\"{{[0, gold]}}\"", []int{0, 1}},
		{"1", []int{1}},
	} {
		p := writeTask(t, mcHeader+"doc_to_text: q\ndoc_to_choice: options\ndoc_to_target: "+c.target+"\n", map[string]string{"d.jsonl": mcData})
		task, err := LoadTask(p)
		if err != nil {
			t.Fatal(err)
		}
		in, err := task.Build(BuildOptions{Limit: 1})
		if err != nil {
			t.Fatalf("target %s: %v", c.target, err)
		}
		if got := in.Docs[0].Gold; len(got) != len(c.want) || got[0] != c.want[0] || got[len(got)-1] != c.want[len(c.want)-1] {
			t.Errorf("target %s: gold %v, want %v", c.target, got, c.want)
		}
	}
}

// FuzzParseTask feeds arbitrary YAML to the task parser: it must return a task or an error,
// never panic or hang.
func FuzzParseTask(f *testing.F) {
	for _, name := range []string{"quiz", "prose"} {
		if b, err := os.ReadFile(filepath.Join(fixtureDir, "tasks", name+".yaml")); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(mcHeader + "doc_to_text: \"{% for x in q %}{{x}}{% endfor %}\"\ndoc_to_target: gold\ndoc_to_choice: [a, b]\nfilter_list:\n  - name: m\n    filter:\n      - function: regex\n        regex_pattern: '(\\d+)'\n      - function: take_first\n"))
	f.Add([]byte("&a [*a, *a]"))
	f.Add([]byte("a: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e]\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		ParseTask(filepath.Join(dir, "fuzz.yaml"), data)
	})
}

// FuzzDocuments feeds arbitrary JSON Lines to the document reader and builds each document's
// requests (in memory: the fuzzer's minimizer runs it many thousand times).
func FuzzDocuments(f *testing.F) {
	f.Add([]byte(mcData))
	f.Add([]byte(`[{"q": "x", "options": ["a"], "gold": 0}]`))
	f.Add([]byte("{\"q\": 1e999, \"options\": [[[]]], \"gold\": -1}\n"))
	yaml := mcHeader + "doc_to_text: \"{{q}}\"\ndoc_to_target: \"{{gold}}\"\ndoc_to_choice: \"{{options}}\"\n"
	dir := f.TempDir()
	os.WriteFile(filepath.Join(dir, "d.jsonl"), []byte(mcData), 0o644)
	task, err := ParseTask(filepath.Join(dir, "task.yaml"), []byte(yaml))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := decodeJSONDocs(bytes.NewReader(data), "fuzz.jsonl")
		if err != nil {
			return
		}
		s := newSplit("test", docs)
		for i, d := range s.Docs {
			task.buildDoc(i, d, s.featureSet(), 0, nil, false)
		}
	})
}

// FuzzLiteralEval feeds arbitrary text to the ast.literal_eval reader.
func FuzzLiteralEval(f *testing.F) {
	for _, s := range []string{`['a', "b", 1, -2.5e3, None, (1,), {'k': [True]}]`, `'\x41\u00e9\101'`, `[[[[`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		literalEval(s)
	})
}
