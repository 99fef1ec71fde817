// Command nbcheck executes octlm's gonb notebooks headless and checks what they show.
//
// `jupyter nbconvert --execute` exits 0 when a gonb cell panics or exits non-zero (gonb reports that
// on stderr only), so nbcheck reads the executed notebook itself: an error output, a crash or an
// "exit status N" on a cell's stderr, or gonb's HTML error report fails the notebook. Each notebook
// NAME.ipynb also has NAME.expect beside it, stating the tables, figures and strings its executed
// outputs must hold (see expectation). Executed copies go to an output folder; committed notebooks
// carry no outputs, and nbcheck refuses one that does.
//
// It knows nothing of octlm's packages: it reads notebooks, runs Jupyter, and compares.
//
// Usage:
//
//	nbcheck run [-out DIR] [-cell-timeout D] [-timeout D] NOTEBOOK.ipynb...
//	nbcheck inspect [-expect FILE] EXECUTED.ipynb
//	nbcheck strip [-check] NOTEBOOK.ipynb...
//	nbcheck html [-figures N] PAGE.html...
//
// `run` also exports each executed notebook to HTML (NAME.html beside the executed copy), as a blog
// author would publish it, and checks that every figure survived: an <img> whose SVG data URI
// decodes to an SVG that draws something, and no inline <svg> left blank by the exporter's
// sanitiser.
//
// Exit status: 0 all good, 1 a notebook failed its checks, 2 bad usage or a file that cannot be read.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// errFailed marks a notebook that ran (or was read) and failed its checks: exit status 1.
var errFailed = errors.New("notebook checks failed")

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		usage()
		return 2
	}
	var err error
	switch args[0] {
	case "run":
		err = cmdRun(args[1:])
	case "inspect":
		err = cmdInspect(args[1:])
	case "strip":
		err = cmdStrip(args[1:])
	case "html":
		err = cmdHTML(args[1:])
	case "-h", "--help", "help":
		usage()
		return 0
	default:
		fmt.Fprintf(os.Stderr, "nbcheck: unknown command %q\n", args[0])
		usage()
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errFailed):
		fmt.Fprintf(os.Stderr, "nbcheck: FAIL: %v\n", err)
		return 1
	case errors.Is(err, flag.ErrHelp):
		return 0
	default:
		fmt.Fprintf(os.Stderr, "nbcheck: %v\n", err)
		return 2
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  nbcheck run [-out DIR] [-cell-timeout D] [-timeout D] NOTEBOOK.ipynb...
      execute each notebook with jupyter nbconvert (gonb kernel) into DIR and check it
  nbcheck inspect [-expect FILE] EXECUTED.ipynb
      check an already executed notebook
  nbcheck strip [-check] NOTEBOOK.ipynb...
      remove outputs in place (-check: only report notebooks that have some)
  nbcheck html [-figures N] PAGE.html...
      check pages exported with jupyter nbconvert --to html: every figure present and drawn
`)
}

func cmdRun(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	out := fs.String("out", "", "folder for executed notebooks and logs (default: a new temporary folder)")
	cellTimeout := fs.Duration("cell-timeout", 15*time.Minute, "longest a single cell may run")
	timeout := fs.Duration("timeout", 30*time.Minute, "longest a whole notebook may run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	paths := fs.Args()
	if len(paths) == 0 {
		return errors.New("run: no notebooks given")
	}
	if _, err := exec.LookPath("jupyter"); err != nil {
		return errors.New("run: jupyter not found on PATH: run bash docker/install.sh")
	}
	if *out == "" {
		dir, err := os.MkdirTemp("", "octlm-notebooks-")
		if err != nil {
			return err
		}
		*out = dir
	} else if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "nbcheck: executed notebooks and logs go to %s\n", abs)
	var failed []string
	for _, p := range paths {
		start := time.Now()
		fmt.Fprintf(os.Stderr, "nbcheck: === %s\n", p)
		s, err := runOne(p, abs, *cellTimeout, *timeout)
		took := time.Since(start).Round(time.Second)
		if err != nil {
			fmt.Fprintf(os.Stderr, "nbcheck: FAIL %s (%s)\n%v\n", p, took, err)
			failed = append(failed, filepath.Base(p))
			continue
		}
		fmt.Fprintf(os.Stderr, "nbcheck: ok   %s (%s; %s)\n", p, took, s)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: %d of %d notebooks: %s (executed copies and logs in %s)", errFailed, len(failed), len(paths), strings.Join(failed, ", "), abs)
	}
	fmt.Fprintf(os.Stderr, "nbcheck: %d notebooks passed\n", len(paths))
	return nil
}

// runOne checks, executes and inspects one notebook.
func runOne(path, outDir string, cellTimeout, timeout time.Duration) (outputStats, error) {
	nb, err := readNotebook(path)
	if err != nil {
		return outputStats{}, err
	}
	if probs := checkCommitted(nb); len(probs) > 0 {
		return outputStats{}, report(path, "as committed", probs)
	}
	exps, err := loadExpectations(path)
	if err != nil {
		return outputStats{}, err
	}
	name := strings.TrimSuffix(filepath.Base(path), ".ipynb")
	logPath := filepath.Join(outDir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return outputStats{}, err
	}
	defer logFile.Close()

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// --allow-errors: a failing cell does not stop nbconvert from writing the executed notebook, so
	// every failing cell is reported below with its output, and the copy can be opened in Jupyter.
	// At DEBUG level nbconvert logs each cell as it starts: cellProgress says so on stderr.
	cells := newCellProgress(logFile, os.Stderr, name, codeCells(nb))
	cmd := exec.CommandContext(ctx, "jupyter", "nbconvert", "--to", "notebook", "--execute", "--allow-errors",
		"--ExecutePreprocessor.kernel_name=gonb", "--log-level=DEBUG",
		fmt.Sprintf("--ExecutePreprocessor.timeout=%d", int(cellTimeout.Seconds())),
		"--output-dir", outDir, "--output", name+".ipynb", path)
	cmd.Stdout = logFile
	cmd.Stderr = cells
	killGroup(cmd) // the kernel and the cell programs go too
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	cells.Close()
	if ctx.Err() != nil {
		return outputStats{}, fmt.Errorf("%w: %s: still running after %s (-timeout); log: %s\n%s", errFailed, path, timeout, logPath, logExcerpt(logPath))
	}
	if err != nil {
		return outputStats{}, fmt.Errorf("%w: %s: jupyter nbconvert failed (%v); log: %s\n%s", errFailed, path, err, logPath, logExcerpt(logPath))
	}
	executed := filepath.Join(outDir, name+".ipynb")
	enb, err := readNotebook(executed)
	if err != nil {
		return outputStats{}, err
	}
	probs := append(checkExecuted(enb), checkExpectations(enb, exps)...)
	if len(probs) > 0 {
		return outputStats{}, report(path, "executed copy "+executed, probs)
	}
	st := stats(enb)

	// The page a blog author publishes: the executed copy exported to HTML, where every figure
	// must still be there and draw something.
	page := filepath.Join(outDir, name+".html")
	hcmd := exec.CommandContext(ctx, "jupyter", append(append([]string{"nbconvert", "--to", "html"}, htmlExportFlags...),
		"--output-dir", outDir, "--output", name+".html", executed)...)
	hcmd.Stdout = logFile
	hcmd.Stderr = logFile
	if err := hcmd.Run(); err != nil {
		return outputStats{}, fmt.Errorf("%w: %s: jupyter nbconvert --to html failed (%v); log: %s\n%s", errFailed, executed, err, logPath, logExcerpt(logPath))
	}
	if probs := checkPage(page, st.figures); len(probs) > 0 {
		return outputStats{}, report(path, "exported page "+page, probs)
	}
	return st, nil
}

// htmlExportFlags make the exported page load the exporter's own scripts from the web, as upstream
// nbconvert does: Debian's nbconvert points them at file:///usr/share/javascript/..., which a
// published page cannot reach (and which exists only with Debian's libjs-requirejs and
// libjs-mathjax installed).
var htmlExportFlags = []string{
	"--HTMLExporter.require_js_url=https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js",
	"--HTMLExporter.mathjax_url=https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/MathJax.js?config=TeX-AMS_CHTML-full,Safe",
}

// checkPage checks an exported HTML page: its figures (checkExportedHTML), and that it holds at
// least want of them (the notebook's figure outputs; -1: any number).
func checkPage(path string, want int) []problem {
	b, err := os.ReadFile(path)
	if err != nil {
		return []problem{{Msg: err.Error()}}
	}
	figs, probs := checkExportedHTML(b)
	if want >= 0 && len(figs) < want {
		probs = append(probs, problem{Msg: fmt.Sprintf("%d figures drawn in the page, the notebook shows %d: some did not survive export", len(figs), want)})
	}
	return probs
}

// loadExpectations reads NAME.expect beside NAME.ipynb.
func loadExpectations(path string) ([]expectation, error) {
	ep := strings.TrimSuffix(path, ".ipynb") + ".expect"
	f, err := os.Open(ep)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s has no expectations file %s: state the tables, figures and strings its outputs must hold", errFailed, path, ep)
		}
		return nil, err
	}
	defer f.Close()
	return parseExpectations(ep, f)
}

func report(path, what string, probs []problem) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s): %d problem(s)", path, what, len(probs))
	for _, p := range probs {
		b.WriteString("\n  - ")
		b.WriteString(strings.ReplaceAll(p.String(), "\n", "\n    "))
	}
	return fmt.Errorf("%w: %s", errFailed, b.String())
}

// logExcerpt returns the part of an nbconvert log that says what failed: from the cell execution
// error on, or else its last lines, without the kernel's klog lines.
func logExcerpt(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if isKlogLine(l) {
			continue
		}
		lines = append(lines, l)
	}
	from := -1
	for i, l := range lines {
		if strings.Contains(l, "CellExecutionError") || strings.Contains(l, "DeadKernelError") || strings.Contains(l, "CellTimeoutError") || strings.Contains(l, "NoSuchKernel") {
			from = i
		}
	}
	if from >= 0 {
		lines = lines[from:]
	}
	const max = 60
	if len(lines) > max {
		lines = lines[len(lines)-max:]
	}
	return "    | " + strings.Join(lines, "\n    | ")
}

// isKlogLine reports whether l is a klog line from the gonb kernel ("I1130 07:33:52.867 ...").
func isKlogLine(l string) bool {
	if len(l) < 6 || !strings.ContainsRune("IWEF", rune(l[0])) {
		return false
	}
	for _, c := range l[1:5] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return l[5] == ' '
}

func cmdInspect(args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	expect := fs.String("expect", "", "expectations file to check too")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("inspect: want one executed notebook")
	}
	path := fs.Arg(0)
	nb, err := readNotebook(path)
	if err != nil {
		return err
	}
	probs := checkExecuted(nb)
	if *expect != "" {
		f, err := os.Open(*expect)
		if err != nil {
			return err
		}
		exps, err := parseExpectations(*expect, f)
		f.Close()
		if err != nil {
			return err
		}
		probs = append(probs, checkExpectations(nb, exps)...)
	}
	if len(probs) > 0 {
		return report(path, "executed", probs)
	}
	fmt.Fprintf(os.Stderr, "nbcheck: ok %s (%s)\n", path, stats(nb))
	return nil
}

func cmdHTML(args []string) error {
	fs := flag.NewFlagSet("html", flag.ContinueOnError)
	want := fs.Int("figures", 1, "fewest figures each page must hold")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("html: no pages given")
	}
	var failed []string
	for _, p := range fs.Args() {
		if _, err := os.Stat(p); err != nil {
			return err
		}
		if probs := checkPage(p, *want); len(probs) > 0 {
			fmt.Fprintln(os.Stderr, report(p, "exported page", probs))
			failed = append(failed, p)
			continue
		}
		fmt.Fprintf(os.Stderr, "nbcheck: ok %s\n", p)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: %s", errFailed, strings.Join(failed, ", "))
	}
	return nil
}

func cmdStrip(args []string) error {
	fs := flag.NewFlagSet("strip", flag.ContinueOnError)
	check := fs.Bool("check", false, "only report notebooks with outputs; change nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("strip: no notebooks given")
	}
	var dirty []string
	for _, p := range fs.Args() {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out, changed, err := strip(p, b)
		if err != nil {
			return err
		}
		if !changed {
			continue
		}
		if *check {
			dirty = append(dirty, p)
			continue
		}
		if !bytes.Equal(out, b) {
			if err := os.WriteFile(p, out, 0o644); err != nil {
				return err
			}
		}
		fmt.Fprintf(os.Stderr, "nbcheck: stripped %s\n", p)
	}
	if len(dirty) > 0 {
		return fmt.Errorf("%w: notebooks with outputs (run: go run ./notebooks/nbcheck strip %s): %s", errFailed, strings.Join(dirty, " "), strings.Join(dirty, ", "))
	}
	return nil
}
