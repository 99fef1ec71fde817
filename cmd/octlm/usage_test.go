package main

import (
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/octlm/octlm/internal/hugepage"
)

// TestEveryCommandUsage: every command answers -h with its own usage line on stdout (never Go's
// default "Usage of NAME:"; nothing on stderr, so `octlm NAME -h | less` shows it) and exit 0,
// and an unknown flag with one line on stderr that points to -h (not the whole flag list) and
// exit 2.
func TestEveryCommandUsage(t *testing.T) {
	var names []string
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			stdout, stderr, code := runOctlm(t, "", name, "-h")
			if code != 0 || !strings.HasPrefix(stdout, "usage: octlm "+name) || strings.Contains(stdout, "Usage of") || stderr != "" {
				t.Errorf("%s -h: exit %d, stdout:\n%s\nstderr:\n%s", name, code, stdout, stderr)
			}
			_, stderr, code = runOctlm(t, "", name, "--no-such-flag")
			want := "octlm " + name + ": flag provided but not defined: -no-such-flag (see 'octlm " + name + " -h')\n"
			if code != 2 || !strings.HasSuffix(stderr, want) || strings.Count(stderr, "\n") > 2 {
				t.Errorf("%s --no-such-flag: exit %d, stderr:\n%s\nwant exit 2 and %q", name, code, stderr, want)
			}
		})
	}
}

// TestBackendsInstallHelp: the help names every plugin --install accepts.
func TestBackendsInstallHelp(t *testing.T) {
	stdout, _, _ := runOctlm(t, "", "backends", "-h")
	if !strings.Contains(stdout, "--install cpu|cuda|cuda12|cuda13") {
		t.Errorf("backends -h:\n%s", stdout)
	}
}

// TestVersion: octlm version and octlm --version print the module versions octlm was built with.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version", "--plugins=false"}, {"--version"}} {
		stdout, stderr, code := runOctlm(t, "", args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr)
		}
		for _, re := range []string{`(?m)^octlm: +github.com/octlm/octlm `, `(?m)^go: +go1\.`,
			`(?m)^gomlx: +github.com/gomlx/gomlx v\d+\.\d+\.\d+`, `(?m)^compute: +github.com/gomlx/compute v\d`, `(?m)^go-xla: +github.com/gomlx/go-xla v\d`} {
			if !regexp.MustCompile(re).MatchString(stdout) {
				t.Errorf("%v: output lacks %s:\n%s", args, re, stdout)
			}
		}
	}
}

// TestHugePagesEnvironment: a value of $OCTLM_HUGE_PAGES that is neither on nor off stops every
// command before it starts (exit 2); off and on run it.
func TestHugePagesEnvironment(t *testing.T) {
	for _, tt := range []struct {
		value string
		code  int
	}{{"soon", 2}, {"off", 0}, {"on", 0}} {
		t.Run(tt.value, func(t *testing.T) {
			t.Setenv(hugepage.EnvVar, tt.value)
			if code := run([]string{"version"}); code != tt.code {
				t.Errorf("octlm version with %s=%s: exit %d, want %d", hugepage.EnvVar, tt.value, code, tt.code)
			}
		})
	}
}
