package nbui

import "testing"

func TestTableHTML(t *testing.T) {
	tests := []struct {
		name    string
		caption string
		header  []string
		rows    [][]string
		want    string
	}{
		{
			name:   "numbers right-aligned, text escaped",
			header: []string{"case", "max |Δlogit|"},
			rows:   [][]string{{"<story>", "3.6e-05"}, {"tool & call", "99.5%"}},
			want: `<table><thead><tr><th>case</th><th>max |Δlogit|</th></tr></thead><tbody>` +
				`<tr><td>&lt;story&gt;</td><td style="text-align:right">3.6e-05</td></tr>` +
				`<tr><td>tool &amp; call</td><td style="text-align:right">99.5%</td></tr></tbody></table>`,
		},
		{
			name:    "caption, short row padded, long row kept",
			caption: "a < b",
			header:  []string{"a", "b"},
			rows:    [][]string{{"x"}, {"1", "2", "extra"}},
			want: `<table><caption>a &lt; b</caption><thead><tr><th>a</th><th>b</th></tr></thead><tbody>` +
				`<tr><td>x</td><td></td></tr>` +
				`<tr><td style="text-align:right">1</td><td style="text-align:right">2</td><td>extra</td></tr></tbody></table>`,
		},
		{
			name: "no header",
			rows: [][]string{{"-0.5", "NaN", "1e400x"}},
			want: `<table><tbody><tr><td style="text-align:right">-0.5</td><td style="text-align:right">NaN</td><td>1e400x</td></tr></tbody></table>`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TableHTML(tt.caption, tt.header, tt.rows); got != tt.want {
				t.Errorf("TableHTML:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}
