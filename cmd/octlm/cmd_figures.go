package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
		fmt.Fprintln(stderr, "usage: octlm figures [--model DIR|HUB-NAME] [--reference DIR] [--backend NAME] [--out DIR] [--force]\n\n"+
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
	src, err := figures.Open(figures.Options{Model: mf.model, Reference: *referenceFlag, Backend: mf.backend, Progress: stderr})
	if err != nil {
		return err
	}
	defer src.Close()
	fmt.Fprintf(stderr, "figures of %s on %s\n", src.Label, src.Info.Name)
	tmp, err := os.MkdirTemp("", "octlm-figures-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
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
