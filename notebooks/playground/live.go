package playground

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/gomlx/compute"
	"github.com/janpfeifer/gonb/gonbui"
	"github.com/janpfeifer/gonb/gonbui/dom"
	"github.com/janpfeifer/gonb/gonbui/widgets"
)

// ErrNoFrontEnd is Live's error when no notebook front end answered its widgets: the notebook runs
// headless (nbconvert --execute) or in a viewer without gonb's JavaScript.
var ErrNoFrontEnd = errors.New("playground: no notebook front end answered the widgets (a headless run?): the HTML playground works without a kernel")

// controls are Live's gonb widgets.
type controls struct {
	position, base *widgets.SliderBuilder
	width, pairing *widgets.SelectBuilder
}

// baseStep is the base slider's value for a base: 10^(4 + k/20) → k.
func baseStep(base float64) int {
	return int(math.Round((math.Log10(base) - 4) * basesPerDecade))
}

// Live runs the playground in a gonb cell: sliders for the position and the base (log scale) and
// selects for the head width and the pairing (gonb's widgets), and on every change the figure
// redrawn from numbers Go computes with octlm's own RoPE on backend (Compute). It returns after
// idle without a change, or ErrNoFrontEnd when no front end has answered within wait; its output
// is transient either way (gonb's widgets live only while the cell runs).
func Live(backend compute.Backend, s Settings, wait, idle time.Duration) error {
	if !gonbui.IsNotebook {
		return errors.New("playground: Live runs in a gonb notebook cell")
	}
	if err := s.Check(); err != nil {
		return err
	}
	uid := gonbui.UniqueId()
	display := "octlm_rope_live_display_" + uid
	root := "octlm_rope_live_" + uid
	ctl := root + "_controls"
	gonbui.UpdateHTML(display, fmt.Sprintf(`<div id="%s"><div id="%s" style="font-family:sans-serif;font-size:13px;display:grid;grid-template-columns:max-content 320px;gap:4px 10px;align-items:center;margin:6px 0"></div><div class="octlm-playground-figure"></div></div><script>%s
%s</script>`, root, ctl, ropeJS, uiJS))
	gonbui.Sync()

	ready := make(chan controls, 1)
	go func() {
		var c controls
		dom.Append(ctl, "<label>position</label>")
		c.position = widgets.Slider(0, MaxPosition, s.Position).AppendTo(ctl).Done()
		dom.Append(ctl, "<label>base (rope_theta), 10^(4 + k/20)</label>")
		c.base = widgets.Slider(0, 2*basesPerDecade, baseStep(s.Base)).AppendTo(ctl).Done()
		var names []string
		for _, w := range Widths {
			names = append(names, strconv.Itoa(w))
		}
		dom.Append(ctl, "<label>head width</label>")
		wi := 0
		for i, w := range Widths {
			if w == s.HeadDim {
				wi = i
			}
		}
		c.width = widgets.Select(names).SetDefault(wi).AppendTo(ctl).Done()
		dom.Append(ctl, "<label>pairing</label>")
		pi := 1
		if s.Split {
			pi = 0
		}
		c.pairing = widgets.Select([]string{"split halves: i with i+d/2 (Qwen3)", "neighbours: 2i with 2i+1 (classic)"}).SetDefault(pi).AppendTo(ctl).Done()
		ready <- c
	}()
	var c controls
	select {
	case c = <-ready:
	case <-time.After(wait):
		gonbui.UpdateHTML(display, "")
		gonbui.Sync()
		return ErrNoFrontEnd
	}

	draw := func() error {
		d, err := Compute(backend, s)
		if err != nil {
			return err
		}
		js, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("playground: %w", err)
		}
		dom.TransientJavascript(fmt.Sprintf("OctlmRopePlayground.draw(document.getElementById(%q), %s);", root, js))
		return nil
	}
	if err := draw(); err != nil {
		return err
	}
	pos, base := c.position.Listen().LatestOnly(), c.base.Listen().LatestOnly()
	width, pairing := c.width.Listen().LatestOnly(), c.pairing.Listen().LatestOnly()
	defer func() { pos.Close(); base.Close(); width.Close(); pairing.Close() }()
	timer := time.NewTimer(idle)
	defer timer.Stop()
	for {
		select {
		case v := <-pos.C:
			s.Position = min(max(v, 0), MaxPosition)
		case v := <-base.C:
			s.Base = math.Pow(10, 4+float64(min(max(v, 0), 2*basesPerDecade))/basesPerDecade)
		case v := <-width.C:
			s.HeadDim = Widths[min(max(v, 0), len(Widths)-1)]
		case v := <-pairing.C:
			s.Split = v == 0
		case <-timer.C:
			fmt.Printf("playground: no change for %s: stopped (run the cell again to go on)\n", idle)
			return nil
		}
		timer.Reset(idle)
		if err := draw(); err != nil {
			return err
		}
	}
}
