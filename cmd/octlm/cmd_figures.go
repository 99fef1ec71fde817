package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/octlm/octlm/notebooks/figures"
	"github.com/octlm/octlm/parity"
)

func init() {
	register("figures", "write every notebook figure as SVG (and tables as Markdown) without Jupyter", func(args []string) error {
		return runFigures(args, os.Stdout, os.Stderr)
	})
}

// runFigures is `octlm figures`: the paths written to stdout, progress to stderr.
func runFigures(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("figures", flag.ContinueOnError)
	fs.SetOutput(stderr)
	modelFlag := fs.String("model", "", "checkpoint folder or Hugging Face name (default: the bundled tiny-qwen3)")
	referenceFlag := fs.String("reference", "", "reference folder for 02-rope and 04-parity (default: MODEL/reference when it exists)")
	backendFlag := fs.String("backend", "", "compute backend: go, xla:cpu, xla:cuda, onnx, with options after a comma (default: $GOMLX_BACKEND, else a PJRT plugin if found, else onnx if ONNX Runtime is found, else go)")
	outFlag := fs.String("out", "figures", "folder to write the figures into")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: octlm figures [--model DIR|HUB-NAME] [--reference DIR] [--backend NAME] [--out DIR]\n\n"+
			"Computes the figures of the notebooks (01-loading to 04-parity) and writes them into DIR:\n"+
			"NAME.svg for figures, NAME.md for tables, NAME.html for coloured-token text. Without a\n"+
			"reference folder, the wrong-pairing and parity figures are skipped. Exit status 1 when the\n"+
			"parity gate fails (the figures are still written), 2 on bad input.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *outFlag == "" {
		return usageError{"--out must name a folder"}
	}
	src, err := figures.Open(figures.Options{Model: *modelFlag, Reference: *referenceFlag, Backend: *backendFlag, Progress: stderr})
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
			return gateFailure{err}
		}
		return err
	}
	return nil
}
