package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/octlm/octlm/internal/buildinfo"
	"github.com/octlm/octlm/xla"
)

func init() {
	register("version", "print the versions of octlm, Go, GoMLX, its backends and the PJRT plugins found", func(args []string) error {
		return runVersion(args, os.Stdout, os.Stderr)
	})
}

// versionModules are the dependencies whose versions decide what octlm computes and how fast.
var versionModules = []string{"github.com/gomlx/gomlx", "github.com/gomlx/compute", "github.com/gomlx/go-xla"}

func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	plugins := fs.Bool("plugins", true, "also list the PJRT plugins found on disk (found, not loaded)")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "usage: octlm version [--plugins=false]   (also: octlm --version)\n\n"+
			"Prints the module versions octlm was built with (from the binary's build information)\n"+
			"and the PJRT plugins found; 'octlm backends' loads and checks them.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	info := buildinfo.Read()
	if info == nil {
		return fmt.Errorf("this binary carries no build information")
	}
	writeVersions(stdout, info)
	if *plugins {
		found := xla.Discover()
		if len(found) == 0 {
			fmt.Fprintln(stdout, "pjrt plugins: none found (octlm backends --install cpu|cuda|cuda12|cuda13)")
		}
		for _, pl := range found {
			fmt.Fprintf(stdout, "pjrt plugin:  %s %s (%s)\n", pl.Backend(), pl.Path, pl.Source)
		}
	}
	return nil
}

// writeVersions prints octlm's version (with the VCS revision the build recorded), Go's and
// those of versionModules.
func writeVersions(w io.Writer, info *debug.BuildInfo) {
	main := info.Main.Version
	if main == "" {
		main = "(unknown)"
	}
	if rev, modified := buildinfo.Revision(info); rev != "" {
		dirty := ""
		if modified {
			dirty = ", modified"
		}
		main += fmt.Sprintf(" (commit %.12s%s)", rev, dirty)
	}
	fmt.Fprintf(w, "octlm:        %s %s\n", info.Main.Path, main)
	fmt.Fprintf(w, "go:           %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, path := range versionModules {
		v := "(not linked)"
		if m := buildinfo.Module(info, path); m != nil {
			v = m.Version
			if m.Replace != nil {
				v += " => " + m.Replace.Path + " " + m.Replace.Version
			}
		}
		fmt.Fprintf(w, "%-13s %s %s\n", path[len("github.com/gomlx/"):]+":", path, v)
	}
}
