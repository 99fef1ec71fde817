package eval

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode/utf8"
)

// noFilter is the filter lm-eval applies when a task has no filter_list (take_first).
const noFilter = "none"

// ScoreDoc computes a document's metrics from its answered requests, as lm-eval's
// process_results does, after each filter of filter_list (or "none").
func (in *Instances) ScoreDoc(d *Document) error {
	t := in.Task
	pipelines := t.Filters
	if len(pipelines) == 0 {
		pipelines = []FilterPipeline{{Name: noFilter, Steps: []FilterStep{{Function: "take_first"}}}}
	}
	d.Metrics = map[string]map[string]any{}
	d.Filtered = map[string]any{}
	for _, p := range pipelines {
		m, filtered, err := t.scoreDoc(d, p)
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", t.Name, d.ID, err)
		}
		d.Metrics[p.Name] = m
		d.Filtered[p.Name] = filtered
	}
	return nil
}

// FilterNames are the task's filters (filter_list's names, or "none"), in order.
func (in *Instances) FilterNames() []string { return in.filterNames() }

func (t *Task) scoreDoc(d *Document, p FilterPipeline) (map[string]any, any, error) {
	m := map[string]any{}
	switch t.OutputType {
	case Loglikelihood:
		q := d.Requests[0]
		for _, mc := range t.Metrics {
			switch mc.Metric {
			case "perplexity":
				m["perplexity"] = q.LogLikelihood
			case "acc":
				m["acc"] = b2f(q.IsGreedy)
			}
		}
		return m, []any{[]any{q.LogLikelihood, q.IsGreedy}}, nil
	case LoglikelihoodRolling:
		q := d.Requests[0]
		text := q.Continuation
		for _, mc := range t.Metrics {
			switch mc.Metric {
			case "word_perplexity":
				m["word_perplexity"] = [2]float64{q.LogLikelihood, float64(countWords(text))}
			case "byte_perplexity", "bits_per_byte":
				m[mc.Metric] = [2]float64{q.LogLikelihood, float64(len(text))}
			}
		}
		return m, q.LogLikelihood, nil
	case MultipleChoice:
		lls := make([]float64, len(d.Requests))
		filtered := make([]any, len(d.Requests))
		for i, q := range d.Requests {
			lls[i] = q.LogLikelihood
			filtered[i] = []any{q.LogLikelihood, q.IsGreedy}
		}
		var unconditional []float64 // acc_mutual_info's ("", choice) requests follow the choices'
		if n := len(d.Choices); t.hasMetric("acc_mutual_info") && len(lls) == 2*n {
			lls, unconditional = lls[:n], lls[n:]
		}
		pred, predNorm, predBytes := argmax(lls, nil), argmax(lls, charLengths(d.Choices)), argmax(lls, byteLengths(d.Choices))
		in := func(i int) float64 {
			for _, g := range d.Gold {
				if g == i {
					return 1
				}
			}
			return 0
		}
		for _, mc := range t.Metrics {
			switch mc.Metric {
			case "acc":
				m["acc"] = in(pred)
			case "acc_norm":
				m["acc_norm"] = in(predNorm)
			case "acc_bytes":
				m["acc_bytes"] = in(predBytes)
			case "acc_mutual_info":
				// process_results: argmax of log P(choice|ctx) - log P(choice), compared with
				// gold by ==, which numpy cannot do for several golds (it raises)
				if len(d.Gold) != 1 {
					return nil, nil, fmt.Errorf("document %d: acc_mutual_info with %d gold answers: lm-eval compares one", d.ID, len(d.Gold))
				}
				mi := make([]float64, len(lls))
				for i := range lls {
					mi[i] = lls[i] - unconditional[i]
				}
				m["acc_mutual_info"] = b2f(argmax(mi, nil) == d.Gold[0])
			case "exact_match":
				em := 0.0
				for _, g := range d.Gold {
					if d.Requests[g].IsGreedy {
						em = 1
					}
				}
				m["exact_match"] = em
			}
		}
		return m, filtered, nil
	case GenerateUntil:
		resp, err := applyFilters(p, d.Requests[0].Generated)
		if err != nil {
			return nil, nil, err
		}
		golds, err := t.generationGolds(d)
		if err != nil {
			return nil, nil, err
		}
		for _, mc := range t.Metrics {
			if mc.Metric == "tool_call_ast" {
				score, err := toolCallAST(resp, d.Target)
				if err != nil {
					return nil, nil, err
				}
				m["tool_call_ast"] = score
				continue
			}
			if mc.Metric != "exact_match" {
				continue
			}
			score := 0.0
			for _, g := range golds {
				if exactMatch(mc, resp, g) {
					score = 1
				}
			}
			m["exact_match"] = score
		}
		return m, resp, nil
	}
	return nil, nil, fmt.Errorf("output type %s", t.OutputType)
}

// generationGolds is the gold of a generate_until document: the indexed choice when the task
// has choices, each element of a list target, else str() of the target.
func (t *Task) generationGolds(d *Document) ([]string, error) {
	if d.Choices != nil {
		return []string{d.Choices[d.Target.(int64)]}, nil
	}
	if list, ok := d.Target.([]any); ok {
		out := make([]string, len(list))
		for i, e := range list {
			out[i] = pyStr(e)
		}
		return out, nil
	}
	return []string{pyStr(d.Target)}, nil
}

// applyFilters runs a filter pipeline on one response (HFLM gives one per request).
func applyFilters(p FilterPipeline, resp string) (string, error) {
	for _, s := range p.Steps {
		if s.Function != "regex" {
			continue // take_first of one response is that response
		}
		re, err := compilePythonRegex(s.Pattern)
		if err != nil {
			return "", err
		}
		resp = regexExtract(re, s, resp)
	}
	return resp, nil
}

// regexExtract is RegexFilter: the group_select-th match of re.findall (the first non-empty
// group when the pattern has several), stripped, or the fallback.
func regexExtract(re *regexp.Regexp, s FilterStep, resp string) string {
	matches := re.FindAllStringSubmatch(resp, -1)
	if len(matches) == 0 {
		return s.Fallback
	}
	i := s.GroupSelect
	if i < 0 {
		i += len(matches)
	}
	if i < 0 || i >= len(matches) {
		return s.Fallback // Python would raise IndexError
	}
	mt := matches[i]
	var v string
	switch {
	case len(mt) == 1:
		v = mt[0]
	case len(mt) == 2:
		v = mt[1]
	default:
		v = s.Fallback
		for _, g := range mt[1:] {
			if g != "" {
				v = g
				break
			}
		}
	}
	return strings.TrimFunc(v, pyIsSpace)
}

// exactMatch is exact_match_hf_evaluate for one prediction and reference.
func exactMatch(mc MetricConfig, pred, ref string) bool {
	for _, p := range mc.RegexesToIgnore {
		re, err := compilePythonRegex(p)
		if err != nil {
			continue // refused when the task was read
		}
		pred, ref = re.ReplaceAllString(pred, ""), re.ReplaceAllString(ref, "")
	}
	if mc.IgnoreCase {
		pred, ref = strings.ToLower(pred), strings.ToLower(ref)
	}
	drop := func(set string) func(string) string {
		return func(s string) string {
			return strings.Map(func(r rune) rune {
				if r < utf8.RuneSelf && strings.ContainsRune(set, r) {
					return -1
				}
				return r
			}, s)
		}
	}
	if mc.IgnorePunctuation {
		f := drop("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") // Python's string.punctuation
		pred, ref = f(pred), f(ref)
	}
	if mc.IgnoreNumbers {
		f := drop("0123456789")
		pred, ref = f(pred), f(ref)
	}
	return pred == ref
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func charLengths(choices []string) []float64 {
	out := make([]float64, len(choices))
	for i, c := range choices {
		out[i] = float64(utf8.RuneCountInString(c)) // Python's len of a str
	}
	return out
}

func byteLengths(choices []string) []float64 {
	out := make([]float64, len(choices))
	for i, c := range choices {
		out[i] = float64(len(c))
	}
	return out
}

// argmax is np.argmax of lls (divided by div when given): the first largest; NaN wins, as in
// NumPy.
func argmax(lls, div []float64) int {
	best := 0
	bv := math.Inf(-1)
	for i, v := range lls {
		if div != nil {
			v /= div[i]
		}
		if math.IsNaN(v) {
			return i
		}
		if v > bv || i == 0 {
			best, bv = i, v
		}
	}
	return best
}

// Result is one task's aggregated metrics under lm-eval's keys ("acc,none",
// "acc_stderr,none"), in the order written.
type Result struct {
	Keys   []string
	Values map[string]any // float64, or "N/A" for a standard error not computed
}

// BootstrapIters is lm-eval's default bootstrap_iters.
const BootstrapIters = 100000

// Aggregate returns the task's metrics as lm-eval's evaluator aggregates them: the metric's
// aggregation over the documents, and its standard error (mean_stderr for a mean, a bootstrap
// for perplexity, none for the weighted perplexities and bits per byte).
func (in *Instances) Aggregate() Result {
	r := Result{Values: map[string]any{}}
	set := func(k string, v any) {
		r.Keys = append(r.Keys, k)
		r.Values[k] = v
	}
	for _, name := range in.filterNames() {
		for _, mc := range in.Task.Metrics {
			var items []any
			for _, d := range in.Docs {
				if v, ok := d.Metrics[name][mc.Metric]; ok {
					items = append(items, v)
				}
			}
			if len(items) == 0 {
				continue
			}
			value, stderr := aggregate(mc.Aggregation, items)
			set(mc.Metric+","+name, value)
			if stderr == nil {
				set(mc.Metric+"_stderr,"+name, "N/A")
			} else {
				set(mc.Metric+"_stderr,"+name, *stderr)
			}
		}
	}
	return r
}

func (in *Instances) filterNames() []string {
	if len(in.Task.Filters) == 0 {
		return []string{noFilter}
	}
	names := make([]string, len(in.Task.Filters))
	for i, f := range in.Task.Filters {
		names[i] = f.Name
	}
	return names
}

func aggregate(aggregation string, items []any) (float64, *float64) {
	switch aggregation {
	case "mean":
		xs := floats(items)
		v := mean(xs)
		if len(xs) < 2 {
			return v, nil
		}
		s := sampleStddev(xs) / math.Sqrt(float64(len(xs)))
		return v, &s
	case "perplexity":
		xs := floats(items)
		v := perplexity(xs)
		if len(xs) < 2 {
			return v, nil
		}
		s := bootstrapStderr(perplexity, xs, BootstrapIters)
		return v, &s
	case "weighted_perplexity":
		return math.Exp(-weightedMean(items)), nil
	case "bits_per_byte":
		return -weightedMean(items) / math.Ln2, nil
	}
	return math.NaN(), nil
}

func floats(items []any) []float64 {
	out := make([]float64, len(items))
	for i, v := range items {
		out[i] = v.(float64)
	}
	return out
}

// mean sums in order, as Python's sum(arr) / len(arr).
func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func sampleStddev(xs []float64) float64 {
	mu := mean(xs)
	s := 0.0
	for _, x := range xs {
		s += (x - mu) * (x - mu)
	}
	return math.Sqrt(s / float64(len(xs)-1))
}

func perplexity(xs []float64) float64 { return math.Exp(-mean(xs)) }

func weightedMean(items []any) float64 {
	a, b := 0.0, 0.0
	for _, it := range items {
		p := it.([2]float64)
		a += p[0]
		b += p[1]
	}
	return a / b
}
