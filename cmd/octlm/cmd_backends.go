package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gomlx/compute"
	"github.com/octlm/octlm/xla"
)

func init() {
	register("backends", "list compute backends and PJRT plugins; --install cpu|cuda|cuda12|cuda13 downloads one", func(args []string) error {
		return runBackends(args, os.Stdout, os.Stderr)
	})
}

// runBackends is `octlm backends`; a failed write to stdout fails it.
func runBackends(args []string, stdout, stderr io.Writer) error {
	return withOutputCheck(stdout, func(stdout io.Writer) error { return backends(args, stdout, stderr) })
}

func backends(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("backends", flag.ContinueOnError)
	fs.SetOutput(stderr)
	install := fs.String("install", "", "download a PJRT plugin into go-xla's install folder: cpu, cuda (= cuda13), cuda12 or cuda13 (needs network)")
	check := fs.Bool("check", true, "load each plugin found and run a float32 matmul check on it")
	backend := fs.String("backend", "", "open this backend (go, xla:cpu, xla:cuda, xla:/path/plugin.so, onnx, or \"auto\"), print what was loaded and check it")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "usage: octlm backends [--install cpu|cuda|cuda12|cuda13] [--check=false] [--backend NAME]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *install != "" && *backend != "" {
		return usageError{"--install and --backend are separate steps; give one"}
	}
	switch {
	case *install != "":
		return xla.Install(*install, stderr)
	case *backend != "":
		name := *backend
		if name == "auto" {
			name = ""
		}
		return openAndCheck(stdout, name)
	}
	return listBackends(stdout, xla.DefaultPlaces(), *check)
}

// openAndCheck opens one backend, prints what was loaded and runs xla.Check on it.
func openAndCheck(w io.Writer, name string) error {
	b, info, err := xla.Open(name)
	if err != nil {
		return err
	}
	defer b.Finalize()
	fmt.Fprintf(w, "backend:       %s\n", info.Name)
	fmt.Fprintf(w, "reason:        %s\n", info.Reason)
	switch {
	case info.ONNXVersion != "":
		fmt.Fprintf(w, "library:       %s (%s)\n", info.Plugin, info.Source)
		fmt.Fprintf(w, "ONNX Runtime:  %s\n", info.ONNXVersion)
	case info.Plugin != "":
		fmt.Fprintf(w, "plugin:        %s (%s)\n", info.Plugin, info.Source)
		fmt.Fprintf(w, "PJRT C API:    %s\n", info.PJRTVersion)
	}
	fmt.Fprintf(w, "description:   %s\n", b.Description())
	for _, l := range info.Preloaded {
		fmt.Fprintf(w, "preloaded:     %s\n", l)
	}
	for _, e := range info.Env {
		fmt.Fprintf(w, "set:           %s\n", e)
	}
	for _, warn := range info.Warnings {
		fmt.Fprintf(w, "warning:       %s\n", warn)
	}
	fmt.Fprintf(w, "exact float32: %v (TF32 %s)\n", info.ExactFloat32(), onOff(info.TF32))
	if err := xla.Check(b); err != nil {
		fmt.Fprintf(w, "check:         FAILED\n")
		return fmt.Errorf("%w: %v", errCheckFailed, err)
	}
	fmt.Fprintf(w, "check:         ok (128x256x128 float32 matmul exact)\n")
	return nil
}

// listBackends prints each backend, whether it is usable, its plugin, the automatic choice and every
// place searched. With check, each plugin found is loaded and checked (a CUDA plugin only with a GPU);
// the errors of those that fail follow the table.
func listBackends(w io.Writer, places xla.Places, check bool) error {
	plugins := places.Discover()
	var problems []string
	row := func(name, status, plugin string) {
		fmt.Fprintf(w, "%-9s %-36s %s\n", name, status, plugin)
	}
	status := func(name string, open func() (compute.Backend, xla.Info, error)) string {
		if !check {
			return "found"
		}
		b, info, err := open()
		if err != nil {
			problems = append(problems, err.Error())
			return fmt.Sprintf("fails to load (note %d)", len(problems))
		}
		defer b.Finalize()
		if err := xla.Check(b); err != nil {
			problems = append(problems, err.Error())
			return fmt.Sprintf("check fails (note %d)", len(problems))
		}
		s := "usable"
		if info.PJRTVersion != "" {
			s += ", PJRT " + info.PJRTVersion
		}
		if info.ExactFloat32() {
			s += ", exact float32"
		}
		return s
	}
	row("BACKEND", "STATUS", "PLUGIN")
	row(xla.Go, status(xla.Go, func() (compute.Backend, xla.Info, error) { return xla.Open(xla.Go) }), "(built in)")
	listed := map[string]bool{}
	for _, kind := range []string{"cpu", "cuda"} {
		found := false
		for _, pl := range plugins {
			if pl.Kind != kind {
				continue
			}
			found = true
			listed[pl.Path] = true
			st := "found; no NVIDIA GPU (/dev/nvidia*)"
			if kind != "cuda" || places.NvidiaGPU {
				st = status(pl.Backend(), func() (compute.Backend, xla.Info, error) { return xla.OpenPlugin(pl, "") })
			}
			row(pl.Backend(), st, fmt.Sprintf("%s (%s)", pl.Path, pl.Source))
		}
		if !found {
			row("xla:"+kind, "not found", "-")
		}
	}
	for _, pl := range plugins {
		if !listed[pl.Path] {
			row(pl.Backend(), "found; not used by octlm", fmt.Sprintf("%s (%s)", pl.Path, pl.Source))
		}
	}
	lib, skipped, onnxErr := places.FindONNX()
	switch {
	case onnxErr == nil:
		var version string
		st := status(xla.ONNX, func() (compute.Backend, xla.Info, error) {
			b, info, err := places.Open(xla.ONNX)
			version = info.ONNXVersion
			return b, info, err
		})
		if version != "" {
			st = "ONNX Runtime " + version + ", " + st
		}
		row(xla.ONNX, st, fmt.Sprintf("%s (%s)", lib.Path, lib.Source))
	case errors.Is(onnxErr, xla.ErrONNXNotFound) && len(skipped) > 0:
		row(xla.ONNX, fmt.Sprintf("found, unusable (note %d)", len(problems)+1), "-")
	case errors.Is(onnxErr, xla.ErrONNXNotFound):
		row(xla.ONNX, "not found", "-")
	default: // $ONNXRUNTIME_SHARED_LIBRARY_PATH names something unusable
		problems = append(problems, onnxErr.Error())
		row(xla.ONNX, fmt.Sprintf("unusable (note %d)", len(problems)), "$"+xla.SourceONNXEnv)
	}
	problems = append(problems, skipped...)
	for i, p := range problems {
		fmt.Fprintf(w, "\nnote %d: %s\n", i+1, printableText(p))
	}
	choice, why, autoErr := places.AutoName()
	if autoErr != nil {
		choice, why = "none", "the automatic choice fails: see the notes"
	}
	fmt.Fprintf(w, "\ndefault: %s (%s)\n", choice, printableText(why))
	if choice == xla.ONNX {
		fmt.Fprintf(w, "         for %s; every other job runs on go (docs/backends.md)\n", xla.ONNXRunsJobs())
	}
	if env := os.Getenv(xla.EnvBackend); strings.TrimSpace(env) != "" {
		fmt.Fprintf(w, "         overridden by $%s=%s\n", xla.EnvBackend, env)
	}
	fmt.Fprintln(w, "\nsearched, in order:")
	for _, line := range places.Searched() {
		fmt.Fprintf(w, "  %s\n", line)
	}
	fmt.Fprintln(w, "\nget a plugin: octlm backends --install cpu|cuda|cuda12|cuda13, pip install \"jax[cuda13]\", or set PJRT_PLUGIN_LIBRARY_PATH")
	fmt.Fprintf(w, "get ONNX Runtime: %s, or set %s\n", xla.ONNXInstallCommand, xla.SourceONNXEnv)
	if onnxErr != nil && !errors.Is(onnxErr, xla.ErrONNXNotFound) {
		return onnxErr // an explicit library path that cannot be used: bad input (exit status 2)
	}
	if check && len(problems) > 0 {
		return fmt.Errorf("%w: %d backend(s) found but not usable", errCheckFailed, len(problems))
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
