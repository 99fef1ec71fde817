package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/octlm/octlm/internal/fileio"

	"github.com/octlm/octlm/figures"
	"github.com/octlm/octlm/parity"
)

func init() {
	register("figures", "write every notebook figure as SVG (and tables as Markdown) without Jupyter", func(args []string) error {
		return runFigures(args, os.Stdout, os.Stderr)
	})
}

// runFigures is `octlm figures`: the paths written to stdout, progress to stderr.
func runFigures(args []string, stdout, stderr io.Writer) error {
	return withOutputCheck(stdout, func(stdout io.Writer) error { return figuresCmd(args, stdout, stderr) })
}

func figuresCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("figures", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var mf modelFlags
	mf.registerBundled(fs)
	referenceFlag := fs.String("reference", "", "reference folder for 02-rope and 04-parity (default: MODEL/reference when it exists)")
	outFlag := fs.String("out", "octlm-figures", "folder to write the figures into")
	force := fs.Bool("force", false, "replace files of the same names in the --out folder")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "usage: octlm figures [--model DIR|HUB-NAME] [--reference DIR] [--backend NAME] [--out DIR] [--force]\n\n"+
			"Computes the figures of the notebooks (01-loading to 04-parity) and writes them into DIR:\n"+
			"NAME.svg for figures, NAME.md for tables, NAME.html for coloured-token text. Without a\n"+
			"reference folder, the wrong-pairing and parity figures are skipped. Exit status 1 when the\n"+
			"parity gate fails (the figures are still written), 2 on bad input. Files already in DIR\n"+
			"under the same names are replaced only with --force.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *outFlag == "" {
		return usageError{"--out must name a folder"}
	}
	// Fail before computing anything when the figures could not be written.
	if err := fileio.CheckWritableDir(*outFlag); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if !*force {
		if taken := existingFigures(*outFlag); len(taken) > 0 {
			return usageError{fmt.Sprintf("--out %s already holds figures (%s); give --force to replace them, or another --out", *outFlag, strings.Join(taken, ", "))}
		}
	}
	src, err := figures.Open(figures.Options{Model: mf.model, Reference: *referenceFlag, Backend: mf.backend, Progress: stderr})
	if err != nil {
		return err
	}
	defer src.Close()
	fmt.Fprintf(stderr, "figures of %s on %s\n", src.Label, src.Info.Name)
	tmp, err := fileio.ScratchDir("octlm-figures")
	if err != nil {
		return err
	}
	defer fileio.RemoveTemp(tmp)
	set, err := figures.All(src, tmp, func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) })
	if set != nil {
		if !*force {
			if taken := set.Existing(*outFlag); len(taken) > 0 {
				return usageError{fmt.Sprintf("--out %s already holds %s; give --force to replace them", *outFlag, strings.Join(taken, ", "))}
			}
		}
		paths, werr := set.Write(*outFlag)
		for _, p := range paths {
			fmt.Fprintln(stdout, p)
		}
		if werr != nil {
			return werr
		}
	}
	if err != nil {
		if errors.Is(err, parity.ErrFailed) {
			return checkFailure{err}
		}
		return err
	}
	return nil
}

// figureName is how the files figures writes are named: 01-header.svg, 04-parity.md.
var figureName = regexp.MustCompile(`^[0-9][0-9]-[a-z0-9-]+\.(svg|md|html)$`)

// existingFigures lists the files in dir named as figures writes them, so that a folder holding
// figures is refused before anything is computed.
func existingFigures(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if figureName.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	if len(names) > 4 {
		names = append(names[:4], fmt.Sprintf("and %d more", len(names)-4))
	}
	return names
}
