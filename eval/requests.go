package eval

import (
	"errors"
	"fmt"
	"math"
	"reflect"
)

// Request is one request lm-eval's task makes of the model: a context and a continuation to
// score (loglikelihood, a choice of multiple_choice), a text to score whole
// (loglikelihood_rolling), or a context to continue (generate_until).
type Request struct {
	Type         string // "loglikelihood", "loglikelihood_rolling" or "generate_until"
	Index        int    // within its document
	Context      string
	Continuation string // or the whole text for loglikelihood_rolling

	// Filled when answered.
	ContextIDs, ContinuationIDs []int   // loglikelihood: as the HF backend encodes them
	Tokens                      int     // loglikelihood_rolling: the text's tokens
	LogLikelihood               float64 // summed over the continuation's tokens
	IsGreedy                    bool
	Generated                   string // generate_until, after cutting at the stop strings
}

// Document is one evaluated document with its requests.
type Document struct {
	ID       int
	Doc      *Object
	Target   any      // doc_to_target's value
	Choices  []string // multiple_choice
	Gold     []int    // multiple_choice: the gold indices (one unless the target is a list)
	Requests []*Request

	// Filled when scored: per filter, the metrics of this document.
	Metrics  map[string]map[string]any
	Filtered map[string]any // per filter, lm-eval's filtered_resps
}

// Instances are a task's documents ready to run: the evaluated split, limited, with the
// few-shot contexts built.
type Instances struct {
	Task       *Task
	NumFewshot int
	Docs       []*Document
	Original   int // documents in the split before --limit

	// MultipleInput is lm-eval's multiple_input (Winogrande's form): the task has choices and
	// doc_to_text gives the first evaluated document an integer. Then doc_to_choice gives each
	// document's contexts, doc_to_text the gold index and doc_to_target the one continuation.
	MultipleInput bool
}

// BuildOptions are what the command line changes of a task.
type BuildOptions struct {
	NumFewshot *int    // overrides the task's num_fewshot
	Limit      float64 // 0: all; below 1: a fraction (rounded up); else a count
}

// Build reads the task's data and builds its requests as lm-eval's ConfigurableTask does.
func (t *Task) Build(opts BuildOptions) (*Instances, error) {
	var evalSplit string
	switch {
	case t.TestSplit != "":
		evalSplit = t.TestSplit
	case t.ValidationSplit != "":
		evalSplit = t.ValidationSplit
	default:
		return nil, fmt.Errorf("%s: neither test_split nor validation_split is set: %w", t.Path, ErrBadTask)
	}
	split, err := t.LoadSplit(evalSplit)
	if err != nil {
		return nil, err
	}
	shots := t.NumFewshot
	if opts.NumFewshot != nil {
		shots = *opts.NumFewshot
	}
	in := &Instances{Task: t, NumFewshot: shots, Original: len(split.Docs)}
	features := split.featureSet()
	if t.DocToChoice != nil && len(split.Docs) > 0 { // ConfigurableTask.__init__ tests one document
		if q, err := t.DocToText.text(split.Docs[0], features, true); err == nil {
			_, in.MultipleInput = q.(int64)
		}
		if in.MultipleInput && t.OutputType != MultipleChoice {
			return nil, fmt.Errorf("%s: doc_to_text gives document 0 an integer, which makes the task's choices its contexts (lm-eval's multiple_input): only a multiple_choice task can have them, not %s: %w", t.Path, t.OutputType, ErrBadTask)
		}
	}
	var fewshot *Split
	if shots > 0 {
		if t.Sampler != "first_n" {
			return nil, fmt.Errorf("%s: fewshot_config.sampler %q draws shots with Python's random.Random(1234).sample, which octlm does not reproduce; set fewshot_config: {sampler: first_n} to take the first shots in order: %w", t.Path, t.Sampler, ErrBadTask)
		}
		fsName := t.FewshotSplit
		if fsName == "" {
			for _, s := range []string{t.TrainingSplit, t.ValidationSplit, t.TestSplit} {
				if s != "" {
					fsName = s
					break
				}
			}
		}
		if fewshot, err = t.LoadSplit(fsName); err != nil {
			return nil, err
		}
	}
	n := len(split.Docs)
	switch {
	case opts.Limit < 0 || math.IsNaN(opts.Limit):
		return nil, fmt.Errorf("limit %v: must be ≥ 0", opts.Limit)
	case opts.Limit > 0 && opts.Limit < 1:
		n = min(n, int(math.Ceil(float64(n)*opts.Limit)))
	case opts.Limit >= 1:
		n = min(n, int(opts.Limit))
	}
	for id, doc := range split.Docs[:n] {
		d, err := t.buildDoc(id, doc, features, shots, fewshot, in.MultipleInput)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", t.Path, id, errors.Join(err, ErrBadTask))
		}
		in.Docs = append(in.Docs, d)
	}
	return in, nil
}

func (t *Task) buildDoc(id int, doc *Object, features map[string]bool, shots int, fewshot *Split, multi bool) (*Document, error) {
	hasChoices := t.DocToChoice != nil
	d := &Document{ID: id, Doc: doc}
	prefix, q, err := t.fewshotContext(doc, features, shots, fewshot, multi)
	if err != nil {
		return nil, err
	}
	var ctx string
	if !multi {
		s, ok := q.(string)
		if !ok {
			return nil, fmt.Errorf("doc_to_text gave %s, not a string (an integer makes the choices the contexts only when document 0 has one too: lm-eval's multiple_input)", pyTypeName(q))
		}
		ctx = prefix + s
	}
	if d.Target, err = t.DocToTarget.target(doc, features, hasChoices); err != nil {
		return nil, err
	}
	if hasChoices {
		if d.Choices, err = t.DocToChoice.choices(doc, features); err != nil {
			return nil, err
		}
	}
	switch t.OutputType {
	case Loglikelihood:
		s, ok := d.Target.(string)
		if !ok {
			return nil, fmt.Errorf("doc_to_target gave %s; a loglikelihood continuation is a string", pyTypeName(d.Target))
		}
		d.Requests = []*Request{{Type: Loglikelihood, Context: ctx, Continuation: s}}
	case LoglikelihoodRolling:
		s, ok := d.Target.(string)
		if !ok {
			return nil, fmt.Errorf("doc_to_target gave %s; a loglikelihood_rolling text is a string", pyTypeName(d.Target))
		}
		d.Requests = []*Request{{Type: LoglikelihoodRolling, Continuation: s}}
	case MultipleChoice:
		if len(d.Choices) == 0 {
			return nil, fmt.Errorf("doc_to_choice gave no choices")
		}
		if multi { // construct_requests: each choice a context, the target the continuation
			if _, ok := q.(int64); !ok {
				return nil, fmt.Errorf("doc_to_text gave %s; in a task with several contexts (multiple_input) it is the gold index", pyTypeName(q))
			}
			for i, c := range d.Choices {
				d.Requests = append(d.Requests, &Request{Type: Loglikelihood, Index: i, Context: prefix + c, Continuation: t.TargetDelimiter + pyStr(d.Target)})
			}
			if d.Gold, err = goldIndices(q, d.Choices); err != nil {
				return nil, err
			}
		} else {
			for i, c := range d.Choices {
				d.Requests = append(d.Requests, &Request{Type: Loglikelihood, Index: i, Context: ctx, Continuation: t.TargetDelimiter + c})
			}
			if d.Gold, err = goldIndices(d.Target, d.Choices); err != nil {
				return nil, err
			}
		}
		if t.hasMetric("acc_mutual_info") { // the unconditional ("", delimiter + choice) pairs
			for i, c := range d.Choices {
				d.Requests = append(d.Requests, &Request{Type: Loglikelihood, Index: len(d.Choices) + i, Continuation: t.TargetDelimiter + c})
			}
		}
	case GenerateUntil:
		if hasChoices {
			i, ok := d.Target.(int64)
			if !ok || i < 0 || int(i) >= len(d.Choices) {
				return nil, fmt.Errorf("doc_to_target %s is not an index into the %d choices", pyStr(d.Target), len(d.Choices))
			}
		}
		if t.ChatTemplate {
			if ctx, err = t.chatContext(doc, ctx); err != nil {
				return nil, err
			}
		}
		d.Requests = []*Request{{Type: GenerateUntil, Context: ctx}}
	}
	return d, nil
}

// goldIndices is process_results' gold: an index, a choice's text, or a list of indices. An
// index outside the choices (lm-eval warns and scores the document 0) is an error here.
func goldIndices(target any, choices []string) ([]int, error) {
	var check func(v any) (int, error)
	check = func(v any) (int, error) {
		switch x := v.(type) {
		case int64:
			if err := checkChoiceIndex(x, len(choices)); err != nil {
				return 0, err
			}
			return int(x), nil
		case bool:
			return check(map[bool]int64{false: 0, true: 1}[x])
		case string:
			for i, c := range choices {
				if c == x {
					return i, nil
				}
			}
			return 0, fmt.Errorf("the answer %q is not one of the choices %q", x, choices)
		}
		return 0, fmt.Errorf("the answer is %s, neither an index nor a choice", pyTypeName(v))
	}
	if list, ok := target.([]any); ok {
		var out []int
		for _, e := range list {
			if _, isInt := e.(int64); !isInt {
				return nil, fmt.Errorf("a list of answers holds indices; found %s", pyTypeName(e))
			}
			i, err := check(e)
			if err != nil {
				return nil, err
			}
			out = append(out, i)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("the list of answers is empty")
		}
		return out, nil
	}
	i, err := check(target)
	if err != nil {
		return nil, err
	}
	return []int{i}, nil
}

// fewshotContext is lm-eval's fewshot_context without a chat template: the description and the
// labelled shots (question, target delimiter, answer, few-shot delimiter), and the document's
// doc_to_text (the question; with multi, the gold index), which follows them.
func (t *Task) fewshotContext(doc *Object, features map[string]bool, shots int, fewshot *Split, multi bool) (prefix string, question any, err error) {
	out := ""
	if t.Description != nil {
		var err error
		if out, err = t.resolveDescription(doc); err != nil {
			return "", nil, err
		}
	}
	if shots > 0 {
		pool := fewshot.Docs
		if t.FewshotSplit == t.TestSplit { // lm-eval: eval_doc=doc when the splits' names agree
			pool = nil
			for _, d := range fewshot.Docs {
				if !pyEqual(d, doc) {
					pool = append(pool, d)
				}
			}
		}
		if shots > len(pool) {
			return "", nil, fmt.Errorf("%d shots asked for, but the few-shot split %q has %d documents to take them from", shots, fewshot.Name, len(pool))
		}
		fsFeatures := fewshot.featureSet()
		for i, fs := range pool[:shots] {
			s, err := t.shot(fs, fsFeatures, multi)
			if err != nil {
				return "", nil, fmt.Errorf("few-shot document %d of split %q: %w", i, fewshot.Name, err)
			}
			out += s
		}
	}
	q, err := t.DocToText.text(doc, features, t.DocToChoice != nil)
	if err != nil {
		return "", nil, err
	}
	return out, q, nil
}

func (t *Task) resolveDescription(doc *Object) (string, error) {
	if v, ok := doc.Get(t.Description.str); ok && t.Description.isStr {
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("description: the feature %s is %s, not a string", t.Description.str, pyTypeName(v))
		}
		return s, nil
	}
	return t.Description.render(doc)
}

// checkChoiceIndex refuses an answer index outside a document's n choices.
func checkChoiceIndex(i int64, n int) error {
	if i < 0 || i >= int64(n) {
		return fmt.Errorf("the answer index %d is out of range: the document has %d choices", i, n)
	}
	return nil
}

// choiceAt is the document's choice (doc_to_choice) at answer index i.
func (t *Task) choiceAt(doc *Object, features map[string]bool, i int64) (string, error) {
	c, err := t.DocToChoice.choices(doc, features)
	if err != nil {
		return "", err
	}
	if err := checkChoiceIndex(i, len(c)); err != nil {
		return "", err
	}
	return c[i], nil
}

// shot is build_qa_turn of one labelled example, as text. With multi (multiple_input), the
// question is the example's choice at its doc_to_text index and the answer its doc_to_target.
func (t *Task) shot(doc *Object, features map[string]bool, multi bool) (string, error) {
	hasChoices := t.DocToChoice != nil
	q, err := t.DocToText.text(doc, features, hasChoices)
	if err != nil {
		return "", err
	}
	if i, isInt := q.(int64); isInt && multi {
		if q, err = t.choiceAt(doc, features, i); err != nil {
			return "", err
		}
	}
	qs, ok := q.(string)
	if !ok {
		return "", fmt.Errorf("doc_to_text gave %s, not a string", pyTypeName(q))
	}
	a, err := t.DocToTarget.target(doc, features, hasChoices)
	if err != nil {
		return "", err
	}
	if a == nil || a == "" {
		return qs, nil
	}
	answer := a
	if i, isInt := a.(int64); isInt && hasChoices && !multi {
		if answer, err = t.choiceAt(doc, features, i); err != nil {
			return "", err
		}
	} else if list, isList := a.([]any); isList && len(list) > 0 {
		answer = list[0]
	}
	s, ok := answer.(string)
	if !ok {
		return "", fmt.Errorf("the few-shot answer is %s, not a string", pyTypeName(answer))
	}
	return qs + t.TargetDelimiter + s + t.FewshotDelimiter, nil
}

// pyEqual is Python's == on document values (1 == 1.0, True == 1).
func pyEqual(a, b any) bool {
	na, aNum := pyNumber(a)
	nb, bNum := pyNumber(b)
	if aNum || bNum {
		return aNum && bNum && na == nb
	}
	switch x := a.(type) {
	case *Object:
		y, ok := b.(*Object)
		if !ok || len(x.Keys) != len(y.Keys) {
			return false
		}
		for k, v := range x.Values {
			w, ok := y.Values[k]
			if !ok || !pyEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pyEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func pyNumber(v any) (float64, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}
