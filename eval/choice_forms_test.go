package eval

import (
	"reflect"
	"strings"
	"testing"
)

// answered builds the task's one document and gives its requests the log-likelihoods lls (in
// request order), then scores it.
func answered(t *testing.T, path string, lls []float64) (*Instances, *Document) {
	t.Helper()
	in := buildTask(t, path)
	d := in.Docs[0]
	if len(d.Requests) != len(lls) {
		t.Fatalf("%d requests, want %d", len(d.Requests), len(lls))
	}
	for i, q := range d.Requests {
		q.LogLikelihood = lls[i]
	}
	if err := in.ScoreDoc(d); err != nil {
		t.Fatal(err)
	}
	return in, d
}

type pair struct{ ctx, cont string }

func pairs(d *Document) []pair {
	var out []pair
	for _, q := range d.Requests {
		out = append(out, pair{q.Context, q.Continuation})
	}
	return out
}

// TestMutualInfo: acc_mutual_info as lm-eval's ConfigurableTask computes it (api/task.py:
// construct_requests appends ("", target_delimiter + choice) per choice; process_results splits
// the log-likelihoods in two and takes argmax(ll_c - ll_u) == gold). Conditional
// [-1, -1.5, -4] and unconditional [-0.5, -3, -4.2] give mutual information [-0.5, 1.5, 0.2]:
// choice 1 (gold), where acc picks choice 0 and acc_norm (by characters: -1/1, -1.5/2, -4/3)
// choice 1.
func TestMutualInfo(t *testing.T) {
	path := writeTask(t, mcHeader+"doc_to_text: \"Q: {{q}}\"\ndoc_to_choice: options\ndoc_to_target: gold\n"+
		"metric_list:\n  - metric: acc\n  - metric: acc_norm\n  - metric: acc_mutual_info\n",
		map[string]string{"d.jsonl": `{"q": "one", "options": ["a", "bb", "ccc"], "gold": 1}` + "\n"})
	in, d := answered(t, path, []float64{-1, -1.5, -4, -0.5, -3, -4.2})
	want := []pair{{"Q: one", " a"}, {"Q: one", " bb"}, {"Q: one", " ccc"}, {"", " a"}, {"", " bb"}, {"", " ccc"}}
	if got := pairs(d); !reflect.DeepEqual(got, want) {
		t.Errorf("requests %q, want %q", got, want)
	}
	if got, want := d.Metrics[noFilter], map[string]any{"acc": 0.0, "acc_norm": 1.0, "acc_mutual_info": 1.0}; !reflect.DeepEqual(got, want) {
		t.Errorf("metrics %v, want %v", got, want)
	}
	if res := in.Aggregate(); res.Values["acc_mutual_info,none"] != 1.0 || res.Values["acc_mutual_info_stderr,none"] != "N/A" {
		t.Errorf("aggregated acc_mutual_info %v ± %v, want 1 ± N/A (one document)", res.Values["acc_mutual_info,none"], res.Values["acc_mutual_info_stderr,none"])
	}
	if f := d.Filtered[noFilter].([]any); len(f) != 6 {
		t.Errorf("%d filtered responses, want all 6 (lm-eval keeps the unconditional ones)", len(f))
	}
}

// TestMultipleInput: a Winogrande-form task (lm-eval's multiple_input): doc_to_text's integer on
// the first document makes doc_to_choice the contexts, each followed by target_delimiter and
// the one doc_to_target; the shot is its gold choice, the delimiter and its target; gold is
// doc_to_text. process_results divides by the lengths of the choices, here the contexts
// (completion_len from doc_to_choice): log-likelihoods [-5, -12] pick choice 0 for acc and, by
// -5/10 against -12/40, choice 1 (gold) for acc_norm.
func TestMultipleInput(t *testing.T) {
	yaml := "task: t\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: d.jsonl\n    train: s.jsonl\n" +
		"test_split: test\nfewshot_split: train\nnum_fewshot: 1\nfewshot_config:\n  sampler: first_n\n" +
		"output_type: multiple_choice\ndoc_to_text: label\ndoc_to_choice: opts\ndoc_to_target: rest\n"
	path := writeTask(t, yaml, map[string]string{
		"d.jsonl": `{"opts": ["0123456789", "0123456789012345678901234567890123456789"], "rest": "end", "label": 1}` + "\n",
		"s.jsonl": `{"opts": ["x", "shot"], "rest": "tail", "label": 1}` + "\n",
	})
	in, d := answered(t, path, []float64{-5, -12})
	if !in.MultipleInput {
		t.Error("MultipleInput false")
	}
	shot := "shot tail\n\n"
	want := []pair{{shot + "0123456789", " end"}, {shot + "0123456789012345678901234567890123456789", " end"}}
	if got := pairs(d); !reflect.DeepEqual(got, want) {
		t.Errorf("requests %q, want %q", got, want)
	}
	if !reflect.DeepEqual(d.Gold, []int{1}) {
		t.Errorf("gold %v, want [1] (doc_to_text)", d.Gold)
	}
	if got, want := d.Metrics[noFilter], map[string]any{"acc": 0.0, "acc_norm": 1.0}; !reflect.DeepEqual(got, want) {
		t.Errorf("metrics %v, want %v", got, want)
	}
	if s := in.Sample(d, noFilter); s.Values["target"] != "end" {
		t.Errorf("sample target %v, want doc_to_target's \"end\"", s.Values["target"])
	}

	// Refused: multiple inputs outside multiple_choice, a gold index out of range.
	for _, c := range []struct{ yaml, data, want string }{
		{strings.Replace(yaml, "multiple_choice", "generate_until", 1), `{"opts": ["a", "b"], "rest": "r", "label": 0}`, "multiple_input"},
		{yaml, `{"opts": ["a", "b"], "rest": "r", "label": 2}`, "out of range"},
	} {
		task, err := LoadTask(writeTask(t, c.yaml, map[string]string{"d.jsonl": c.data + "\n", "s.jsonl": `{"opts": ["x"], "rest": "t", "label": 0}` + "\n"}))
		if err == nil {
			_, err = task.Build(BuildOptions{})
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.data, err, c.want)
		}
	}
}
