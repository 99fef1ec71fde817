// Command octlm is the headless front door to the octlm packages: parity, generation,
// inspection, benchmarks and checkpoint tools. Flags in, library calls, exit codes out.
//
// Exit codes: 0 success, 1 a check failed (parity, non-finite logits), 2 bad input, usage or
// another error, 128 + the signal's number when a signal ended it (130 for Ctrl-C, 143 for
// SIGTERM, 129 for SIGHUP), its unfinished outputs removed (signals.go).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/octlm/octlm/internal/hugepage"
)

// command is one subcommand of octlm.
type command struct {
	summary string
	run     func(args []string) error
}

// commands is filled by the init functions of the files beside this one.
var commands = map[string]command{}

// register adds a subcommand; each cmd_*.go file calls it from init.
func register(name, summary string, run func(args []string) error) {
	commands[name] = command{summary: summary, run: run}
}

// errCheckFailed marks a check that ran and failed (exit status 1), as opposed to bad input (2).
var errCheckFailed = errors.New("check failed")

// errHelp ends a command after -h printed its usage (exit status 0).
var errHelp = errors.New("help shown")

// errInterrupted ends a command stopped by Ctrl-C after it printed what it had (exit status 130,
// the shell's code for SIGINT; an interruption carries the signal and its own code).
var errInterrupted = errors.New("interrupted")

// checkFailure is a check that ran and failed (a generation step, the parity gate): its message
// is err's, and it matches errCheckFailed (exit status 1) as well as err (parity.ErrFailed).
type checkFailure struct{ err error }

func (c checkFailure) Error() string   { return c.err.Error() }
func (c checkFailure) Unwrap() []error { return []error{c.err, errCheckFailed} }

// usageError marks bad flags or arguments (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// gcPercent is the garbage collector's target for the octlm command (unless $GOGC is set): on
// the pure-Go backend the resident weights are Go heap, and Go's default of 100 lets garbage
// (a few MB per decoded token) grow as large as the weights before a collection: peak RSS 1.41×
// the weights on a full-size Qwen3-0.6B in float32, 2.2× in bfloat16; with 2, 1.07× and 1.20×
// at the same speed. Weights hold no pointers, so a collection costs little.
const gcPercent = 2

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	os.Exit(run(os.Args[1:]))
}

// alias makes short another name of the flag long, for the habits of llama.cpp and Ollama
// users (-m, -p, -n).
func alias(fs *flag.FlagSet, short, long string) {
	fs.Var(fs.Lookup(long).Value, short, "short for --"+long)
}

func run(args []string) int {
	if len(args) == 0 {
		printUsage(os.Stderr) // a usage error
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(os.Stdout) // help asked for
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" || args[0] == "-v" {
		args[0] = "version"
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "octlm: unknown command %q%s\n\n", args[0], suggestCommand(args[0]))
		printUsage(os.Stderr)
		return 2
	}
	if err := hugepage.CheckEnv(); err != nil {
		fmt.Fprintln(os.Stderr, errorLine(args[0], err))
		return 2
	}
	warnWithoutSIMD()
	stopSignals := exitOnSignals(args[0])
	defer stopSignals()
	if err := cmd.run(args[1:]); err != nil && !errors.Is(err, errHelp) {
		// Errors can quote what a file holds: escape what would drive the terminal.
		fmt.Fprintln(os.Stderr, errorLine(args[0], err))
		var sig interruption
		switch {
		case errors.As(err, &sig):
			return signalExitCode(sig.sig)
		case errors.Is(err, errInterrupted):
			return 130
		case errors.Is(err, errCheckFailed):
			return 1
		}
		return 2
	}
	return 0
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: octlm <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-10s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w, "\nRun 'octlm <command> -h' for a command's flags.")
}

// errorLine is the line a failed command ends with: "octlm NAME: message", the message escaped
// (errors can quote what a file holds). Library errors start with their package's name
// ("octlm: a prompt of …", "xla: backend …"); the leading "octlm: " of package octlm's, or a
// repeated "octlm NAME: ", is dropped, since the line already says so.
func errorLine(name string, err error) string {
	msg := err.Error()
	for _, prefix := range []string{"octlm " + name + ": ", "octlm: "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	return "octlm " + name + ": " + printableText(msg)
}

// suggestCommand names the command nearest to an unknown one ("; did you mean inspect?").
func suggestCommand(name string) string {
	best, bestDist := "", len(name)
	for c := range commands {
		if d := editDistance(name, c); d < bestDist || d == bestDist && c < best {
			best, bestDist = c, d
		}
	}
	if best != "" && bestDist <= 2 && 2*bestDist < len(name) {
		return "; did you mean " + best + "?"
	}
	return ""
}
