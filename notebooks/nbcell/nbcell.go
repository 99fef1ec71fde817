// Package nbcell is the helper cell every octlm notebook used to declare: end a cell on an
// error, open the notebook's checkpoint, and show figures and tables from package figures. A
// notebook's first Go cell binds these names (must, source, show, table, html) and every later
// cell calls them.
//
// It knows nothing of what a figure shows (package figures) or of how HTML reaches Jupyter
// (package nbui).
package nbcell

import (
	"fmt"
	"io"
	"os"

	"github.com/octlm/octlm/figures"
	"github.com/octlm/octlm/notebooks/nbui"
)

// exit and stderr are os.Exit and os.Stderr; tests replace them.
var (
	exit             = os.Exit
	stderr io.Writer = os.Stderr
)

// Must ends the cell on an error: the message goes to stderr and the cell's program exits with
// status 1, which nbcheck (and CI) reports as a failure.
func Must(err error) {
	if err != nil {
		fmt.Fprintln(stderr, err)
		exit(1)
	}
}

// Source opens $OCTLM_MODEL (a checkpoint folder or a Hub name), else the bundled tiny-qwen3, on
// the backend $GOMLX_BACKEND names (else the best one found); see figures.OpenEnv.
func Source() *figures.Source {
	src, err := figures.OpenEnv()
	Must(err)
	return src
}

// Show displays a figure; like every display of nbui it waits until the kernel has it.
func Show(f figures.Figure) { nbui.SVG(string(f.SVG)) }

// Table displays a table.
func Table(t figures.Table) { nbui.Table(t.Caption, t.Header, t.Rows) }

// HTML displays an HTML fragment.
func HTML(fragment string) { nbui.HTML(fragment) }
