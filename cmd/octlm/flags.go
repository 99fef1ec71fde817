package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// parseFlags parses a command's flags, interspersed with its positional arguments in any order
// (`octlm inspect DIR --tensors`); "--" ends the flags. -h prints the command's usage (fs.Usage:
// each command sets one that starts with a "usage: octlm NAME" line and writes to fs.Output())
// to stdout and ends the command with errHelp (exit status 0). A bad flag is answered with one
// line naming the nearest flag ("did you mean --tensors?") and pointing to -h, not the whole
// flag list. Bad flags, and positional arguments other than the ones named, are usage errors; a
// name in brackets ("[PATH]") may be left out.
func parseFlags(fs *flag.FlagSet, args []string, positional ...string) error {
	usage := fs.Usage
	out := fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard) // the flag package would print the error and the whole usage
	rest, err := parseInterspersed(fs, args)
	fs.SetOutput(out)
	fs.Usage = usage
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stdout) // help asked for: `octlm NAME -h | less` shows it
			usage()
			fs.SetOutput(out)
			return errHelp
		}
		return usageError{fmt.Sprintf("%v%s (see 'octlm %s -h')", err, suggestFlag(fs, err), fs.Name())}
	}
	if err := checkPositional(fs.Name(), rest, positional); err != nil {
		return err
	}
	// fs.Args() is then the positional arguments, wherever they stood.
	return fs.Parse(append([]string{"--"}, rest...))
}

// parseInterspersed parses args with fs, taking every argument that is not a flag (nor a flag's
// value) as positional, wherever it stands, and every argument after "--" too.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		left := fs.Args()
		// The flag package stops at "--" (consuming it) or at the first non-flag argument.
		if consumed := len(args) - len(left); consumed > 0 && args[consumed-1] == "--" {
			return append(rest, left...), nil
		}
		if len(left) == 0 {
			return rest, nil
		}
		rest = append(rest, left[0])
		args = left[1:]
	}
}

// checkPositional checks the positional arguments of command name against the names it takes.
func checkPositional(name string, args, positional []string) error {
	required := 0
	for _, p := range positional {
		if !strings.HasPrefix(p, "[") {
			required++
		}
	}
	switch {
	case len(args) >= required && len(args) <= len(positional):
		return nil
	case len(positional) == 0:
		return usageError{fmt.Sprintf("unexpected arguments %q", args)}
	case len(positional) == 1 && required == 1:
		return usageError{fmt.Sprintf("%s takes exactly one %s, got %d", name, positional[0], len(args))}
	}
	return usageError{fmt.Sprintf("%s takes %s, got %d arguments", name, strings.Join(positional, " "), len(args))}
}

// suggestFlag names the flag of fs nearest to the undefined one err reports ("; did you mean
// --tensors?"), or "" when none is near: at most two edits away and less than half the name,
// or the only flag the name begins.
func suggestFlag(fs *flag.FlagSet, err error) string {
	given, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return ""
	}
	given = strings.TrimPrefix(given, "-")
	best, bestDist, prefixed, prefixes := "", len(given), "", 0
	fs.VisitAll(func(f *flag.Flag) {
		if len(f.Name) < 2 {
			return // -m, -p: suggest the long names
		}
		if strings.HasPrefix(f.Name, given) {
			prefixed, prefixes = f.Name, prefixes+1
		}
		if d := editDistance(given, f.Name); d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	switch {
	case best != "" && bestDist <= 2 && 2*bestDist < len(given):
		return "; did you mean --" + best + "?"
	case prefixes == 1 && len(given) >= 2:
		return "; did you mean --" + prefixed + "?"
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b (bytes: flag names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// pathArg is the one path a command reads, given as its positional argument or as --model
// (model): one of them, or both the same.
func pathArg(fs *flag.FlagSet, model, name string) (string, error) {
	switch {
	case fs.NArg() == 0 && model == "":
		return "", usageError{fmt.Sprintf("%s takes a %s (or --model %s)", fs.Name(), name, name)}
	case fs.NArg() == 0:
		return model, nil
	case model != "" && model != fs.Arg(0):
		return "", usageError{fmt.Sprintf("%s takes one %s: given %q and --model %q", fs.Name(), name, fs.Arg(0), model)}
	}
	return fs.Arg(0), nil
}
