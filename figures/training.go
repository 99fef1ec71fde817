package figures

import (
	"fmt"
	"slices"

	"github.com/octlm/octlm/train"
)

// LossCurve draws a fine-tuning run's loss per step from its log rows (`octlm finetune --log`):
// the loss of each step and its exponential moving average (weight 0.1 on the newest step, as
// the progress line shows it), with the learning-rate range and the median speed in the note.
func LossCurve(rows []train.LogRow, label string) Figure {
	raw := series{Label: "loss of the step", Kind: pointSeries, Marker: 1.5}
	smooth := series{Label: "moving average (0.9)", Kind: stepSeries}
	var avg float64
	var speeds []float64
	lrLo, lrHi := 0.0, 0.0
	for i, r := range rows {
		if i == 0 {
			avg, lrLo, lrHi = r.Loss, r.LR, r.LR
		} else {
			avg = 0.9*avg + 0.1*r.Loss
		}
		raw.X, raw.Y = append(raw.X, float64(r.Step)), append(raw.Y, r.Loss)
		smooth.X, smooth.Y = append(smooth.X, float64(r.Step)), append(smooth.Y, avg)
		lrLo, lrHi = min(lrLo, r.LR), max(lrHi, r.LR)
		if r.TokensPerSecond > 0 {
			speeds = append(speeds, r.TokensPerSecond)
		}
	}
	note := fmt.Sprintf("%d steps; learning rate %s … %s", len(rows), shortNumber(lrLo), shortNumber(lrHi))
	if len(speeds) > 0 {
		slices.Sort(speeds)
		note += fmt.Sprintf("; median %s train tokens/s", shortNumber(speeds[len(speeds)/2]))
	}
	title := "Training loss: " + label
	c := chart{Title: title, Width: 720, Series: []series{raw, smooth}, X: axis{Label: "optimizer step", Tight: true},
		Y: axis{Label: "mean loss over the step's counted tokens"}, Note: note}
	return Figure{Name: "finetune-loss", Title: title, SVG: c.render()}
}
