package eval

// Task groups as lm-eval reads and scores them (lm-evaluation-harness at commit 4e7e0d47:
// lm_eval/config/group.py for the fields, lm_eval/tasks/_factory.py for the task: list,
// lm_eval/api/group.py Group.aggregate and lm_eval/evaluator_utils.py for the results).

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/octlm/octlm/internal/fileio"
)

// Group is one lm-eval task group: a YAML file with group: and a task: list, or a group given
// inline in another group's task: list (named parent::name, as lm-eval names it).
type Group struct {
	Name  string
	Alias string // group_alias; "" means the name
	Path  string // the YAML file that defines it
	// Members are the group's children in the order of its task: list.
	Members []GroupMember
	// Aggregate is aggregate_metric_list: the metrics computed over the group's leaf tasks.
	// Without it the group only lists its members (group_subtasks), with no results of its own.
	Aggregate []AggregateMetric
	// Metadata is the group's metadata: mapping, or nil; its version is the group's version.
	Metadata *Object
}

// GroupMember is one child of a group: a task or a subgroup (one of the two is set).
type GroupMember struct {
	Task  *Task
	Group *Group
}

// Name is the member's task or group name.
func (m GroupMember) Name() string {
	if m.Group != nil {
		return m.Group.Name
	}
	return m.Task.Name
}

// AggregateMetric is one entry of a group's aggregate_metric_list (aggregation: mean, the only
// one lm-eval defines).
type AggregateMetric struct {
	Metric string
	// Filters is filter_list; nil means every filter a leaf task reports the metric under.
	Filters []string
	// WeightBySize weights each leaf task by its documents (lm-eval's default: true); false
	// averages the tasks' values.
	WeightBySize bool
}

// Suite is what a --tasks list names: every task to run, once each, in order, and the groups
// over them.
type Suite struct {
	Tasks []*Task
	// Groups are every group: each one named by the specs, followed by its subgroups depth
	// first (the order of lm-eval's TaskManager.load).
	Groups []*Group
}

// LeafTasks are the tasks under g, its subgroups' included, in order (lm-eval's
// get_all_tasks: a task under two subgroups is listed twice).
func (g *Group) LeafTasks() []*Task {
	var out []*Task
	for _, m := range g.Members {
		if m.Group != nil {
			out = append(out, m.Group.LeafTasks()...)
		} else {
			out = append(out, m.Task)
		}
	}
	return out
}

// subgroups are g's subgroups, depth first (lm-eval's get_all_groups).
func (g *Group) subgroups() []*Group {
	var out []*Group
	for _, m := range g.Members {
		if m.Group != nil {
			out = append(out, m.Group)
			out = append(out, m.Group.subgroups()...)
		}
	}
	return out
}

// Version is the results' version of the group: metadata.version as Python's str() writes
// it, "N/A" without one.
func (g *Group) Version() string {
	if g.Metadata == nil || len(g.Metadata.Keys) == 0 {
		return "N/A"
	}
	v, ok := g.Metadata.Get("version")
	if !ok {
		return "N/A"
	}
	return pyStr(v)
}

// groupFields are the keys of a group file (GroupConfig's fields).
var groupFields = map[string]bool{"group": true, "group_alias": true, "task": true, "aggregate_metric_list": true, "metadata": true}

// isGroupNode says whether the mapping m is a task group: a group: key and a task: list. (A
// task file with a group: name and a single task: is a task, its group: ignored.)
func isGroupNode(m *yaml.Node) bool {
	group, task := false, false
	for i := 0; i+1 < len(m.Content); i += 2 {
		switch m.Content[i].Value {
		case "group":
			group = true
		case "task":
			task = m.Content[i+1].Kind == yaml.SequenceNode
		}
	}
	return group && task
}

// LoadSuite reads the tasks and groups named by specs: YAML files, or folders whose *.yaml and
// *.yml files (not recursing) are each a task or a group. A group's task: list names tasks and
// groups of the specs or of its own file's folder, or defines them inline (a mapping with
// task: or group: and a name no other file defines, named group::name). What lm-eval's groups
// can do and octlm does not is refused by name: group-level task fields (which lm-eval applies
// to every member), fields given beside a task or group that is referenced by name, tags, and
// aggregations other than mean.
func LoadSuite(specs ...string) (*Suite, error) {
	l := &suiteLoader{tasks: map[string]*Task{}, groups: map[string]*groupDef{}, loaded: map[string]bool{}, scanned: map[string]bool{}}
	type item struct {
		task  *Task
		group *groupDef
	}
	var requested []item
	for _, spec := range specs {
		files, err := specFiles(spec)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			t, g, err := l.loadFile(f)
			if err != nil {
				return nil, err
			}
			requested = append(requested, item{t, g})
		}
	}
	s := &Suite{}
	seenTask, seenGroup := map[*Task]bool{}, map[*Group]bool{}
	addTask := func(t *Task) {
		if !seenTask[t] {
			seenTask[t] = true
			s.Tasks = append(s.Tasks, t)
		}
	}
	for _, it := range requested {
		if it.task != nil {
			addTask(it.task)
			continue
		}
		g, err := l.build(it.group, nil)
		if err != nil {
			return nil, err
		}
		for _, sub := range append([]*Group{g}, g.subgroups()...) {
			if !seenGroup[sub] {
				seenGroup[sub] = true
				s.Groups = append(s.Groups, sub)
			}
		}
		for _, t := range g.LeafTasks() {
			addTask(t)
		}
	}
	return s, nil
}

// specFiles are the YAML files a --tasks entry names: the file, or a folder's *.yaml and *.yml.
func specFiles(spec string) ([]string, error) {
	st, err := os.Stat(spec)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", spec, err)
	}
	if !st.IsDir() {
		return []string{spec}, nil
	}
	files := folderYAML(spec)
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no task YAML (*.yaml, *.yml) in this folder: %w", spec, ErrBadTask)
	}
	return files, nil
}

// folderYAML is dir's *.yaml and *.yml files, sorted.
func folderYAML(dir string) []string {
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		files = append(files, m...)
	}
	sort.Strings(files)
	return files
}

// suiteLoader holds the tasks and groups read so far, by name.
type suiteLoader struct {
	tasks   map[string]*Task
	groups  map[string]*groupDef
	loaded  map[string]bool  // absolute paths of the files read
	scanned map[string]bool  // folders whose files were read to resolve a name
	skipped map[string]error // files of a scanned folder that could not be read, by path
}

// groupDef is a group's YAML mapping, built into a Group once (build).
type groupDef struct {
	name     string
	path     string
	node     *yaml.Node
	built    *Group
	building bool
}

// loadFile reads one YAML file: a task or a group (registered by name).
func (l *suiteLoader) loadFile(path string) (*Task, *groupDef, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if l.loaded[abs] {
		for _, t := range l.tasks {
			if t.Path == path {
				return t, nil, nil
			}
		}
		for _, g := range l.groups {
			if g.path == path {
				return nil, g, nil
			}
		}
	}
	l.loaded[abs] = true
	data, err := fileio.ReadFile(path, maxTaskBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("task %s: %w", path, err)
	}
	m, err := taskRoot(path, data)
	if err != nil {
		return nil, nil, err
	}
	if !isGroupNode(m) {
		t, err := parseTaskNode(path, m)
		if err != nil {
			return nil, nil, err
		}
		return t, nil, l.addTask(t)
	}
	name, err := scalarField(path, m, "group")
	if err != nil {
		return nil, nil, err
	}
	g := &groupDef{name: name, path: path, node: m}
	return nil, g, l.addGroup(g)
}

func (l *suiteLoader) addTask(t *Task) error {
	if err := l.checkNew(t.Name, t.Path); err != nil {
		return err
	}
	l.tasks[t.Name] = t
	return nil
}

func (l *suiteLoader) addGroup(g *groupDef) error {
	if err := l.checkNew(g.name, g.path); err != nil {
		return err
	}
	l.groups[g.name] = g
	return nil
}

// checkNew refuses a second task or group of one name.
func (l *suiteLoader) checkNew(name, path string) error {
	if t, ok := l.tasks[name]; ok {
		return fmt.Errorf("task %q is defined twice (%s and %s): %w", name, t.Path, path, ErrBadTask)
	}
	if g, ok := l.groups[name]; ok {
		return fmt.Errorf("group %q is defined twice (%s and %s): %w", name, g.path, path, ErrBadTask)
	}
	return nil
}

// lookup finds a task or group by name among those read, then among the files of dir (read
// once, those that cannot be read remembered for the error).
func (l *suiteLoader) lookup(name, dir string) (*Task, *groupDef) {
	find := func() (*Task, *groupDef) {
		if t, ok := l.tasks[name]; ok {
			return t, nil
		}
		return nil, l.groups[name]
	}
	if t, g := find(); t != nil || g != nil {
		return t, g
	}
	if abs, err := filepath.Abs(dir); err == nil && !l.scanned[abs] {
		l.scanned[abs] = true
		for _, f := range folderYAML(dir) {
			if fa, err := filepath.Abs(f); err == nil && l.loaded[fa] {
				continue
			}
			if _, _, err := l.loadFile(f); err != nil {
				if l.skipped == nil {
					l.skipped = map[string]error{}
				}
				l.skipped[f] = err
			}
		}
	}
	return find()
}

// unresolved is the error for a name a group's task: list gives that no file defines.
func (l *suiteLoader) unresolved(path string, n *yaml.Node, group, name string) error {
	msg := fmt.Sprintf("%q names no task or group of --tasks or of %s (tags are not supported)", name, filepath.Dir(path))
	var bad []string
	for f, err := range l.skipped {
		if filepath.Dir(f) == filepath.Dir(path) {
			bad = append(bad, fmt.Sprintf("%s (%v)", filepath.Base(f), err))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		msg += fmt.Sprintf("; unreadable there: %s", strings.Join(bad, "; "))
	}
	return taskError(path, n, group+".task", "%s", msg)
}

// build turns a group's YAML into a Group, its members resolved (each group once; a group
// that contains itself is refused). stack is the groups being built, outermost first.
func (l *suiteLoader) build(d *groupDef, stack []string) (*Group, error) {
	if d.built != nil {
		return d.built, nil
	}
	if d.building {
		return nil, taskError(d.path, d.node, "task", "group %q contains itself (%s)", d.name, strings.Join(append(stack, d.name), " → "))
	}
	d.building = true
	defer func() { d.building = false }()
	stack = append(stack, d.name)
	path, m := d.path, d.node
	g := &Group{Name: d.name, Path: path}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		switch key := k.Value; {
		case groupFields[key]:
		case knownKeys[key] || ignoredKeys[key] || hookKeys[key]:
			return nil, taskError(path, k, key, "a task field in a group, which lm-eval applies to each of its tasks; octlm does not: set it in the tasks")
		default:
			return nil, taskError(path, k, key, "unknown group field")
		}
		if err := refuseFunction(path, k.Value, v); err != nil {
			return nil, err
		}
	}
	var err error
	if g.Alias, err = optionalScalar(path, m, "group_alias"); err != nil {
		return nil, err
	}
	if n := fieldNode(m, "metadata"); n != nil && n.Tag != "!!null" {
		if n.Kind != yaml.MappingNode {
			return nil, taskError(path, n, "metadata", "must be a mapping")
		}
		v, err := yamlValue(path, n, "metadata", 0)
		if err != nil {
			return nil, err
		}
		g.Metadata = v.(*Object)
	}
	if g.Aggregate, err = parseAggregate(path, fieldNode(m, "aggregate_metric_list")); err != nil {
		return nil, err
	}
	for _, item := range fieldNode(m, "task").Content {
		member, err := l.member(d, item, stack)
		if err != nil {
			return nil, err
		}
		g.Members = append(g.Members, member)
	}
	if len(g.Members) == 0 {
		return nil, taskError(path, fieldNode(m, "task"), "task", "group %q lists no tasks", d.name)
	}
	d.built = g
	return g, nil
}

// member resolves one entry of d's task: list: a name, a mapping naming a task or group with
// no other field, or an inline task (task: a name no file defines, with its fields) or group.
func (l *suiteLoader) member(d *groupDef, item *yaml.Node, stack []string) (GroupMember, error) {
	path := d.path
	dir := filepath.Dir(path)
	ref := func(name string) (GroupMember, bool, error) {
		t, gd := l.lookup(name, dir)
		switch {
		case t != nil:
			return GroupMember{Task: t}, true, nil
		case gd != nil:
			g, err := l.build(gd, stack)
			return GroupMember{Group: g}, true, err
		}
		return GroupMember{}, false, nil
	}
	switch item.Kind {
	case yaml.ScalarNode:
		m, ok, err := ref(item.Value)
		if err == nil && !ok {
			err = l.unresolved(path, item, d.name, item.Value)
		}
		return m, err
	case yaml.MappingNode:
	default:
		return GroupMember{}, taskError(path, item, d.name+".task", "each entry is a task or group name, or a mapping with task: or group:")
	}
	key := "task"
	if fieldNode(item, "group") != nil {
		key = "group"
	}
	name, err := scalarField(path, item, key)
	if err != nil {
		return GroupMember{}, taskError(path, item, d.name+".task", "a mapping entry needs task: or group: with a name")
	}
	if m, ok, err := ref(name); err != nil || ok {
		if err == nil && len(item.Content) > 2 {
			err = taskError(path, item.Content[2], d.name+".task", "fields beside %s: %s, which lm-eval applies as overrides to that %s; octlm does not: write the task as a file of its own", key, name, key)
		}
		return m, err
	}
	inline := d.name + "::" + name // lm-eval's name for a task or group defined inline
	if key == "group" {
		if !isGroupNode(item) {
			return GroupMember{}, taskError(path, item, d.name+".task", "inline group %q needs a task: list", name)
		}
		gd := &groupDef{name: inline, path: path, node: item}
		if err := l.addGroup(gd); err != nil {
			return GroupMember{}, err
		}
		g, err := l.build(gd, stack)
		return GroupMember{Group: g}, err
	}
	t, err := parseTaskNode(path, item)
	if err != nil {
		return GroupMember{}, err
	}
	t.Name = inline
	if err := l.addTask(t); err != nil {
		return GroupMember{}, err
	}
	return GroupMember{Task: t}, nil
}

// fieldNode is the value of key in the mapping m, or nil.
func fieldNode(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// scalarField is the string value of key in m, which must be there.
func scalarField(path string, m *yaml.Node, key string) (string, error) {
	n := fieldNode(m, key)
	if n == nil || n.Kind != yaml.ScalarNode || n.Tag == "!!null" || n.Value == "" {
		return "", taskError(path, m, key, "missing: a name is needed")
	}
	return n.Value, nil
}

// optionalScalar is the string value of key in m, "" when absent or null.
func optionalScalar(path string, m *yaml.Node, key string) (string, error) {
	n := fieldNode(m, key)
	if n == nil || n.Tag == "!!null" {
		return "", nil
	}
	if n.Kind != yaml.ScalarNode {
		return "", taskError(path, n, key, "must be a string")
	}
	return n.Value, nil
}

// parseAggregate reads aggregate_metric_list: one mapping or a list of them, each with metric,
// and optionally aggregation (mean), weight_by_size (default true) and filter_list (a name or
// a list; default: every filter).
func parseAggregate(path string, n *yaml.Node) ([]AggregateMetric, error) {
	if n == nil || n.Tag == "!!null" {
		return nil, nil
	}
	entries := []*yaml.Node{n}
	if n.Kind == yaml.SequenceNode {
		entries = n.Content
	}
	var out []AggregateMetric
	for i, e := range entries {
		field := fmt.Sprintf("aggregate_metric_list[%d]", i)
		if e.Kind != yaml.MappingNode {
			return nil, taskError(path, e, field, "must be a mapping with metric:")
		}
		a := AggregateMetric{WeightBySize: true}
		for j := 0; j+1 < len(e.Content); j += 2 {
			k, v := e.Content[j], e.Content[j+1]
			switch k.Value {
			case "metric":
				if v.Kind != yaml.ScalarNode || v.Value == "" {
					return nil, taskError(path, v, field+".metric", "must be a metric name")
				}
				a.Metric = v.Value
			case "aggregation":
				if v.Value != "mean" {
					return nil, taskError(path, v, field+".aggregation", "%q: lm-eval defines only mean across a group's tasks (a Python function cannot run here)", v.Value)
				}
			case "weight_by_size":
				if err := v.Decode(&a.WeightBySize); err != nil {
					return nil, taskError(path, v, field+".weight_by_size", "must be true or false")
				}
			case "filter_list":
				switch {
				case v.Tag == "!!null":
				case v.Kind == yaml.ScalarNode:
					a.Filters = []string{v.Value}
				case v.Kind == yaml.SequenceNode:
					a.Filters = []string{}
					for _, f := range v.Content {
						if f.Kind != yaml.ScalarNode {
							return nil, taskError(path, f, field+".filter_list", "must be filter names")
						}
						a.Filters = append(a.Filters, f.Value)
					}
				default:
					return nil, taskError(path, v, field+".filter_list", "must be a filter name or a list of them")
				}
			default:
				return nil, taskError(path, k, field+"."+k.Value, "unknown field (metric, aggregation, weight_by_size, filter_list)")
			}
		}
		if a.Metric == "" {
			return nil, taskError(path, e, field+".metric", "missing")
		}
		out = append(out, a)
	}
	return out, nil
}

// taskScores are one finished task's results as a group reads them: its metric values by
// key ("acc,none", "acc_stderr,none"), in order, and its documents.
type taskScores struct {
	result    Result
	sampleLen int
}

// groupResult is Group.aggregate: the group's alias and name, and with an aggregate_metric_list
// its leaf tasks' documents (sample_len), each aggregated metric with its pooled standard error
// per filter, and the documents behind each (sample_count).
func (g *Group) groupResult(scores map[string]taskScores) *Object {
	o := NewObject()
	alias := g.Alias
	if alias == "" {
		alias = g.Name
	}
	o.Set("alias", alias)
	o.Set("name", g.Name)
	if len(g.Aggregate) == 0 {
		return o
	}
	leaves := g.LeafTasks()
	total := 0
	for _, t := range leaves {
		total += scores[t.Name].sampleLen
	}
	o.Set("sample_len", int64(total))
	count := NewObject()
	for _, a := range g.Aggregate {
		filters := a.Filters
		if filters == nil {
			filters = discoverFilters(a.Metric, leaves, scores)
		}
		for _, f := range filters {
			key, seKey := a.Metric+","+f, a.Metric+"_stderr,"+f
			var values, stderrs []float64
			var sizes []int
			stderrNA := false
			for _, t := range leaves {
				s, ok := scores[t.Name]
				if !ok {
					continue
				}
				v, ok := s.result.Values[key].(float64)
				if !ok {
					continue
				}
				values = append(values, v)
				sizes = append(sizes, s.sampleLen)
				switch se := s.result.Values[seKey].(type) {
				case float64:
					stderrs = append(stderrs, se)
				case string:
					stderrNA = true
				}
			}
			if len(values) == 0 {
				continue
			}
			o.Set(key, finite(aggregateSubtasks(values, sizes, a.WeightBySize)))
			if len(stderrs) == len(values) && !stderrNA {
				o.Set(seKey, finite(pooledStderr(stderrs, sizes)))
			} else {
				o.Set(seKey, "N/A")
			}
			n := 0
			for _, s := range sizes {
				n += s
			}
			count.Set(key, int64(n))
		}
	}
	if len(count.Keys) > 0 {
		o.Set("sample_count", count)
	}
	return o
}

// discoverFilters are the filters the leaf tasks report metric under ("metric,FILTER" keys,
// standard errors aside), sorted.
func discoverFilters(metric string, leaves []*Task, scores map[string]taskScores) []string {
	seen := map[string]bool{}
	for _, t := range leaves {
		for _, k := range scores[t.Name].result.Keys {
			if f, ok := strings.CutPrefix(k, metric+","); ok && !strings.Contains(k, "_stderr") {
				seen[f] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// aggregateSubtasks is lm-eval's aggregate_subtask_metrics: the mean of values weighted by
// sizes, or unweighted.
func aggregateSubtasks(values []float64, sizes []int, weightBySize bool) float64 {
	sum, n := 0.0, 0.0
	for i, v := range values {
		w := 1.0
		if weightBySize {
			w = float64(sizes[i])
		}
		sum += v * w
		n += w
	}
	return sum / n
}

// pooledStderr is lm-eval's pooled_sample_stderr: √(Σ (nᵢ−1)·nᵢ·seᵢ² / (Σ nᵢ − k) / Σ nᵢ).
func pooledStderr(stderrs []float64, sizes []int) float64 {
	num, total := 0.0, 0.0
	for i, se := range stderrs {
		n := float64(sizes[i])
		num += (n - 1) * se * se * n
		total += n
	}
	return math.Sqrt(num / (total - float64(len(sizes))) / total)
}

// finishedGroups are the groups all of whose leaf tasks are in scores, in order.
func finishedGroups(groups []*Group, scores map[string]taskScores) []*Group {
	var out []*Group
	for _, g := range groups {
		if !slices.ContainsFunc(g.LeafTasks(), func(t *Task) bool { _, ok := scores[t.Name]; return !ok }) {
			out = append(out, g)
		}
	}
	return out
}

// bottomUp is groups with every subgroup before its parent (lm-eval's
// _collect_groups_bottom_up: from each root in order, children first), the order of the
// groups' results.
func bottomUp(groups []*Group) []*Group {
	in := map[*Group]bool{}
	child := map[*Group]bool{}
	for _, g := range groups {
		in[g] = true
		for _, m := range g.Members {
			if m.Group != nil {
				child[m.Group] = true
			}
		}
	}
	var out []*Group
	seen := map[*Group]bool{}
	var visit func(g *Group)
	visit = func(g *Group) {
		if seen[g] {
			return
		}
		seen[g] = true
		for _, m := range g.Members {
			if m.Group != nil && in[m.Group] {
				visit(m.Group)
			}
		}
		out = append(out, g)
	}
	for _, g := range groups {
		if !child[g] {
			visit(g)
		}
	}
	return out
}
