package xla

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Backend options are checked here, before the backend is made: the libraries behind them
// accept values octlm must not pass on (gobackend reads a negative parallelism as unlimited,
// ONNX Runtime tries to start as many threads as asked), and skip empty ones silently.

// MaxThreads bounds every thread or worker count a backend option sets.
const MaxThreads = 1024

// option is one option a backend takes: a bare flag ("ops_sequential") or key=value.
type option struct {
	names []string // the name, then its aliases
	// check validates the value; nil for a bare flag, which takes none.
	check func(val string) error
	// refused, when set, says why octlm does not pass the option on.
	refused string
}

// withOption is opts (a backend's comma-separated options) with option added, and reason with
// "; option (why)": an option octlm adds by default, said on the backend line.
func withOption(opts, reason, option, why string) (newOpts, newReason string) {
	if opts != "" {
		opts += ","
	}
	return opts + option, reason + "; " + option + " (" + why + ")"
}

// intIn checks a whole number in [lo, hi].
func intIn(lo, hi int) func(string) error {
	return func(val string) error {
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("must be a whole number from %d to %d, got %q", lo, hi, val)
		}
		return nil
	}
}

// oneOf checks a value from a list (case-insensitive).
func oneOf(values ...string) func(string) error {
	return func(val string) error {
		if !slices.Contains(values, strings.ToLower(strings.TrimSpace(val))) {
			return fmt.Errorf("must be one of %s, got %q", strings.Join(values, ", "), val)
		}
		return nil
	}
}

var isBool = oneOf("true", "false", "1", "0", "t", "f")

// goOptions are the pure-Go backend's options (gobackend.New), with octlm's ranges.
var goOptions = []option{
	{names: []string{"parallelism"}, check: intIn(1, MaxThreads)},
	{names: []string{"num_executors"}, check: intIn(1, MaxThreads)},
	{names: []string{"ops_sequential"}},
	{names: []string{"ops_parallel"}},
	{names: []string{"dependency_order"}},
	{names: []string{"creation_order"}},
	{names: []string{"no_ops"}, refused: "it skips every computation, so every logit would be wrong"},
}

// onnxOptions are compute-onnx's options that make sense for octlm's ONNX Runtime on the CPU.
var onnxOptions = []option{
	{names: []string{"intra_op_num_threads", "intraopnumthreads", "intra_threads"}, check: intIn(0, MaxThreads)},
	{names: []string{"inter_op_num_threads", "interopnumthreads", "inter_threads"}, check: intIn(0, MaxThreads)},
	{names: []string{"session_clones", "sessionclones", "clones", "session_pool", "sessionpool"}, check: intIn(1, 64)},
	{names: []string{"execution_mode", "executionmode"}, check: oneOf("parallel", "sequential")},
	{names: []string{"graph_optimization_level", "graphoptimizationlevel", "opt_level", "optlevel"},
		check: oneOf("0", "1", "2", "3", "99", "disable_all", "disable", "none", "basic", "extended", "layout", "all", "enable_all")},
	{names: []string{"cpu_mem_arena", "cpumemarena"}, check: isBool},
	{names: []string{"mem_pattern", "mempattern"}, check: isBool},
	{names: []string{"log"}, check: intIn(0, 4)},
	{names: []string{"cpu"}},
	{names: []string{"parallel"}},
	{names: []string{"sequential"}},
	{names: []string{"no_cpu_mem_arena"}},
	{names: []string{"no_mem_pattern"}},
	{names: []string{"cuda", "gpu", "migraphx", "rocm", "amd"}, refused: "octlm's \"onnx\" backend is ONNX Runtime on the CPU"},
}

// checkOptions checks the comma-separated options of backend against known: every one
// known, its value in range, none empty ("go,,"). Keys are matched case-insensitively when
// fold is set (compute-onnx lowercases them).
func checkOptions(backend, opts string, known []option, fold bool) error {
	var names []string
	for _, o := range known {
		if o.refused != "" {
			continue
		}
		n := o.names[0]
		if o.check != nil {
			n += "=…"
		}
		names = append(names, n)
	}
	valid := fmt.Sprintf("(options of %q: %s)", backend, strings.Join(names, ", "))
	for i, part := range strings.Split(opts, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return fmt.Errorf("xla: backend %q: option %d of %q is empty %s", backend, i+1, opts, valid)
		}
		key, val, hasVal := strings.Cut(part, "=")
		key = strings.TrimSpace(key)
		if fold {
			key = strings.ToLower(key)
		}
		i := slices.IndexFunc(known, func(o option) bool { return slices.Contains(o.names, key) })
		if i < 0 {
			if backend == ONNX && strings.ContainsAny(part, `/\`) {
				return fmt.Errorf("xla: backend %q: option %q looks like a library path; set $%s to choose the library", backend, part, SourceONNXEnv)
			}
			return fmt.Errorf("xla: backend %q: unknown option %q %s", backend, key, valid)
		}
		o := known[i]
		switch {
		case o.refused != "":
			return fmt.Errorf("xla: backend %q: option %q is not allowed: %s", backend, key, o.refused)
		case o.check == nil && hasVal:
			return fmt.Errorf("xla: backend %q: option %q takes no value, got %q", backend, key, val)
		case o.check != nil && !hasVal:
			return fmt.Errorf("xla: backend %q: option %q needs a value (%s=…)", backend, key, key)
		case o.check != nil:
			if err := o.check(val); err != nil {
				return fmt.Errorf("xla: backend %q: option %s %w", backend, key, err)
			}
		}
	}
	return nil
}

// checkEmptyOptions refuses empty options ("xla:cpu,,") for the backends whose options octlm
// leaves to the library (go-xla's).
func checkEmptyOptions(backend, opts string) error {
	for i, part := range strings.Split(opts, ",") {
		if strings.TrimSpace(part) == "" {
			return fmt.Errorf("xla: backend %q: option %d of %q is empty", backend, i+1, opts)
		}
	}
	return nil
}
