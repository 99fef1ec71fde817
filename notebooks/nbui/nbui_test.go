package nbui

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestTableHTML(t *testing.T) {
	tests := []struct {
		name    string
		caption string
		header  []string
		rows    [][]string
		want    string
	}{
		{
			name:   "number column right-aligned, text column left-aligned and escaped",
			header: []string{"case", "max |Δlogit|"},
			rows:   [][]string{{"<story>", "3.6e-05"}, {"tool & call", "99.5%"}},
			want: `<table><thead><tr><th style="text-align:left">case</th><th style="text-align:right">max |Δlogit|</th></tr></thead><tbody>` +
				`<tr><td style="text-align:left;white-space:nowrap">&lt;story&gt;</td><td style="text-align:right;white-space:nowrap">3.6e-05</td></tr>` +
				`<tr><td style="text-align:left;white-space:nowrap">tool &amp; call</td><td style="text-align:right;white-space:nowrap">99.5%</td></tr></tbody></table>`,
		},
		{
			name:    "caption, short row padded, long row kept, a column mixing text and numbers left-aligned",
			caption: "a < b",
			header:  []string{"a", "b"},
			rows:    [][]string{{"x"}, {"1", "2", "extra"}},
			want: `<table><caption>a &lt; b</caption><thead><tr><th style="text-align:left">a</th><th style="text-align:right">b</th></tr></thead><tbody>` +
				`<tr><td style="text-align:left;white-space:nowrap">x</td><td style="text-align:right;white-space:nowrap"></td></tr>` +
				`<tr><td style="text-align:left;white-space:nowrap">1</td><td style="text-align:right;white-space:nowrap">2</td><td style="text-align:left;white-space:nowrap">extra</td></tr></tbody></table>`,
		},
		{
			name: "no header",
			rows: [][]string{{"-0.5", "NaN", "1e400x", "1,23"}},
			want: `<table><tbody><tr><td style="text-align:right;white-space:nowrap">-0.5</td><td style="text-align:right;white-space:nowrap">NaN</td><td style="text-align:left;white-space:nowrap">1e400x</td><td style="text-align:left;white-space:nowrap">1,23</td></tr></tbody></table>`,
		},
		{
			name:   "thousands separators on whole numbers of four digits or more; a dash is no value",
			header: []string{"n"},
			rows:   [][]string{{"106944"}, {"-1234567"}, {"4096"}, {"512"}, {"12345.5"}, {"1e+06"}, {"—"}, {"2,649,597"}},
			want: `<table><thead><tr><th style="text-align:right">n</th></tr></thead><tbody>` +
				`<tr><td style="text-align:right;white-space:nowrap">106,944</td></tr><tr><td style="text-align:right;white-space:nowrap">-1,234,567</td></tr>` +
				`<tr><td style="text-align:right;white-space:nowrap">4,096</td></tr><tr><td style="text-align:right;white-space:nowrap">512</td></tr>` +
				`<tr><td style="text-align:right;white-space:nowrap">12345.5</td></tr><tr><td style="text-align:right;white-space:nowrap">1e+06</td></tr>` +
				`<tr><td style="text-align:right;white-space:nowrap">—</td></tr><tr><td style="text-align:right;white-space:nowrap">2,649,597</td></tr></tbody></table>`,
		},
	}
	long := strings.Repeat(`\xdb`, 12)
	tests = append(tests, struct {
		name    string
		caption string
		header  []string
		rows    [][]string
		want    string
	}{
		name: "long cells wrap; a long run without a space may break anywhere",
		rows: [][]string{{"a sentence that is longer than thirty-two characters", "er" + long}},
		want: `<table><tbody><tr><td style="text-align:left">a sentence that is longer than thirty-two characters</td>` +
			`<td style="text-align:left;word-break:break-all">er` + long + `</td></tr></tbody></table>`,
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TableHTML(tt.caption, tt.header, tt.rows); got != tt.want {
				t.Errorf("TableHTML:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestFigureHTML(t *testing.T) {
	tests := []struct {
		name, svg, alt string
	}{
		{"title as alt, escaped", `<svg xmlns="http://www.w3.org/2000/svg"><title>a &lt; b &amp; "c"</title><rect width="1" height="1"/></svg>`, `alt="a &lt; b &amp; &#34;c&#34;"`},
		{"no title", `<svg xmlns="http://www.w3.org/2000/svg"><rect width="1" height="1"/></svg>`, `alt=""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FigureHTML(tt.svg)
			if !strings.HasPrefix(got, `<img class="octlm-figure" `) || !strings.Contains(got, tt.alt) {
				t.Fatalf("FigureHTML = %s, want an <img> of class octlm-figure with %s", got, tt.alt)
			}
			_, uri, ok := strings.Cut(got, `src="data:image/svg+xml;base64,`)
			if !ok {
				t.Fatalf("FigureHTML = %s: no SVG data URI", got)
			}
			data, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(uri, `">`))
			if err != nil {
				t.Fatalf("decoding the data URI: %v", err)
			}
			if string(data) != tt.svg {
				t.Errorf("the data URI holds %q, want the SVG %q", data, tt.svg)
			}
		})
	}
}
