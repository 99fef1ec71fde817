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

// parseFlags parses a command's flags. -h prints the command's usage (fs.Usage: each command
// sets one that starts with a "usage: octlm NAME" line) and ends the command with errHelp. A
// bad flag is answered with one line pointing to -h, not the whole flag list. Bad flags, and
// positional arguments other than the ones named, are usage errors.
func parseFlags(fs *flag.FlagSet, args []string, positional ...string) error {
	usage := fs.Usage
	out := fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard) // the flag package would print the error and the whole usage
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return errHelp
		}
		return usageError{fmt.Sprintf("%v (see 'octlm %s -h')", err, fs.Name())}
	}
	switch {
	case fs.NArg() == len(positional):
		return nil
	case len(positional) == 0:
		return usageError{fmt.Sprintf("unexpected arguments %q", fs.Args())}
	}
	return usageError{fmt.Sprintf("%s takes exactly one %s", fs.Name(), strings.Join(positional, " "))}
}

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
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage()
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" || args[0] == "-v" {
		args[0] = "version"
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "octlm: unknown command %q\n\n", args[0])
		printUsage()
		return 2
	}
	warnWithoutSIMD()
	stopSignals := exitOnSignals(args[0])
	defer stopSignals()
	if err := cmd.run(args[1:]); err != nil && !errors.Is(err, errHelp) {
		// Errors can quote what a file holds: escape what would drive the terminal.
		fmt.Fprintf(os.Stderr, "octlm %s: %s\n", args[0], printableText(err.Error()))
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

func printUsage() {
	fmt.Fprintln(os.Stderr, "usage: octlm <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(os.Stderr, "\nRun 'octlm <command> -h' for a command's flags.")
}
