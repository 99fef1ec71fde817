package eval

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/octlm/octlm/internal/fileio"
)

// Output types, as lm-eval names them.
const (
	MultipleChoice       = "multiple_choice"
	Loglikelihood        = "loglikelihood"
	LoglikelihoodRolling = "loglikelihood_rolling"
	GenerateUntil        = "generate_until"
)

// ErrBadTask marks a task file, its data or its templates that cannot be used.
var ErrBadTask = errors.New("bad task")

// Task is one lm-eval task read from its YAML file.
type Task struct {
	Name       string
	Path       string // the YAML file
	Dir        string // its folder: data files resolve against it
	OutputType string

	DatasetPath                                             string              // "json" or "parquet"
	DataFiles                                               map[string][]string // split → files (absolute, inside Dir)
	TestSplit, ValidationSplit, TrainingSplit, FewshotSplit string

	DocToText, DocToTarget, DocToChoice, Description *Field
	TargetDelimiter, FewshotDelimiter                string
	NumFewshot                                       int
	Sampler                                          string // "first_n" (or "default" with 0 shots)

	// octlm's tool-call extension (toolcall.go): render the context with the chat template,
	// offering the tools of the feature DocToTools.
	ChatTemplate bool
	DocToTools   string

	Generation GenerationKwargs
	Metrics    []MetricConfig
	Filters    []FilterPipeline
	Version    any // metadata.version, or nil

	config *Object // the YAML as read, for the results' configs
}

// GenerationKwargs are a generate_until task's generation_kwargs.
type GenerationKwargs struct {
	Until       []string
	MaxGenToks  int
	DoSample    bool
	Temperature float64
	raw         *Object
}

// MetricConfig is one entry of metric_list.
type MetricConfig struct {
	Metric            string
	Aggregation       string // as configured, or the metric's default
	HigherIsBetter    bool
	IgnoreCase        bool
	IgnorePunctuation bool
	IgnoreNumbers     bool
	RegexesToIgnore   []string
}

// FilterPipeline is one entry of filter_list: a name and its steps.
type FilterPipeline struct {
	Name  string
	Steps []FilterStep
}

// FilterStep is one filter: regex (pattern, group_select, fallback) or take_first.
type FilterStep struct {
	Function    string
	Pattern     string
	GroupSelect int
	Fallback    string
}

// knownKeys are the task keys read; ignoredKeys are accepted and have no effect here.
var knownKeys = map[string]bool{
	"task": true, "dataset_path": true, "dataset_kwargs": true, "dataset_name": true,
	"test_split": true, "validation_split": true, "training_split": true, "fewshot_split": true,
	"output_type": true, "doc_to_text": true, "doc_to_target": true, "doc_to_choice": true,
	"description": true, "target_delimiter": true, "fewshot_delimiter": true, "num_fewshot": true,
	"fewshot_config": true, "generation_kwargs": true, "metric_list": true, "filter_list": true,
	"metadata": true, "repeats": true, "chat_template": true, "doc_to_tools": true,
}

var ignoredKeys = map[string]bool{
	"tag": true, "group": true, "task_alias": true, "group_alias": true,
	"should_decontaminate": true, "doc_to_decontamination_query": true, "unsafe_code": true,
}

// hookKeys are lm-eval's Python hooks, which octlm cannot run.
var hookKeys = map[string]bool{
	"process_docs": true, "process_results": true, "custom_dataset": true, "doc_to_image": true,
	"doc_to_audio": true, "use_prompt": true, "include": true, "class": true, "gen_prefix": true,
}

// LoadTasks reads the tasks named by spec: a YAML file, or a folder whose *.yaml and *.yml
// files (not recursing) are each a task or a task group; a group gives its tasks (LoadSuite).
func LoadTasks(spec string) ([]*Task, error) {
	s, err := LoadSuite(spec)
	if err != nil {
		return nil, err
	}
	return s.Tasks, nil
}

// maxTaskBytes bounds a task YAML (1 MiB).
const maxTaskBytes = 1 << 20

// LoadTask reads one task YAML file.
func LoadTask(path string) (*Task, error) {
	data, err := fileio.ReadFile(path, maxTaskBytes)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", path, err)
	}
	return ParseTask(path, data)
}

// taskError is an error about a task file's field, with its line.
func taskError(path string, n *yaml.Node, field, format string, args ...any) error {
	line := ""
	if n != nil && n.Line > 0 {
		line = ":" + strconv.Itoa(n.Line)
	}
	where := path + line
	if field != "" {
		where += ": " + field
	}
	return fmt.Errorf("%s: %s: %w", where, fmt.Sprintf(format, args...), ErrBadTask)
}

// ParseTask reads a task from the YAML text data of the file path (its folder is where the
// data files are looked for).
func ParseTask(path string, data []byte) (*Task, error) {
	m, err := taskRoot(path, data)
	if err != nil {
		return nil, err
	}
	if isGroupNode(m) {
		return nil, taskError(path, m, "group", "this file is a task group (group: with a task: list); load it with LoadSuite")
	}
	return parseTaskNode(path, m)
}

// taskRoot is the one mapping the YAML text data of the task or group file path holds.
func taskRoot(path string, data []byte) (*yaml.Node, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: malformed YAML: %v: %w", path, err, ErrBadTask)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, taskError(path, &root, "", "a task file holds one mapping of task fields")
	}
	return root.Content[0], nil
}

// parseTaskNode reads a task from m, a mapping of task fields in the YAML file path (a task
// file's root, or a task given inline in a group's task: list).
func parseTaskNode(path string, m *yaml.Node) (*Task, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t := &Task{
		Path: path, Dir: filepath.Dir(abs), TargetDelimiter: " ", FewshotDelimiter: "\n\n",
		Sampler: "default", Generation: GenerationKwargs{MaxGenToks: 256},
	}
	cfg, err := yamlValue(path, m, "", 0)
	if err != nil {
		return nil, err
	}
	t.config = cfg.(*Object)
	fields := map[string]*yaml.Node{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := k.Value
		if _, dup := fields[key]; dup {
			return nil, taskError(path, k, key, "given twice")
		}
		fields[key] = v
		switch {
		case hookKeys[key]:
			return nil, taskError(path, k, key, "lm-eval's Python hooks and includes cannot run here; write the task without %s", key)
		case ignoredKeys[key] || knownKeys[key]:
		default:
			return nil, taskError(path, k, key, "unknown task field")
		}
		if err := refuseFunction(path, key, v); err != nil {
			return nil, err
		}
	}
	str := func(key string, dst *string) error {
		n, ok := fields[key]
		if !ok || n.Tag == "!!null" {
			return nil
		}
		if n.Kind != yaml.ScalarNode {
			return taskError(path, n, key, "must be a string")
		}
		*dst = n.Value
		return nil
	}
	for key, dst := range map[string]*string{
		"task": &t.Name, "dataset_path": &t.DatasetPath, "test_split": &t.TestSplit,
		"validation_split": &t.ValidationSplit, "training_split": &t.TrainingSplit,
		"fewshot_split": &t.FewshotSplit, "output_type": &t.OutputType,
		"target_delimiter": &t.TargetDelimiter, "fewshot_delimiter": &t.FewshotDelimiter,
	} {
		if err := str(key, dst); err != nil {
			return nil, err
		}
	}
	if t.Name == "" {
		return nil, taskError(path, m, "task", "missing: every task needs a name")
	}
	if t.OutputType == "" {
		t.OutputType = GenerateUntil // lm-eval's TaskConfig default
	}
	switch t.OutputType {
	case MultipleChoice, Loglikelihood, LoglikelihoodRolling, GenerateUntil:
	default:
		return nil, taskError(path, fields["output_type"], "output_type", "%q is not one of multiple_choice, loglikelihood, loglikelihood_rolling, generate_until", t.OutputType)
	}
	if n, ok := fields["dataset_name"]; ok && n.Tag != "!!null" {
		return nil, taskError(path, n, "dataset_name", "a dataset configuration (%q) needs the Hub's loader; give local files through dataset_kwargs.data_files", n.Value)
	}
	if n, ok := fields["chat_template"]; ok {
		if err := n.Decode(&t.ChatTemplate); err != nil {
			return nil, taskError(path, n, "chat_template", "must be true or false")
		}
	}
	if err := str("doc_to_tools", &t.DocToTools); err != nil {
		return nil, err
	}
	if t.ChatTemplate && t.OutputType != GenerateUntil {
		return nil, taskError(path, fields["chat_template"], "chat_template", "octlm renders the chat template for generate_until tasks only")
	}
	if t.DocToTools != "" && !t.ChatTemplate {
		return nil, taskError(path, fields["doc_to_tools"], "doc_to_tools", "tools are offered through the chat template: set chat_template: true")
	}
	if n, ok := fields["repeats"]; ok && n.Value != "1" {
		return nil, taskError(path, n, "repeats", "only 1 is supported")
	}
	if err := t.parseData(path, fields); err != nil {
		return nil, err
	}
	for key, dst := range map[string]**Field{
		"doc_to_text": &t.DocToText, "doc_to_target": &t.DocToTarget,
		"doc_to_choice": &t.DocToChoice, "description": &t.Description,
	} {
		if n, ok := fields[key]; ok && n.Tag != "!!null" {
			f, err := parseField(path, key, n)
			if err != nil {
				return nil, err
			}
			*dst = f
		}
	}
	if t.DocToText == nil {
		return nil, taskError(path, m, "doc_to_text", "missing")
	}
	if t.DocToTarget == nil {
		return nil, taskError(path, m, "doc_to_target", "missing")
	}
	if t.OutputType == MultipleChoice && t.DocToChoice == nil {
		return nil, taskError(path, m, "doc_to_choice", "missing: a multiple_choice task needs its choices")
	}
	if n, ok := fields["num_fewshot"]; ok && n.Tag != "!!null" {
		k, err := strconv.Atoi(n.Value)
		if err != nil || k < 0 {
			return nil, taskError(path, n, "num_fewshot", "must be a whole number ≥ 0")
		}
		t.NumFewshot = k
	}
	if err := t.parseFewshotConfig(path, fields["fewshot_config"]); err != nil {
		return nil, err
	}
	if err := t.parseGeneration(path, fields["generation_kwargs"]); err != nil {
		return nil, err
	}
	if err := t.parseMetrics(path, fields["metric_list"]); err != nil {
		return nil, err
	}
	if err := t.parseFilters(path, fields["filter_list"]); err != nil {
		return nil, err
	}
	if md, ok := t.config.Get("metadata"); ok {
		if o, ok := md.(*Object); ok {
			t.Version, _ = o.Get("version")
		}
	}
	return t, nil
}

// refuseFunction refuses a !function tag anywhere under n.
func refuseFunction(path, field string, n *yaml.Node) error {
	if n.Tag == "!function" {
		return taskError(path, n, field, "!function %s is a Python hook, which cannot run here", n.Value)
	}
	for _, c := range n.Content {
		if err := refuseFunction(path, field, c); err != nil {
			return err
		}
	}
	return nil
}

// maxYAMLNodes bounds the nodes one task field may expand to: aliases can repeat a node
// exponentially often (a "billion laughs" file).
const maxYAMLNodes = 100_000

// yamlValue converts a YAML node to a document value (mappings in order).
func yamlValue(path string, n *yaml.Node, field string, depth int) (any, error) {
	budget := maxYAMLNodes
	return yamlValueBudget(path, n, field, depth, &budget)
}

func yamlValueBudget(path string, n *yaml.Node, field string, depth int, budget *int) (any, error) {
	if depth > maxDepth {
		return nil, taskError(path, n, field, "nested deeper than %d levels", maxDepth)
	}
	if *budget--; *budget < 0 {
		return nil, taskError(path, n, field, "expands to more than %d values (aliases repeated)", maxYAMLNodes)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return yamlValueBudget(path, n.Content[0], field, depth+1, budget)
	case yaml.AliasNode:
		return yamlValueBudget(path, n.Alias, field, depth+1, budget)
	case yaml.MappingNode:
		o := NewObject()
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			name := key
			if field != "" {
				name = field + "." + key
			}
			v, err := yamlValueBudget(path, n.Content[i+1], name, depth+1, budget)
			if err != nil {
				return nil, err
			}
			o.Set(key, v)
		}
		return o, nil
	case yaml.SequenceNode:
		list := []any{}
		for i, c := range n.Content {
			v, err := yamlValueBudget(path, c, fmt.Sprintf("%s[%d]", field, i), depth+1, budget)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return list, nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, taskError(path, n, field, "%v", err)
			}
			return b, nil
		case "!!int":
			var i int64
			if err := n.Decode(&i); err != nil {
				return nil, taskError(path, n, field, "%v", err)
			}
			return i, nil
		case "!!float":
			var f float64
			if err := n.Decode(&f); err != nil {
				return nil, taskError(path, n, field, "%v", err)
			}
			return f, nil
		case "!!str", "!!binary", "!!timestamp":
			return n.Value, nil
		default:
			return n.Value, nil // !function is refused by name before values are used
		}
	}
	return nil, taskError(path, n, field, "unreadable YAML node")
}

// parseData reads dataset_path and dataset_kwargs.data_files, resolving each file against the
// task's folder and refusing one outside it.
func (t *Task) parseData(path string, fields map[string]*yaml.Node) error {
	switch t.DatasetPath {
	case "json", "parquet":
	case "":
		return taskError(path, nil, "dataset_path", "missing (json or parquet, with dataset_kwargs.data_files)")
	default:
		return taskError(path, fields["dataset_path"], "dataset_path", "%q: only local data is read here: dataset_path json or parquet with dataset_kwargs.data_files", t.DatasetPath)
	}
	kw, ok := fields["dataset_kwargs"]
	if !ok || kw.Kind != yaml.MappingNode {
		return taskError(path, kw, "dataset_kwargs", "needs data_files naming the %s files", t.DatasetPath)
	}
	var files *yaml.Node
	for i := 0; i+1 < len(kw.Content); i += 2 {
		switch k := kw.Content[i].Value; k {
		case "data_files":
			files = kw.Content[i+1]
		default:
			return taskError(path, kw.Content[i], "dataset_kwargs."+k, "not supported (only data_files)")
		}
	}
	if files == nil {
		return taskError(path, kw, "dataset_kwargs.data_files", "missing")
	}
	t.DataFiles = map[string][]string{}
	list := func(split string, n *yaml.Node) error {
		var names []*yaml.Node
		switch n.Kind {
		case yaml.ScalarNode:
			names = []*yaml.Node{n}
		case yaml.SequenceNode:
			names = n.Content
		default:
			return taskError(path, n, "dataset_kwargs.data_files", "a file, a list of files, or split: files")
		}
		for _, f := range names {
			p, err := t.resolveDataFile(f.Value)
			if err != nil {
				return taskError(path, f, "dataset_kwargs.data_files", "%v", err)
			}
			t.DataFiles[split] = append(t.DataFiles[split], p)
		}
		return nil
	}
	if files.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(files.Content); i += 2 {
			if err := list(files.Content[i].Value, files.Content[i+1]); err != nil {
				return err
			}
		}
	} else if err := list("train", files); err != nil { // as datasets names a split not given
		return err
	}
	return nil
}

// resolveDataFile resolves a data file named in a task against the task's folder. Only paths
// inside that folder are allowed: relative, without ".." leaving it, and not through a symbolic
// link pointing outside it, so that a task file cannot make octlm read an arbitrary file.
func (t *Task) resolveDataFile(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("empty file name")
	}
	if filepath.IsAbs(name) || strings.Contains(name, "://") {
		return "", fmt.Errorf("%q: data files are relative paths inside the task's folder %s", name, t.Dir)
	}
	if strings.ContainsAny(name, "*?[") {
		return "", fmt.Errorf("%q: patterns are not expanded; name each file", name)
	}
	p := filepath.Join(t.Dir, name)
	if !isInside(t.Dir, p) {
		return "", fmt.Errorf("%q leaves the task's folder %s; data files must be inside it", name, t.Dir)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("%q: %w", name, err)
	}
	dir, err := filepath.EvalSymlinks(t.Dir)
	if err != nil {
		return "", err
	}
	if !isInside(dir, real) {
		return "", fmt.Errorf("%q is a link to %s, outside the task's folder %s", name, real, t.Dir)
	}
	return p, nil
}

func isInside(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func (t *Task) parseFewshotConfig(path string, n *yaml.Node) error {
	if n == nil || n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return taskError(path, n, "fewshot_config", "must be a mapping")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		switch k {
		case "sampler":
			t.Sampler = v.Value
			if t.Sampler != "first_n" && t.Sampler != "default" {
				return taskError(path, v, "fewshot_config.sampler", "%q: only first_n is supported (and default with no shots)", t.Sampler)
			}
		default:
			return taskError(path, n.Content[i], "fewshot_config."+k, "not supported (only sampler)")
		}
	}
	return nil
}

func (t *Task) parseGeneration(path string, n *yaml.Node) error {
	if n == nil || n.Tag == "!!null" {
		return nil
	}
	v, err := yamlValue(path, n, "generation_kwargs", 0)
	if err != nil {
		return err
	}
	o, ok := v.(*Object)
	if !ok {
		return taskError(path, n, "generation_kwargs", "must be a mapping")
	}
	g := &t.Generation
	g.raw = o
	for i, k := range o.Keys {
		val := o.Values[k]
		node := n.Content[2*i+1]
		field := "generation_kwargs." + k
		switch k {
		case "until":
			switch u := val.(type) {
			case string:
				g.Until = []string{u}
			case []any:
				for _, e := range u {
					s, ok := e.(string)
					if !ok {
						return taskError(path, node, field, "must be strings")
					}
					g.Until = append(g.Until, s)
				}
			default:
				return taskError(path, node, field, "a string or a list of strings")
			}
		case "max_gen_toks", "max_new_tokens":
			i, ok := val.(int64)
			if !ok || i < 1 {
				return taskError(path, node, field, "must be a whole number ≥ 1")
			}
			g.MaxGenToks = int(i)
		case "do_sample":
			b, ok := val.(bool)
			if !ok {
				return taskError(path, node, field, "must be true or false")
			}
			g.DoSample = b
		case "temperature":
			switch x := val.(type) {
			case int64:
				g.Temperature = float64(x)
			case float64:
				g.Temperature = x
			default:
				return taskError(path, node, field, "must be a number")
			}
		default:
			return taskError(path, node, field, "not supported (until, max_gen_toks, do_sample, temperature)")
		}
	}
	if g.DoSample && g.Temperature > 0 {
		return taskError(path, n, "generation_kwargs.do_sample", "sampling is not reproduced exactly (torch's random stream); use greedy generation (do_sample: false)")
	}
	return nil
}

// defaultMetrics are lm-eval's metrics for an output type without metric_list.
var defaultMetrics = map[string][]string{
	MultipleChoice:       {"acc", "acc_norm"},
	Loglikelihood:        {"perplexity", "acc"},
	LoglikelihoodRolling: {"word_perplexity", "byte_perplexity", "bits_per_byte"},
	GenerateUntil:        {"exact_match"},
}

// metricAggregation is each supported metric's aggregation and direction, as lm-eval registers
// them, and the output types it applies to.
var metricAggregation = map[string]struct {
	aggregation string
	higher      bool
	types       []string
}{
	"acc":             {"mean", true, []string{Loglikelihood, MultipleChoice}},
	"acc_norm":        {"mean", true, []string{MultipleChoice}},
	"acc_bytes":       {"mean", true, []string{MultipleChoice}},
	"acc_mutual_info": {"mean", true, []string{MultipleChoice}},
	"exact_match":     {"mean", true, []string{GenerateUntil, MultipleChoice}},
	"perplexity":      {"perplexity", false, []string{Loglikelihood}},
	"tool_call_ast":   {"mean", true, []string{GenerateUntil}},
	"word_perplexity": {"weighted_perplexity", false, []string{LoglikelihoodRolling}},
	"byte_perplexity": {"weighted_perplexity", false, []string{LoglikelihoodRolling}},
	"bits_per_byte":   {"bits_per_byte", false, []string{LoglikelihoodRolling}},
}

func (t *Task) parseMetrics(path string, n *yaml.Node) error {
	if n == nil || n.Tag == "!!null" {
		for _, name := range defaultMetrics[t.OutputType] {
			a := metricAggregation[name]
			t.Metrics = append(t.Metrics, MetricConfig{Metric: name, Aggregation: a.aggregation, HigherIsBetter: a.higher})
		}
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return taskError(path, n, "metric_list", "must be a list")
	}
	for i, e := range n.Content {
		field := fmt.Sprintf("metric_list[%d]", i)
		v, err := yamlValue(path, e, field, 0)
		if err != nil {
			return err
		}
		o, ok := v.(*Object)
		if !ok {
			return taskError(path, e, field, "must be a mapping with metric:")
		}
		name, _ := o.Values["metric"].(string)
		a, known := metricAggregation[name]
		if !known {
			return taskError(path, e, field+".metric", "%q is not supported (acc, acc_norm, acc_bytes, acc_mutual_info, exact_match, perplexity, word_perplexity, byte_perplexity, bits_per_byte, tool_call_ast)", name)
		}
		if !contains(a.types, t.OutputType) {
			return taskError(path, e, field+".metric", "%s does not apply to output_type %s", name, t.OutputType)
		}
		mc := MetricConfig{Metric: name, Aggregation: a.aggregation, HigherIsBetter: a.higher}
		for _, k := range o.Keys {
			val := o.Values[k]
			switch k {
			case "metric":
			case "aggregation":
				s, _ := val.(string)
				if s != a.aggregation {
					return taskError(path, e, field+".aggregation", "%v: only %s's own aggregation %s is supported", val, name, a.aggregation)
				}
			case "higher_is_better":
				b, ok := val.(bool)
				if !ok {
					return taskError(path, e, field+"."+k, "must be true or false")
				}
				mc.HigherIsBetter = b
			case "ignore_case", "ignore_punctuation", "ignore_numbers":
				b, ok := val.(bool)
				if !ok {
					return taskError(path, e, field+"."+k, "must be true or false")
				}
				if name != "exact_match" {
					return taskError(path, e, field+"."+k, "applies to exact_match only")
				}
				switch k {
				case "ignore_case":
					mc.IgnoreCase = b
				case "ignore_punctuation":
					mc.IgnorePunctuation = b
				default:
					mc.IgnoreNumbers = b
				}
			case "regexes_to_ignore":
				list, ok := val.([]any)
				if !ok || name != "exact_match" {
					return taskError(path, e, field+"."+k, "a list of patterns, for exact_match")
				}
				for _, r := range list {
					s, ok := r.(string)
					if !ok {
						return taskError(path, e, field+"."+k, "patterns are strings")
					}
					if _, err := compilePythonRegex(s); err != nil {
						return taskError(path, e, field+"."+k, "%v", err)
					}
					mc.RegexesToIgnore = append(mc.RegexesToIgnore, s)
				}
			default:
				return taskError(path, e, field+"."+k, "not supported")
			}
		}
		t.Metrics = append(t.Metrics, mc)
	}
	if len(t.Metrics) == 0 {
		return taskError(path, n, "metric_list", "empty")
	}
	return nil
}

// hasMetric says whether the task's metric_list names metric.
func (t *Task) hasMetric(metric string) bool {
	for _, mc := range t.Metrics {
		if mc.Metric == metric {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (t *Task) parseFilters(path string, n *yaml.Node) error {
	if n == nil || n.Tag == "!!null" {
		return nil
	}
	v, err := yamlValue(path, n, "filter_list", 0)
	if err != nil {
		return err
	}
	list, ok := v.([]any)
	if !ok {
		return taskError(path, n, "filter_list", "must be a list")
	}
	for i, e := range list {
		field := fmt.Sprintf("filter_list[%d]", i)
		node := n.Content[i]
		o, ok := e.(*Object)
		if !ok {
			return taskError(path, node, field, "must be a mapping with name and filter")
		}
		var fp FilterPipeline
		fp.Name, _ = o.Values["name"].(string)
		if fp.Name == "" {
			return taskError(path, node, field+".name", "missing")
		}
		steps, _ := o.Values["filter"].([]any)
		if len(steps) == 0 {
			return taskError(path, node, field+".filter", "a non-empty list of filters")
		}
		for _, k := range o.Keys {
			if k != "name" && k != "filter" {
				return taskError(path, node, field+"."+k, "not supported")
			}
		}
		for j, s := range steps {
			sf := fmt.Sprintf("%s.filter[%d]", field, j)
			so, ok := s.(*Object)
			if !ok {
				return taskError(path, node, sf, "must be a mapping with function")
			}
			step := FilterStep{Pattern: `#### (\-?[0-9\.\,]+)`, Fallback: "[invalid]"}
			step.Function, _ = so.Values["function"].(string)
			for _, k := range so.Keys {
				val := so.Values[k]
				switch {
				case k == "function":
				case k == "regex_pattern" && step.Function == "regex":
					p, ok := val.(string)
					if !ok {
						return taskError(path, node, sf+"."+k, "must be a string")
					}
					if _, err := compilePythonRegex(p); err != nil {
						return taskError(path, node, sf+"."+k, "%v", err)
					}
					step.Pattern = p
				case k == "group_select" && step.Function == "regex":
					g, ok := val.(int64)
					if !ok {
						return taskError(path, node, sf+"."+k, "must be a whole number")
					}
					step.GroupSelect = int(g)
				case k == "fallback" && step.Function == "regex":
					f, ok := val.(string)
					if !ok {
						return taskError(path, node, sf+"."+k, "must be a string")
					}
					step.Fallback = f
				default:
					return taskError(path, node, sf+"."+k, "not supported")
				}
			}
			if step.Function != "regex" && step.Function != "take_first" {
				return taskError(path, node, sf+".function", "%q is not supported (regex, take_first)", step.Function)
			}
			fp.Steps = append(fp.Steps, step)
		}
		t.Filters = append(t.Filters, fp)
	}
	return nil
}
