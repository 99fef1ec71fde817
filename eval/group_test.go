package eval

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// groupTaskFiles writes two task files (ga: acc; gb: acc and acc_norm) and their data into dir.
func groupTaskFiles(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{
		"data.jsonl": `{"q": "x", "a": "y"}` + "\n",
		"ga.yaml":    "task: ga\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: data.jsonl\ntest_split: test\noutput_type: multiple_choice\ndoc_to_text: q\ndoc_to_choice: [y, n]\ndoc_to_target: 0\nmetric_list:\n  - metric: acc\n",
		"gb.yaml":    "task: gb\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: data.jsonl\ntest_split: test\noutput_type: multiple_choice\nnum_fewshot: 0\ndoc_to_text: q\ndoc_to_choice: [y, n]\ndoc_to_target: 0\nmetric_list:\n  - metric: acc\n  - metric: acc_norm\n    higher_is_better: false\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// groupScores are the hand-set results of ga (4 documents, acc 0.5 ± 0.5) and gb (2
// documents, acc 1 ± 0.1, acc_norm 0.25 with no standard error).
func groupScores(suite *Suite) []TaskResult {
	var out []TaskResult
	for _, task := range suite.Tasks {
		var r Result
		n := 0
		switch strings.TrimPrefix(task.Name, "outer::") {
		case "ga":
			n = 4
			r = Result{Keys: []string{"acc,none", "acc_stderr,none"}, Values: map[string]any{"acc,none": 0.5, "acc_stderr,none": 0.5}}
		case "gb":
			n = 2
			r = Result{Keys: []string{"acc,none", "acc_stderr,none", "acc_norm,none", "acc_norm_stderr,none"},
				Values: map[string]any{"acc,none": 1.0, "acc_stderr,none": 0.1, "acc_norm,none": 0.25, "acc_norm_stderr,none": "N/A"}}
		}
		out = append(out, TaskResult{Instances: &Instances{Task: task, Docs: make([]*Document, n), Original: n}, Result: r})
	}
	return out
}

// TestGroupResults loads groups over ga and gb and checks what the results file says of them
// against values worked out by hand from lm-eval's rules (Group.aggregate: the leaf tasks'
// mean, weighted by documents unless weight_by_size is false; pooled_sample_stderr; "N/A"
// where a task has no standard error).
func TestGroupResults(t *testing.T) {
	// Weighted by size: (0.5·4 + 1·2) / 6; unweighted: (0.5 + 1) / 2.
	// Pooled: √((3·4·0.5² + 1·2·0.1²) / (6 − 2) / 6) = √(3.02 / 24).
	weighted, unweighted, pooled := 4.0/6, 0.75, math.Sqrt(3.02/24)
	tests := []struct {
		name     string
		group    string
		results  map[string]map[string]any // group → expected fields (numbers as float64)
		groups   []string                  // the "groups" entries
		subtasks map[string][]any
		versions map[string]any
		nshot    map[string]any
		table    [][]string // the groups table's rows, cells trimmed
	}{
		{
			name:  "weighted by size",
			group: "group: g\ntask:\n  - ga\n  - gb\naggregate_metric_list:\n  - metric: acc\n",
			results: map[string]map[string]any{"g": {"alias": "g", "name": "g", "sample_len": 6.0,
				"acc,none": weighted, "acc_stderr,none": pooled, "sample_count": map[string]any{"acc,none": 6.0}}},
			groups:   []string{"g"},
			subtasks: map[string][]any{"g": {"ga", "gb"}},
			versions: map[string]any{"g": "N/A", "ga": nil, "gb": nil},
			nshot:    map[string]any{"g": 0.0, "ga": 0.0, "gb": 0.0},
			table:    [][]string{{"g", "N/A", "none", "0", "acc", "↑", "0.6667", "±", "0.3547"}},
		},
		{
			name:  "unweighted, explicit filter, a metric with no standard error",
			group: "group: g\ngroup_alias: G\nmetadata:\n  version: 1.0\ntask: [ga, gb]\naggregate_metric_list:\n  - metric: acc\n    aggregation: mean\n    weight_by_size: false\n    filter_list: none\n  - metric: acc_norm\n",
			results: map[string]map[string]any{"g": {"alias": "G", "name": "g", "sample_len": 6.0,
				"acc,none": unweighted, "acc_stderr,none": pooled, "acc_norm,none": 0.25, "acc_norm_stderr,none": "N/A",
				"sample_count": map[string]any{"acc,none": 6.0, "acc_norm,none": 2.0}}},
			groups:   []string{"g"},
			subtasks: map[string][]any{"g": {"ga", "gb"}},
			versions: map[string]any{"g": "1.0", "ga": nil, "gb": nil},
			table: [][]string{{"G", "1.0", "none", "0", "acc", "↑", "0.7500", "±", "0.3547"},
				{"", "", "none", "0", "acc_norm", "↓", "0.2500", "±", "N/A"}},
		},
		{
			name:     "no aggregation: listed, not scored",
			group:    "group: g\ntask:\n  - ga\n  - gb\n",
			results:  map[string]map[string]any{"g": {"alias": "g", "name": "g"}},
			subtasks: map[string][]any{"g": {"ga", "gb"}},
			versions: map[string]any{"g": "N/A", "ga": nil, "gb": nil},
		},
		{
			// The inline subgroup is outer::inner, its inline task outer::inner::gc; the outer
			// group aggregates over every leaf (ga, and gb through the subgroup).
			name: "nested inline group",
			group: "group: outer\nmetadata:\n  version: 2\ntask:\n  - ga\n  - group: inner\n    task:\n      - gb\n" +
				"    aggregate_metric_list:\n      metric: acc\naggregate_metric_list:\n  - metric: acc\n",
			results: map[string]map[string]any{
				"outer":        {"alias": "outer", "name": "outer", "sample_len": 6.0, "acc,none": weighted, "acc_stderr,none": pooled, "sample_count": map[string]any{"acc,none": 6.0}},
				"outer::inner": {"alias": "outer::inner", "name": "outer::inner", "sample_len": 2.0, "acc,none": 1.0, "acc_stderr,none": 0.1, "sample_count": map[string]any{"acc,none": 2.0}},
			},
			groups:   []string{"outer::inner", "outer"}, // subgroups first
			subtasks: map[string][]any{"outer": {"ga", "outer::inner"}, "outer::inner": {"gb"}},
			versions: map[string]any{"outer": "2", "outer::inner": "N/A", "ga": nil, "gb": nil},
			// Parents are carried up before their subgroups, so outer sees ga's 0 and not
			// yet outer::inner's: one value.
			nshot: map[string]any{"outer": 0.0, "outer::inner": 0.0, "ga": 0.0, "gb": 0.0},
			table: [][]string{{"outer", "2", "none", "0", "acc", "↑", "0.6667", "±", "0.3547"},
				{"- outer::inner", "N/A", "none", "0", "acc", "↑", "1.0000", "±", "0.1000"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			groupTaskFiles(t, dir)
			path := filepath.Join(dir, "group.yaml")
			if err := os.WriteFile(path, []byte(tt.group), 0o644); err != nil {
				t.Fatal(err)
			}
			suite, err := LoadSuite(path) // ga and gb come from the group file's folder
			if err != nil {
				t.Fatal(err)
			}
			scores := groupScores(suite)
			b, err := ResultsJSON(scores, suite.Groups, RunConfig{})
			if err != nil {
				t.Fatal(err)
			}
			var table strings.Builder
			if err := GroupTable(&table, scores, suite.Groups); err != nil {
				t.Fatal(err)
			}
			var rows [][]string
			for i, line := range strings.Split(strings.TrimSpace(table.String()), "\n") {
				if i < 2 || line == "" { // the header and its rule
					continue
				}
				cells := strings.Split(strings.Trim(line, "|"), "|")
				for j := range cells {
					cells[j] = strings.TrimSpace(cells[j])
				}
				rows = append(rows, cells)
			}
			if !reflect.DeepEqual(rows, tt.table) {
				t.Errorf("groups table rows %q, want %q\n%s", rows, tt.table, table.String())
			}
			var got struct {
				Results       map[string]map[string]any `json:"results"`
				Groups        map[string]map[string]any `json:"groups"`
				GroupSubtasks map[string][]any          `json:"group_subtasks"`
				Versions      map[string]any            `json:"versions"`
				NShot         map[string]any            `json:"n-shot"`
				HIB           map[string]map[string]any `json:"higher_is_better"`
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			for name, want := range tt.results {
				g := got.Results[name]
				if len(g) != len(want) {
					t.Errorf("results[%s] = %v, want %v", name, g, want)
				}
				for k, w := range want {
					if wf, ok := w.(float64); ok {
						if gf, ok := g[k].(float64); !ok || math.Abs(gf-wf) > 1e-12 {
							t.Errorf("results[%s][%s] = %v, want %v", name, k, g[k], wf)
						}
					} else if !reflect.DeepEqual(g[k], w) {
						t.Errorf("results[%s][%s] = %v, want %v", name, k, g[k], w)
					}
				}
			}
			if len(got.Groups) != len(tt.groups) {
				t.Errorf("groups = %v, want %v", got.Groups, tt.groups)
			}
			for _, name := range tt.groups {
				if !reflect.DeepEqual(got.Groups[name], got.Results[name]) {
					t.Errorf("groups[%s] = %v, want the results' %v", name, got.Groups[name], got.Results[name])
				}
			}
			// The groups' entries follow the tasks', subgroups before their parents.
			order := resultsOrder(t, json.NewDecoder(strings.NewReader(string(b))))
			wantOrder := []string{"ga", "gb"}
			if tt.name == "nested inline group" {
				wantOrder = append(wantOrder, "outer::inner", "outer")
			} else {
				wantOrder = append(wantOrder, "g")
			}
			if !reflect.DeepEqual(order, wantOrder) {
				t.Errorf("results in the order %v, want %v", order, wantOrder)
			}
			if !reflect.DeepEqual(got.GroupSubtasks, tt.subtasks) {
				t.Errorf("group_subtasks = %v, want %v", got.GroupSubtasks, tt.subtasks)
			}
			if !reflect.DeepEqual(got.Versions, tt.versions) {
				t.Errorf("versions = %v, want %v", got.Versions, tt.versions)
			}
			if tt.nshot != nil && !reflect.DeepEqual(got.NShot, tt.nshot) {
				t.Errorf("n-shot = %v, want %v", got.NShot, tt.nshot)
			}
			// acc is higher-is-better in both tasks; acc_norm only in gb (false there).
			for _, name := range tt.groups {
				want := map[string]any{"acc": true, "acc_norm": false}
				if name == "outer" { // its members: ga and outer::inner, whose own is carried up after it
					want = map[string]any{"acc": true}
				}
				if name == "outer::inner" {
					want = map[string]any{"acc": true, "acc_norm": false}
				}
				if !reflect.DeepEqual(got.HIB[name], want) {
					t.Errorf("higher_is_better[%s] = %v, want %v", name, got.HIB[name], want)
				}
			}
		})
	}
}

// resultsOrder reads the keys of the results object of a results file, in order.
func resultsOrder(t *testing.T, dec *json.Decoder) []string {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(strings.NewReader(string(raw["results"])))
	if _, err := d.Token(); err != nil { // {
		t.Fatal(err)
	}
	var keys []string
	for d.More() {
		k, err := d.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// TestLoadSuite checks how a group's task: list resolves (the --tasks list, then the group's
// folder, inline tasks named group::name) and that what octlm does not implement is refused by
// name.
func TestLoadSuite(t *testing.T) {
	inlineTask := "  - task: gc\n    dataset_path: json\n    dataset_kwargs:\n      data_files:\n        test: data.jsonl\n    test_split: test\n    output_type: loglikelihood\n    doc_to_text: q\n    doc_to_target: a\n"
	tests := []struct {
		name   string
		files  map[string]string // written beside ga.yaml and gb.yaml
		specs  []string          // relative to the folder; "." is the folder
		tasks  []string          // the suite's tasks, in order
		groups []string
		err    string // a part of the error
	}{
		{name: "names from the group's folder", files: map[string]string{"g.yaml": "group: g\ntask: [gb, ga]\n"}, specs: []string{"g.yaml"}, tasks: []string{"gb", "ga"}, groups: []string{"g"}},
		{name: "the whole folder", files: map[string]string{"g.yaml": "group: g\ntask: [gb]\n"}, specs: []string{"."}, tasks: []string{"gb", "ga"}, groups: []string{"g"}}, // g.yaml comes first
		{name: "inline task", files: map[string]string{"g.yaml": "group: g\ntask:\n  - ga\n" + inlineTask}, specs: []string{"g.yaml"}, tasks: []string{"ga", "g::gc"}, groups: []string{"g"}},
		{name: "a group of groups", files: map[string]string{"g.yaml": "group: g\ntask: [h, ga]\n", "h.yaml": "group: h\ntask: [gb]\n"}, specs: []string{"g.yaml"}, tasks: []string{"gb", "ga"}, groups: []string{"g", "h"}},
		{name: "a task by mapping", files: map[string]string{"g.yaml": "group: g\ntask:\n  - task: ga\n"}, specs: []string{"g.yaml"}, tasks: []string{"ga"}, groups: []string{"g"}},
		{name: "a group's task field", files: map[string]string{"g.yaml": "group: g\nnum_fewshot: 2\ntask: [ga]\n"}, specs: []string{"g.yaml"}, err: "num_fewshot: a task field in a group"},
		{name: "overrides of a named task", files: map[string]string{"g.yaml": "group: g\ntask:\n  - task: ga\n    num_fewshot: 3\n"}, specs: []string{"g.yaml"}, err: "fields beside task: ga"},
		{name: "an unknown name", files: map[string]string{"g.yaml": "group: g\ntask: [ga, nope]\n"}, specs: []string{"g.yaml"}, err: `"nope" names no task or group`},
		{name: "another aggregation", files: map[string]string{"g.yaml": "group: g\ntask: [ga]\naggregate_metric_list:\n  - metric: acc\n    aggregation: median\n"}, specs: []string{"g.yaml"}, err: "defines only mean"},
		{name: "an unknown aggregate field", files: map[string]string{"g.yaml": "group: g\ntask: [ga]\naggregate_metric_list:\n  - metric: acc\n    weight: 2\n"}, specs: []string{"g.yaml"}, err: "aggregate_metric_list[0].weight: unknown field"},
		{name: "a cycle", files: map[string]string{"g.yaml": "group: g\ntask: [h]\n", "h.yaml": "group: h\ntask: [g]\n"}, specs: []string{"g.yaml"}, err: "contains itself (g → h → g)"},
		{name: "an empty group", files: map[string]string{"g.yaml": "group: g\ntask: []\n"}, specs: []string{"g.yaml"}, err: "lists no tasks"},
		{name: "a name twice", files: map[string]string{"g.yaml": "group: ga\ntask: [gb]\n"}, specs: []string{"."}, err: `"ga" is defined twice`},
		{name: "an unknown group field", files: map[string]string{"g.yaml": "group: g\ntask: [ga]\naggregate: x\n"}, specs: []string{"g.yaml"}, err: "aggregate: unknown group field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			groupTaskFiles(t, dir)
			for name, text := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var specs []string
			for _, s := range tt.specs {
				specs = append(specs, filepath.Join(dir, s))
			}
			suite, err := LoadSuite(specs...)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var tasks, groups []string
			for _, task := range suite.Tasks {
				tasks = append(tasks, task.Name)
			}
			for _, g := range suite.Groups {
				groups = append(groups, g.Name)
			}
			if !reflect.DeepEqual(tasks, tt.tasks) || !reflect.DeepEqual(groups, tt.groups) {
				t.Errorf("tasks %v, groups %v; want %v, %v", tasks, groups, tt.tasks, tt.groups)
			}
		})
	}
}
