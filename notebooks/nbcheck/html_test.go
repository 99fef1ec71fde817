package main

import (
	"encoding/base64"
	"html"
	"net/url"
	"strings"
	"testing"
)

const drawnSVG = `<svg xmlns="http://www.w3.org/2000/svg" width="640" height="360"><title>a &amp; b</title><rect width="640" height="360" fill="white"/><line x1="0" y1="0" x2="9" y2="9"/><circle cx="3" cy="3" r="2"/><text x="1" y="1">tick</text></svg>`

func imgB64(svg string) string {
	return `<img class="octlm-figure" alt="x" src="data:image/svg+xml;base64,` + base64.StdEncoding.EncodeToString([]byte(svg)) + `">`
}

func TestCheckExportedHTML(t *testing.T) {
	tests := []struct {
		name    string
		page    string
		figures int
		probs   []string // substrings of the problems, in order
	}{
		{"figure as base64 data URI", "<p>x</p>" + imgB64(drawnSVG), 1, nil},
		{"figure as URL-escaped data URI", `<img src='data:image/svg+xml,` + html.EscapeString(url.PathEscape(drawnSVG)) + `'>`, 1, nil},
		{"viewBox gives the size", imgB64(strings.Replace(drawnSVG, `width="640" height="360"`, `viewBox="0 0 64 36"`, 1)), 1, nil},
		{"PNG and remote images are not SVG figures", `<img src="data:image/png;base64,iVBORw0KGgo="><img src="https://example.com/a.svg">`, 0, nil},
		{"what nbconvert 6.5 leaves of image/svg+xml", `<div class="output_svg"><svg width="100" height="50">hi</svg></div>`, 0, []string{"blank inline <svg>"}},
		{"inline SVG that draws is fine", `<div><svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"><rect width="9" height="9"/></svg></div>`, 0, nil},
		{"SVG written by a script is not markup", "<script>el.innerHTML = `<svg width=\"${w}\">` + body + `</svg>`;</script>", 0, nil},
		{"only the background", imgB64(`<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"><title>t</title><rect width="9" height="9"/><text>label</text></svg>`), 0, []string{`figure "t": 1 shapes: a blank figure`}},
		{"zero size", imgB64(`<svg xmlns="http://www.w3.org/2000/svg" width="0" height="0"><rect/><rect/></svg>`), 0, []string{"an empty figure"}},
		{"bad base64", `<img src="data:image/svg+xml;base64,@@@">`, 0, []string{"bad base64"}},
		{"not SVG", imgB64(`<html><rect/></html>`), 0, []string{"root element is <html>, want <svg>"}},
		{"cut short", imgB64(drawnSVG[:100]), 0, []string{"not well-formed XML"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			figs, probs := checkExportedHTML([]byte(tt.page))
			if len(figs) != tt.figures {
				t.Errorf("%d figures, want %d", len(figs), tt.figures)
			}
			if len(probs) != len(tt.probs) {
				t.Fatalf("got %d problems, want %d:\n%s", len(probs), len(tt.probs), problemsString(probs))
			}
			for i, want := range tt.probs {
				if !strings.Contains(probs[i].Msg, want) {
					t.Errorf("problem %d = %q, want it to contain %q", i, probs[i].Msg, want)
				}
			}
		})
	}
	figs, _ := checkExportedHTML([]byte(imgB64(drawnSVG)))
	if f := figs[0]; f.title != "a & b" || f.width != 640 || f.height != 360 || f.shapes != 3 || f.drawn != 4 {
		t.Errorf("parsed figure %+v, want title \"a & b\", 640x360, 3 shapes, 4 drawing elements", f)
	}
}
