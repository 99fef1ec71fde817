package figures

import (
	"strings"
	"testing"

	"github.com/octlm/octlm/train"
)

func TestLossCurve(t *testing.T) {
	rows := []train.LogRow{{Step: 1, Loss: 3, LR: 0, TokensPerSecond: 10}, {Step: 2, Loss: 2, LR: 1e-3, TokensPerSecond: 30}, {Step: 3, Loss: 1, LR: 5e-4, TokensPerSecond: 20}}
	f := LossCurve(rows, "run <1>")
	svg := string(f.SVG)
	for _, want := range []string{"<svg", "Training loss: run &lt;1&gt;", "3 steps", "median 20 train tokens/s"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the figure lacks %q", want)
		}
	}
}
