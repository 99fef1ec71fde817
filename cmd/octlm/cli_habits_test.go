package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestInterspersedFlags: flags may follow, precede or surround the positional arguments;
// "--" makes everything after it positional; too many or too few positional arguments are
// usage errors.
func TestInterspersedFlags(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		positional []string
		tensors    bool
		out        string
		rest       []string
		err        string // "" for none
	}{
		{"flag after the path", []string{"DIR", "--tensors"}, []string{"PATH"}, true, "", []string{"DIR"}, ""},
		{"flags on both sides", []string{"--out", "f", "DIR", "--tensors"}, []string{"PATH"}, true, "f", []string{"DIR"}, ""},
		{"flag value after the path", []string{"DIR", "--out", "f"}, []string{"PATH"}, false, "f", []string{"DIR"}, ""},
		{"after --", []string{"--tensors", "--", "-DIR"}, []string{"PATH"}, true, "", []string{"-DIR"}, ""},
		{"optional path left out", []string{"--tensors"}, []string{"[PATH]"}, true, "", nil, ""},
		{"two paths", []string{"A", "--tensors", "B"}, []string{"PATH"}, true, "", nil, "takes exactly one PATH, got 2"},
		{"no path", []string{"--tensors"}, []string{"PATH"}, true, "", nil, "takes exactly one PATH, got 0"},
		{"none taken", []string{"A"}, nil, false, "", nil, `unexpected arguments ["A"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			tensors := fs.Bool("tensors", false, "")
			out := fs.String("out", "", "")
			err := parseFlags(fs, tt.args, tt.positional...)
			if tt.err != "" {
				var ue usageError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want a usage error saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *tensors != tt.tensors || *out != tt.out || !slices.Equal(fs.Args(), tt.rest) {
				t.Errorf("--tensors %v, --out %q, args %q; want %v, %q, %q", *tensors, *out, fs.Args(), tt.tensors, tt.out, tt.rest)
			}
		})
	}
}

// TestModelOrPath: inspect and manifest read their folder as the positional argument or as
// --model (the README's `inspect --model DIR`), with flags before or after it.
func TestModelOrPath(t *testing.T) {
	tiny := testdata("tiny-qwen3")
	tests := []struct {
		name string
		run  func(args []string, stdout, stderr io.Writer) error
		args []string
		want string // on stdout; "" for a usage error
		err  string
	}{
		{"inspect PATH", runInspect, []string{tiny}, "unique params:", ""},
		{"inspect --model PATH", runInspect, []string{"--model", tiny}, "unique params:", ""},
		{"inspect PATH --tensors", runInspect, []string{tiny, "--tensors"}, "model.layers.1.mlp.down_proj.weight", ""},
		{"inspect PATH --model PATH", runInspect, []string{tiny, "--model", tiny}, "unique params:", ""},
		{"inspect two different paths", runInspect, []string{"--model", tiny, testdata("tiny-qwen3-mha")}, "", "takes one PATH"},
		{"inspect nothing", runInspect, nil, "", "inspect takes a PATH (or --model PATH)"},
		{"manifest DIR --verify", runManifest, []string{tiny, "--verify"}, "", "no manifest applies"},
		{"manifest --model DIR --verify", runManifest, []string{"--verify", "--model", tiny}, "", "no manifest applies"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := tt.run(tt.args, &stdout, &stderr)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.want) {
				t.Errorf("stdout lacks %q:\n%s", tt.want, stdout.String())
			}
		})
	}
}

// TestHelpAndUsageStreams: help asked for goes to stdout with exit 0; a usage error to stderr
// with exit 2; a mistyped flag or command is answered with the nearest name.
func TestHelpAndUsageStreams(t *testing.T) {
	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string // substrings; "" for nothing expected there
	}{
		{"octlm -h", []string{"-h"}, 0, "usage: octlm <command>", ""},
		{"octlm help", []string{"help"}, 0, "usage: octlm <command>", ""},
		{"octlm alone", nil, 2, "", "usage: octlm <command>"},
		{"inspect -h", []string{"inspect", "-h"}, 0, "usage: octlm inspect", ""},
		{"synth -h lists Qwen3.5's shapes", []string{"synth", "-h"}, 0, "qwen3-8b|qwen3.5-0.8b|qwen3.5-2b|qwen3.5-4b|qwen3.5-9b]", ""},
		{"a mistyped flag", []string{"inspect", "--tensor", "x"}, 2, "", "flag provided but not defined: -tensor; did you mean --tensors? (see 'octlm inspect -h')"},
		{"a mistyped command", []string{"inspct"}, 2, "", `unknown command "inspct"; did you mean inspect?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runOctlm(t, "", tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			for _, c := range []struct{ stream, got, want string }{{"stdout", stdout, tt.stdout}, {"stderr", stderr, tt.stderr}} {
				if c.want == "" && c.got != "" || !strings.Contains(c.got, c.want) {
					t.Errorf("%s %q, want %q", c.stream, c.got, c.want)
				}
			}
		})
	}
}

// TestSuggestFlag: the nearest flag is named when it is near (a letter missing, swapped or
// extra, or a unique prefix), never for a name far from every flag.
func TestSuggestFlag(t *testing.T) {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	for _, name := range []string{"tensors", "json", "offline", "model", "m"} {
		fs.Bool(name, false, "")
	}
	tests := []struct{ given, want string }{
		{"tensor", "tensors"},
		{"tensros", "tensors"},
		{"jsn", "json"},
		{"offlin", "offline"},
		{"mod", "model"},
		{"no-such-flag", ""},
		{"x", ""},
	}
	for _, tt := range tests {
		t.Run(tt.given, func(t *testing.T) {
			got := suggestFlag(fs, fmt.Errorf("flag provided but not defined: -%s", tt.given))
			want := ""
			if tt.want != "" {
				want = "; did you mean --" + tt.want + "?"
			}
			if got != want {
				t.Errorf("suggestFlag(-%s) = %q, want %q", tt.given, got, want)
			}
		})
	}
}

// TestErrorLine: a command's error line names the command once: package octlm's own "octlm: "
// prefix, or a repeated command prefix, is dropped; other packages' names stay.
func TestErrorLine(t *testing.T) {
	tests := []struct{ msg, want string }{
		{"octlm: a prompt of 1 tokens plus 100000 new tokens exceeds the context length 40960 by 59041",
			"octlm generate: a prompt of 1 tokens plus 100000 new tokens exceeds the context length 40960 by 59041"},
		{"octlm generate: --max-new-tokens must be at least 1", "octlm generate: --max-new-tokens must be at least 1"},
		{"xla: unknown backend \"tpu\"", "octlm generate: xla: unknown backend \"tpu\""},
		{"loading d: octlm: bad", "octlm generate: loading d: octlm: bad"},
		{"a \x1b[31mred\x1b[0m name", "octlm generate: a \\x1b[31mred\\x1b[0m name"},
	}
	for _, tt := range tests {
		if got := errorLine("generate", errors.New(tt.msg)); got != tt.want {
			t.Errorf("errorLine(%q) = %q, want %q", tt.msg, got, tt.want)
		}
	}
}

// TestErrorPrefixOnce: a library error from package octlm reaches the terminal with the command's
// prefix only (it used to read "octlm generate: octlm: a prompt of …").
func TestErrorPrefixOnce(t *testing.T) {
	_, stderr, code := runOctlm(t, "", "generate", "-m", testdata("tiny-qwen3"), "--prompt-ids", "1", "-n", "100000")
	if code != 2 || !strings.Contains(stderr, "octlm generate: a prompt of 1 tokens plus 100000 new tokens exceeds the context length") ||
		strings.Contains(stderr, "octlm: a prompt") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}
