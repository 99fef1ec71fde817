package eval

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/octlm/octlm/internal/termsafe"
)

// Sample is one line of samples_<task>.jsonl as lm-eval's EvaluationTracker writes it.
func (in *Instances) Sample(d *Document, filter string) *Object {
	o := NewObject()
	o.Set("doc_id", int64(d.ID))
	o.Set("doc", d.Doc)
	o.Set("target", pyStr(d.Target))
	args := NewObject()
	var resps, filtered []any
	for i, q := range d.Requests {
		a := NewObject()
		switch q.Type {
		case Loglikelihood:
			a.Set("arg_0", q.Context)
			a.Set("arg_1", q.Continuation)
			resps = append(resps, []any{[]any{pyFloatRepr(q.LogLikelihood), pyBool(q.IsGreedy)}})
		case LoglikelihoodRolling:
			a.Set("arg_0", q.Continuation)
			resps = append(resps, []any{pyFloatRepr(q.LogLikelihood)})
		case GenerateUntil:
			a.Set("arg_0", q.Context)
			a.Set("arg_1", in.Task.Generation.kwargsObject())
			resps = append(resps, []any{q.Generated})
		}
		args.Set(fmt.Sprintf("gen_args_%d", i), a)
	}
	switch f := d.Filtered[filter].(type) {
	case []any: // one (ll, is_greedy) per request
		for _, e := range f {
			p := e.([]any)
			filtered = append(filtered, []any{pyFloatRepr(p[0].(float64)), pyBool(p[1].(bool))})
		}
	case float64:
		filtered = []any{pyFloatRepr(f)}
	case string:
		filtered = []any{f}
	}
	o.Set("arguments", args)
	o.Set("resps", resps)
	o.Set("filtered_resps", filtered)
	o.Set("filter", filter)
	var names []any
	metrics := d.Metrics[filter]
	for _, mc := range in.Task.Metrics {
		if _, ok := metrics[mc.Metric]; ok {
			names = append(names, mc.Metric)
		}
	}
	o.Set("metrics", names)
	o.Set("doc_hash", hashString(pyJSONDumps(d.Doc)))
	prompt := d.Requests[0].Context
	if d.Requests[0].Type == LoglikelihoodRolling {
		prompt = d.Requests[0].Continuation
	}
	o.Set("prompt_hash", hashString(prompt))
	o.Set("target_hash", hashString(pyStr(d.Target)))
	for _, n := range names {
		switch v := metrics[n.(string)].(type) {
		case [2]float64:
			o.Set(n.(string), []any{v[0], int64(v[1])})
		default:
			o.Set(n.(string), v)
		}
	}
	return o
}

func pyBool(b bool) string { return map[bool]string{true: "True", false: "False"}[b] }

func hashString(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// kwargsObject is the generation_kwargs as the task gave them (lm-eval passes them through).
func (g *GenerationKwargs) kwargsObject() *Object {
	if g.raw != nil {
		return g.raw
	}
	return NewObject()
}

// SampleLine is Sample as one JSON line.
func (in *Instances) SampleLine(d *Document, filter string) ([]byte, error) {
	b, err := in.Sample(d, filter).MarshalJSON()
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// TaskResult is one finished task for the results file.
type TaskResult struct {
	Instances *Instances
	Result    Result
}

// RunConfig is the results file's config: what ran the evaluation.
type RunConfig struct {
	Model, Adapter, DType, Backend, OctlmVersion string
	MaxLength, BatchSize                         int
	Limit                                        float64
	NumFewshot                                   *int
	Date                                         float64 // Unix seconds, as lm-eval's start_date
	TotalSeconds                                 float64
}

// ResultsJSON is the results file as lm-eval writes it: results, groups, group_subtasks,
// configs, versions, n-shot, higher_is_better, n-samples, config, date. Of groups (LoadSuite's,
// parents first) only those whose leaf tasks are all among tasks are written: each one's
// results (aggregated where it has an aggregate_metric_list, after the tasks, subgroups before
// their parents), its members, its version, and its n-shot and higher_is_better as lm-eval
// carries them up from the members.
func ResultsJSON(tasks []TaskResult, groups []*Group, cfg RunConfig) ([]byte, error) {
	results, subtasks, configs, nsamples := NewObject(), NewObject(), NewObject(), NewObject()
	sorted := append([]TaskResult(nil), tasks...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Instances.Task.Name < sorted[j].Instances.Task.Name })
	v := viewGroups(tasks, groups)
	for _, tr := range tasks {
		in := tr.Instances
		name := in.Task.Name
		r := NewObject()
		r.Set("name", name)
		r.Set("alias", name)
		r.Set("sample_len", int64(len(in.Docs)))
		for _, k := range tr.Result.Keys {
			r.Set(k, finite(tr.Result.Values[k]))
		}
		results.Set(name, r)
	}
	grouped := NewObject()
	for _, g := range bottomUp(v.finished) {
		results.Set(g.Name, v.results[g.Name])
		if len(g.Aggregate) > 0 {
			grouped.Set(g.Name, v.results[g.Name])
		}
	}
	for _, g := range v.finished {
		var names []any
		for _, m := range g.Members {
			names = append(names, m.Name())
		}
		subtasks.Set(g.Name, names)
	}
	for _, tr := range tasks {
		if name := tr.Instances.Task.Name; !v.member[name] {
			subtasks.Set(name, []any{})
		}
	}
	for _, tr := range sorted {
		in := tr.Instances
		configs.Set(in.Task.Name, in.Task.dumpConfig(in.NumFewshot))
	}
	for _, tr := range tasks {
		n := NewObject()
		n.Set("original", int64(tr.Instances.Original))
		n.Set("effective", int64(len(tr.Instances.Docs)))
		nsamples.Set(tr.Instances.Task.Name, n)
	}
	c := NewObject()
	c.Set("model", cfg.Model)
	c.Set("model_args", cfg.ModelArgs())
	c.Set("adapter", nilIfEmpty(cfg.Adapter))
	c.Set("dtype", cfg.DType)
	c.Set("backend", cfg.Backend)
	c.Set("octlm_version", cfg.OctlmVersion)
	c.Set("max_length", int64(cfg.MaxLength))
	c.Set("batch_size", int64(cfg.BatchSize))
	if cfg.Limit > 0 {
		c.Set("limit", cfg.Limit)
	} else {
		c.Set("limit", nil)
	}
	c.Set("bootstrap_iters", int64(BootstrapIters))
	out := NewObject()
	out.Set("results", results)
	if len(grouped.Keys) > 0 {
		out.Set("groups", grouped)
	}
	out.Set("group_subtasks", subtasks)
	out.Set("configs", configs)
	out.Set("versions", sortedObject(v.versions))
	out.Set("n-shot", sortedObject(v.nshot))
	hibs := map[string]any{}
	for k, h := range v.hib {
		hibs[k] = h
	}
	out.Set("higher_is_better", sortedObject(hibs))
	out.Set("n-samples", nsamples)
	out.Set("config", c)
	out.Set("date", cfg.Date)
	out.Set("total_evaluation_time_seconds", pyFloatRepr(cfg.TotalSeconds))
	b, err := out.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var pretty strings.Builder
	if err := indentJSON(&pretty, b); err != nil {
		return nil, err
	}
	return []byte(pretty.String() + "\n"), nil
}

// groupView is what a results file says of the tasks and the finished groups (those all of
// whose leaf tasks are done): each group's results entry, and every task's and group's
// version, n-shot and higher_is_better, the groups' carried up from their members as lm-eval's
// _propagate_num_fewshot and _propagate_higher_is_better do it, over the groups in order
// (parents before their subgroups): the members' one n-shot, if they agree; each metric's
// direction, null where two members disagree.
type groupView struct {
	finished []*Group
	results  map[string]*Object
	member   map[string]bool // names that are a finished group's members
	versions map[string]any
	nshot    map[string]any
	hib      map[string]*Object
}

func viewGroups(tasks []TaskResult, groups []*Group) groupView {
	v := groupView{results: map[string]*Object{}, member: map[string]bool{}, versions: map[string]any{}, nshot: map[string]any{}, hib: map[string]*Object{}}
	scores := map[string]taskScores{}
	for _, tr := range tasks {
		in := tr.Instances
		name := in.Task.Name
		scores[name] = taskScores{result: tr.Result, sampleLen: len(in.Docs)}
		v.versions[name] = in.Task.Version
		v.nshot[name] = int64(in.NumFewshot)
		h := NewObject()
		for _, mc := range in.Task.Metrics {
			h.Set(mc.Metric, mc.HigherIsBetter)
		}
		v.hib[name] = h
	}
	v.finished = finishedGroups(groups, scores)
	for _, g := range v.finished {
		v.results[g.Name] = g.groupResult(scores)
		v.versions[g.Name] = g.Version()
		shots := map[any]bool{}
		var shot any
		merged := NewObject()
		for _, m := range g.Members {
			v.member[m.Name()] = true
			if n, ok := v.nshot[m.Name()]; ok {
				shots[n], shot = true, n
			}
			if h, ok := v.hib[m.Name()]; ok {
				for _, k := range h.Keys {
					if old, ok := merged.Get(k); !ok {
						merged.Set(k, h.Values[k])
					} else if old != nil && old != h.Values[k] {
						merged.Set(k, nil)
					}
				}
			}
		}
		if len(shots) == 1 {
			v.nshot[g.Name] = shot
		}
		if len(merged.Keys) > 0 {
			v.hib[g.Name] = merged
		}
	}
	return v
}

// sortedObject is m as an object with its keys sorted (Python's dict(sorted(...)).
func sortedObject(m map[string]any) *Object {
	o := NewObject()
	for _, k := range slices.Sorted(maps.Keys(m)) {
		o.Set(k, m[k])
	}
	return o
}

func indentJSON(w io.Writer, b []byte) error {
	var v json.RawMessage = b
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// finite writes NaN and infinities (which JSON cannot hold) as lm-eval's json.dumps would
// print them read back by most tools: as strings.
func finite(v any) any {
	if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return pyFloatRepr(f)
	}
	return v
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ModelArgs is the config's model_args, as lm-eval writes its own: pretrained=…,dtype=…,
// max_length=…[,peft=…].
func (cfg RunConfig) ModelArgs() string {
	s := "pretrained=" + cfg.Model + ",dtype=" + cfg.DType + fmt.Sprintf(",max_length=%d", cfg.MaxLength)
	if cfg.Adapter != "" {
		s += ",peft=" + cfg.Adapter
	}
	return s
}

// dumpConfig is the task's configuration as the results file's configs hold it: the YAML's
// fields with lm-eval's defaults filled in.
func (t *Task) dumpConfig(shots int) *Object {
	o := NewObject()
	o.Set("task", t.Name)
	for _, k := range t.config.Keys {
		if k != "task" {
			o.Set(k, t.config.Values[k])
		}
	}
	set := func(k string, v any) {
		if _, ok := o.Get(k); !ok {
			o.Set(k, v)
		}
	}
	set("output_type", t.OutputType)
	set("target_delimiter", t.TargetDelimiter)
	set("fewshot_delimiter", t.FewshotDelimiter)
	o.Set("num_fewshot", int64(shots))
	if _, ok := o.Get("metric_list"); !ok {
		var list []any
		for _, mc := range t.Metrics {
			m := NewObject()
			m.Set("metric", mc.Metric)
			m.Set("aggregation", mc.Aggregation)
			m.Set("higher_is_better", mc.HigherIsBetter)
			list = append(list, m)
		}
		o.Set("metric_list", list)
	}
	return o
}

var unsafeModelName = regexp.MustCompile(`["<>:/|\\?*\[\]]+`)

// SanitizeModelName is lm-eval's sanitize_model_name: the folder under --output_path.
func SanitizeModelName(name string) string { return unsafeModelName.ReplaceAllString(name, "__") }

// Table writes lm-eval's results table (make_table) in Markdown: task, version, filter,
// n-shot, metric, direction, value and standard error; task text is escaped for the terminal.
func Table(w io.Writer, tasks []TaskResult) error {
	var rows [][]string
	for _, tr := range tasks {
		in := tr.Instances
		name := termsafe.Name(in.Task.Name)
		version := "    N/A"
		if in.Task.Version != nil {
			version = termsafe.Name(pyStr(in.Task.Version))
		}
		hib := map[string]bool{}
		for _, mc := range in.Task.Metrics {
			hib[mc.Metric] = mc.HigherIsBetter
		}
		rows = metricRows(rows, name, version, fmt.Sprint(in.NumFewshot), tr.Result.Values, tr.Result.Keys, func(m string) string {
			if hib[m] {
				return "↑"
			}
			return "↓"
		})
	}
	return writeTable(w, "Tasks", rows)
}

// metricRows appends to rows the table rows of one task's or group's results values: a row per
// metric of keys, in sorted order, with its standard error ("metric_stderr,filter") beside it
// and arrow(metric) as its direction; the name and version on the first row only.
func metricRows(rows [][]string, name, version, shots string, values map[string]any, keys []string, arrow func(metric string) string) [][]string {
	for _, k := range slices.Sorted(slices.Values(keys)) {
		m, f, _ := strings.Cut(k, ",")
		if strings.HasSuffix(m, "_stderr") {
			continue
		}
		se, pm := "", ""
		if s, ok := values[m+"_stderr,"+f]; ok {
			pm = "±"
			if s == "N/A" {
				se = "   N/A"
			} else {
				se = formatValue(s)
			}
		}
		rows = append(rows, []string{name, version, termsafe.Name(f), shots, m, arrow(m), formatValue(values[k]), pm, se})
		name, version = "", ""
	}
	return rows
}

// GroupTable writes lm-eval's groups table (make_table(results, "groups")) after Table: a row
// per metric of each finished group with an aggregate_metric_list, in the order of the groups'
// hierarchy (walked from the roots, members by name), a subgroup's name indented by its depth.
// It writes nothing when no group has results.
func GroupTable(w io.Writer, tasks []TaskResult, groups []*Group) error {
	v := viewGroups(tasks, groups)
	available := map[string]bool{}
	children := map[string][]string{}
	child := map[string]bool{}
	var names []string
	for _, g := range v.finished {
		if len(g.Aggregate) > 0 {
			available[g.Name] = true
		}
		names = append(names, g.Name)
		for _, m := range g.Members {
			children[g.Name] = append(children[g.Name], m.Name())
			child[m.Name()] = true
		}
	}
	if len(available) == 0 {
		return nil
	}
	// lm-eval's _build_hierarchy_info.
	depth := map[string]int{}
	var ordered []string
	var visit func(name string, d int)
	visit = func(name string, d int) {
		depth[name] = d
		if available[name] {
			ordered = append(ordered, name)
		}
		kids := append([]string(nil), children[name]...)
		sort.Strings(kids)
		for _, c := range kids {
			visit(c, d+1)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		if !child[name] {
			visit(name, 0)
		}
	}
	var rest []string
	for name := range available {
		if _, ok := depth[name]; !ok {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	ordered = append(ordered, rest...)
	var rows [][]string
	for _, k := range ordered {
		r := v.results[k]
		alias, _ := r.Get("alias")
		name := termsafe.Name(pyStr(alias))
		if d := depth[k]; d > 0 {
			name = strings.Repeat(" ", d) + "- " + name
		}
		version := termsafe.Name(pyStr(v.versions[k]))
		shots := " "
		if n, ok := v.nshot[k]; ok {
			shots = fmt.Sprint(n)
		}
		hib := v.hib[k]
		var keys []string
		for _, key := range r.Keys {
			switch key {
			case "alias", "name", "sample_len", "sample_count":
			default:
				keys = append(keys, key)
			}
		}
		rows = metricRows(rows, name, version, shots, r.Values, keys, func(m string) string {
			if hib != nil {
				if up, ok := hib.Values[m].(bool); ok {
					return map[bool]string{true: "↑", false: "↓"}[up]
				}
			}
			return ""
		})
	}
	return writeTable(w, "Groups", rows)
}

// writeTable writes rows under lm-eval's table header (first names the first column) as
// pytablewriter lays a Markdown table out.
func writeTable(w io.Writer, first string, rows [][]string) error {
	header := []string{first, "Version", "Filter", "n-shot", "Metric", "", "Value", "", "Stderr"}
	right := []bool{false, true, false, true, false, false, true, false, true}
	// pytablewriter's layout, which lm-eval's table uses: at least 3 wide, headers centred,
	// numbers right-aligned, a column holding "N/A" among its numbers left-aligned.
	for _, r := range rows {
		if strings.TrimSpace(r[8]) == "N/A" {
			right[8] = false
		}
	}
	widths := make([]int, len(header))
	for i, h := range header {
		widths[i] = max(3, utf8.RuneCountInString(h))
	}
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	line := func(cells []string) string {
		var b strings.Builder
		b.WriteByte('|')
		for i, c := range cells {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if right[i] {
				b.WriteString(pad + c)
			} else {
				b.WriteString(c + pad)
			}
			b.WriteByte('|')
		}
		return b.String() + "\n"
	}
	var b strings.Builder
	b.WriteByte('|')
	for i, h := range header {
		pad := widths[i] - utf8.RuneCountInString(h)
		b.WriteString(strings.Repeat(" ", pad/2) + h + strings.Repeat(" ", pad-pad/2) + "|")
	}
	b.WriteByte('\n')
	b.WriteByte('|')
	for i, wd := range widths {
		if right[i] {
			b.WriteString(strings.Repeat("-", wd-1) + ":|")
		} else {
			b.WriteString(strings.Repeat("-", wd) + "|")
		}
	}
	b.WriteByte('\n')
	for _, r := range rows {
		b.WriteString(line(r))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func formatValue(v any) string {
	if f, ok := v.(float64); ok {
		return fmt.Sprintf("%.4f", f)
	}
	return termsafe.Name(fmt.Sprint(v))
}
