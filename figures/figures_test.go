package figures

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/tokenizer"
	"github.com/octlm/octlm/parity"
	"github.com/octlm/octlm/units"
)

const (
	tinyDir      = "../testdata/tiny-qwen3"
	tinyFile     = tinyDir + "/model.safetensors"
	tokenizerDir = "../testdata/qwen3-tokenizer"
)

// svgDoc is what the tests read back from an SVG: it must parse as XML.
type svgDoc struct {
	root    string
	groups  map[string][]map[string]string // class -> attributes of each <g class=...>
	texts   []string                       // every <text> content
	classes map[string][]string            // class -> text of <text class=...>
	rects   []map[string]string
}

func parseSVG(t *testing.T, data []byte) *svgDoc {
	t.Helper()
	d := &svgDoc{groups: map[string][]map[string]string{}, classes: map[string][]string{}}
	dec := xml.NewDecoder(bytes.NewReader(data))
	var stack []xml.StartElement
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse as XML: %v\n%s", err, data)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			attrs := map[string]string{}
			for _, a := range el.Attr {
				attrs[a.Name.Local] = a.Value
			}
			if d.root == "" {
				d.root = el.Name.Local
				if el.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("root namespace %q", el.Name.Space)
				}
			}
			switch el.Name.Local {
			case "g":
				d.groups[attrs["class"]] = append(d.groups[attrs["class"]], attrs)
			case "rect":
				d.rects = append(d.rects, attrs)
			}
			stack = append(stack, el)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 && stack[len(stack)-1].Name.Local == "text" {
				s := string(el)
				d.texts = append(d.texts, s)
				for _, a := range stack[len(stack)-1].Attr {
					if a.Name.Local == "class" {
						d.classes[a.Value] = append(d.classes[a.Value], s)
					}
				}
			}
		}
	}
	if d.root != "svg" {
		t.Fatalf("root element %q, want svg", d.root)
	}
	return d
}

func (d *svgDoc) labels(class string) []string {
	var out []string
	for _, g := range d.groups[class] {
		out = append(out, g["data-label"])
	}
	return out
}

func (d *svgDoc) hasText(s string) bool {
	return slices.ContainsFunc(d.texts, func(x string) bool { return strings.Contains(x, s) })
}

// tinySource is the bundled checkpoint on the pure-Go backend, opened once for the tests that run
// the model.
var tinySource *Source

func TestMain(m *testing.M) {
	os.Exit(func() int {
		src, err := Open(Options{Backend: "go"})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer src.Close()
		tinySource = src
		return m.Run()
	}())
}

func TestChart(t *testing.T) {
	c := chart{Title: "errors", Categories: []string{"a", "b"},
		X: axis{Label: "case"}, Y: axis{Label: "max |Δ|", Log: true},
		Series: []series{
			{Label: "right", Kind: labelledBars, X: []float64{0, 1}, Y: []float64{1e-5, 2e-5}, Format: shortNumber},
			{Label: "wrong", Kind: barSeries, X: []float64{0, 1}, Y: []float64{3, 10}},
			{Label: "trend", Kind: lineSeries, X: []float64{0.5, 1.5}, Y: []float64{1e-4, 1e-3}},
		},
		Lines: []refLine{{Label: "gate 1e-3", Value: 1e-3}}}
	d := parseSVG(t, c.render())
	if got := d.labels("series"); !slices.Equal(got, []string{"right", "wrong", "trend"}) {
		t.Errorf("series %q", got)
	}
	if got := d.labels("refline"); !slices.Equal(got, []string{"gate 1e-3"}) {
		t.Errorf("reference lines %q", got)
	}
	if got := d.classes["axis-label x"]; !slices.Equal(got, []string{"case"}) {
		t.Errorf("x label %q", got)
	}
	if got := d.classes["axis-label y"]; !slices.Equal(got, []string{"max |Δ|"}) {
		t.Errorf("y label %q", got)
	}
	// Data from 1e-5 to 10 with a third of a decade of room: decades 1e-6 to 100.
	wantTicks := []string{"10⁻⁶", "10⁻⁵", "10⁻⁴", "10⁻³", "10⁻²", "10⁻¹", "10⁰", "10¹", "10²"}
	if got := d.classes["tick y"]; !slices.Equal(got, wantTicks) {
		t.Errorf("y ticks %q, want %q", got, wantTicks)
	}
	if got := d.classes["tick x"]; !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("x ticks %q", got)
	}
	// The labelled series prints its values above its bars.
	for _, v := range []string{"1.0e-05", "2.0e-05"} {
		if !d.hasText(v) {
			t.Errorf("no bar label %q in %q", v, d.texts)
		}
	}
}

func TestTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		log    bool
		want   []string
	}{
		{0, 1, false, []string{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}},
		{0, 200, false, []string{"0", "50", "100", "150", "200"}},
		{0, 0.6, false, []string{"0.0", "0.2", "0.4", "0.6"}},
		{0, 35, false, []string{"0", "10", "20", "30"}},
		{-1, 1, false, []string{"-1.0", "-0.5", "0.0", "0.5", "1.0"}},
		{0, 0.001, false, []string{"0.0e+00", "2.0e-04", "4.0e-04", "6.0e-04", "8.0e-04", "1.0e-03"}},
		{0, 5e6, false, []string{"0.0e+00", "1.0e+06", "2.0e+06", "3.0e+06", "4.0e+06", "5.0e+06"}},
		{-2, 2, true, []string{"0.01", "0.1", "1", "10", "100"}},
		{-3, 1, true, []string{"10⁻³", "10⁻²", "10⁻¹", "10⁰", "10¹"}},
		{-10, 0, true, []string{"10⁻¹⁰", "10⁻⁸", "10⁻⁶", "10⁻⁴", "10⁻²", "10⁰"}},
	}
	for _, tt := range tests {
		var got []string
		for _, tk := range ticks(tt.lo, tt.hi, tt.log) {
			got = append(got, tk.label)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("ticks(%g, %g, log %v) = %q, want %q", tt.lo, tt.hi, tt.log, got, tt.want)
		}
	}
}

func TestShortNumber(t *testing.T) {
	for x, want := range map[float64]string{48.9: "49", 1.79: "1.8", 0.046: "0.046", 0.00603: "0.006", 3.62e-5: "3.6e-05", 0: "0", 31415: "3.1e+04"} {
		if got := shortNumber(x); got != want {
			t.Errorf("shortNumber(%g) = %q, want %q", x, got, want)
		}
	}
}

func TestTableMarkdown(t *testing.T) {
	tab := Table{Caption: "c", Header: []string{"a", "b"}, Rows: [][]string{{"x|y", "1"}, {"z"}}}
	want := "c\n\n| a | b |\n| --- | --- |\n| x\\|y | 1 |\n| z |  |\n"
	if got := tab.Markdown(); got != want {
		t.Errorf("Markdown:\n%q\nwant\n%q", got, want)
	}
}

// headerOf reads a safetensors file's length prefix and tensor entries independently of package loader.
func headerOf(t *testing.T, path string) (n int64, entries map[string]json.RawMessage) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n = int64(binary.LittleEndian.Uint64(data[:8]))
	if err := json.Unmarshal(data[8:8+n], &entries); err != nil {
		t.Fatal(err)
	}
	delete(entries, "__metadata__")
	return n, entries
}

func TestHeaderAnatomy(t *testing.T) {
	n, entries := headerOf(t, tinyFile)
	st, err := os.Stat(tinyFile)
	if err != nil {
		t.Fatal(err)
	}
	fig, tab, err := HeaderAnatomy(tinyFile)
	if err != nil {
		t.Fatal(err)
	}
	d := parseSVG(t, fig.SVG)
	segs := d.groups["segment"]
	kinds := map[string]int{}
	for _, s := range segs {
		kinds[s["data-kind"]]++
	}
	// Row 1: the header and every tensor; row 2: prefix, JSON, padding and the first two tensors.
	if kinds["header"] != 1 || kinds["length prefix"] != 1 || kinds["JSON header"] != 1 {
		t.Errorf("segments by kind %v", kinds)
	}
	if want := 1 + len(entries) + 3 + 2; len(segs) != want {
		t.Errorf("%d segments, want %d", len(segs), want)
	}
	if !d.hasText(fmt.Sprintf("u64 LE = %d", n)) {
		t.Errorf("no length prefix value %d in %q", n, d.texts)
	}
	if !strings.Contains(fig.Title, fmt.Sprintf("%d tensors", len(entries))) {
		t.Errorf("title %q", fig.Title)
	}
	if got, want := tab.Rows[0][0], "0 – 8"; got != want {
		t.Errorf("first row %q, want %q", got, want)
	}
	if got, want := tab.Rows[1][0], "8 – "+units.Commas(8+n); got != want {
		t.Errorf("header row %q, want %q", got, want)
	}
	first, last := tab.Rows[2][0], tab.Rows[len(tab.Rows)-1][0]
	if !strings.HasPrefix(first, units.Commas(8+n)+" – ") || !strings.HasSuffix(last, " – "+units.Commas(st.Size())) {
		t.Errorf("tensors span %q … %q, want from %d to the file size %d", first, last, 8+n, st.Size())
	}
	text, err := HeaderText(tinyFile, 40)
	if err != nil {
		t.Fatal(err)
	}
	var prefix [8]byte
	binary.LittleEndian.PutUint64(prefix[:], uint64(n))
	if !strings.Contains(text, fmt.Sprintf("% x", prefix[:])) || !strings.Contains(text, fmt.Sprintf("(%d more bytes)", n-40)) {
		t.Errorf("HeaderText:\n%s", text)
	}
}

func TestCorruptions(t *testing.T) {
	tab, err := Corruptions(tinyFile, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Rows) != len(corruptions) {
		t.Fatalf("%d rows for %d corruptions", len(tab.Rows), len(corruptions))
	}
	rules := map[string]bool{}
	for i, row := range tab.Rows {
		if row[0] != corruptions[i].what || row[1] != string(corruptions[i].rule) {
			t.Errorf("row %d: %q", i, row)
		}
		if !strings.Contains(row[2], fmt.Sprintf("corrupt-%02d.safetensors", i)) || !strings.Contains(row[2], string(corruptions[i].rule)) {
			t.Errorf("row %d: message %q names neither the copy nor the rule", i, row[2])
		}
		rules[row[1]] = true
	}
	if len(rules) != len(corruptions) {
		t.Errorf("%d distinct rules for %d corruptions", len(rules), len(corruptions))
	}

	// A file with one tensor cannot be corrupted every way.
	one := filepath.Join(t.TempDir(), "one.safetensors")
	if err := loader.WriteFile(one, []loader.WriteTensor{{Name: "w", DType: loader.F32, Shape: []int{2}, Data: make([]byte, 8)}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Corruptions(one, t.TempDir()); err == nil {
		t.Error("Corruptions of a one-tensor file: no error")
	}
}

func TestConfigSwitches(t *testing.T) {
	var raw struct {
		Hidden int     `json:"hidden_size"`
		Heads  int     `json:"num_attention_heads"`
		Head   int     `json:"head_dim"`
		FF     int     `json:"intermediate_size"`
		Theta  float64 `json:"rope_theta"`
	}
	data, err := os.ReadFile(tinyDir + "/config.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	cfg, err := octlm.Qwen3ConfigFrom(data)
	if err != nil {
		t.Fatal(err)
	}
	tab := ConfigSwitches(cfg)
	classicFF := int(math.Ceil(2.0/3*4*float64(raw.Hidden)/64)) * 64
	want := map[string][2]string{
		"HeadDim":   {strconv.Itoa(raw.Hidden / raw.Heads), strconv.Itoa(raw.Head)},
		"FFHidden":  {strconv.Itoa(classicFF), strconv.Itoa(raw.FF)},
		"RopeBase":  {"10000", strconv.FormatFloat(raw.Theta, 'f', -1, 64)},
		"RopeSplit": {"2i with 2i+1", fmt.Sprintf("i with i+%d", raw.Head/2)},
		"QKNorm":    {"none", "RMSNorm"},
	}
	if len(tab.Rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(tab.Rows), len(want))
	}
	for _, row := range tab.Rows {
		w, ok := want[row[0]]
		if !ok {
			t.Errorf("unexpected switch %q", row[0])
			continue
		}
		if !strings.Contains(row[2], w[0]) || !strings.Contains(row[3], w[1]) {
			t.Errorf("%s: classic %q this %q, want %q and %q", row[0], row[2], row[3], w[0], w[1])
		}
	}
}

func TestParameterCount(t *testing.T) {
	_, entries := headerOf(t, tinyFile)
	var want int64
	for name, raw := range entries {
		var e struct{ Shape []int64 }
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		n := int64(1)
		for _, d := range e.Shape {
			n *= d
		}
		if name != "lm_head.weight" {
			want += n
		}
	}
	tab, err := ParameterCount(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	total := tab.Rows[len(tab.Rows)-1]
	if total[0] != "total (unique)" || total[1] != strconv.Itoa(len(entries)) || total[2] != strconv.FormatInt(want, 10) {
		t.Errorf("total row %q, want %d tensors and %d parameters", total, len(entries), want)
	}
	var sum int64
	for _, row := range tab.Rows[:len(tab.Rows)-1] {
		if row[0] == "lm_head (tied copy)" {
			continue
		}
		n, err := strconv.ParseInt(row[2], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		sum += n
	}
	if sum != want {
		t.Errorf("kinds add up to %d, want %d", sum, want)
	}
}

// TestParameterCountUntied counts an untied head (tiny-qwen3-untied's own lm_head.weight, 512×64)
// as parameters, in a row of its own.
func TestParameterCountUntied(t *testing.T) {
	tab, err := ParameterCount(filepath.Join("..", "testdata", "tiny-qwen3-untied"))
	if err != nil {
		t.Fatal(err)
	}
	var head, total []string
	for _, row := range tab.Rows {
		switch row[0] {
		case "lm_head":
			head = row
		case "total (unique)":
			total = row
		case "lm_head (tied copy)":
			t.Errorf("the untied head is listed as a tied copy: %q", row)
		}
	}
	// 2 layers of 2·64 + 128·64 + 2·64·64 + 64·128 + 2·32 + 3·64·128, the embedding, the norm, the head.
	want := int64(2*(2*64+128*64+2*64*64+64*128+2*32+3*64*128) + 512*64 + 64 + 512*64)
	if head == nil || head[2] != "32768" || total == nil || total[2] != strconv.FormatInt(want, 10) {
		t.Errorf("lm_head row %q, total row %q, want 32768 and %d parameters", head, total, want)
	}
}

func TestRopePartner(t *testing.T) {
	tests := []struct {
		c, d          int
		split         bool
		partner, pair int
	}{
		{0, 8, true, 4, 0}, {3, 8, true, 7, 3}, {5, 8, true, 1, 1},
		{0, 8, false, 1, 0}, {3, 8, false, 2, 1}, {6, 8, false, 7, 3},
	}
	for _, tt := range tests {
		p, i := RopePartner(tt.c, tt.d, tt.split)
		if p != tt.partner || i != tt.pair {
			t.Errorf("RopePartner(%d, %d, %v) = %d, %d; want %d, %d", tt.c, tt.d, tt.split, p, i, tt.partner, tt.pair)
		}
	}
	for _, split := range []bool{true, false} {
		for c := range 128 {
			p, i := RopePartner(c, 128, split)
			if q, j := RopePartner(p, 128, split); q != c || j != i || p == c {
				t.Errorf("split %v: channel %d pairs with %d, which pairs with %d", split, c, p, q)
			}
		}
	}
}

func TestRopePairs(t *testing.T) {
	fig, err := RopePairs(16)
	if err != nil {
		t.Fatal(err)
	}
	d := parseSVG(t, fig.SVG)
	if panels := d.groups["panel"]; len(panels) != 2 || panels[0]["data-pairing"] != "split" || panels[1]["data-pairing"] != "neighbour" {
		t.Errorf("panels %v", panels)
	}
	if got := strings.Count(string(fig.SVG), `class="channel"`); got != 32 {
		t.Errorf("%d channel boxes, want 16 per panel", got)
	}
	if got := strings.Count(string(fig.SVG), `class="pair"`); got != 16 {
		t.Errorf("%d pair arcs, want 8 per panel", got)
	}
	if !strings.Contains(string(fig.SVG), "channel 3 rotates with 11 by p·θ3") || !strings.Contains(string(fig.SVG), "channel 3 rotates with 2 by p·θ1") {
		t.Error("channel 3's partners are not 11 (split) and 2 (neighbour)")
	}
	for _, bad := range []int{3, 2, 66} {
		if _, err := RopePairs(bad); err == nil {
			t.Errorf("RopePairs(%d): no error", bad)
		}
	}
}

func TestRopeAngles(t *testing.T) {
	pairs := AnglePairs(128)
	if !slices.Equal(pairs, []int{0, 1, 8, 16, 32, 63}) {
		t.Errorf("AnglePairs(128) = %v", pairs)
	}
	fig, tab, err := RopeAngles(128, 1e6, pairs, AnglePositions())
	if err != nil {
		t.Fatal(err)
	}
	d := parseSVG(t, fig.SVG)
	if got := len(d.groups["series"]); got != len(pairs) {
		t.Errorf("%d rows of dials, want %d", got, len(pairs))
	}
	if got, want := strings.Count(string(fig.SVG), `class="hand"`), len(pairs)*len(AnglePositions()); got != want {
		t.Errorf("%d dial hands, want %d", got, want)
	}
	inv := octlm.InvFreq(128, 1e6)
	for r, i := range pairs {
		theta, err := strconv.ParseFloat(tab.Rows[r][3], 64)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(theta-float64(inv[i])) > 1e-3*float64(inv[i]) {
			t.Errorf("pair %d: θ %g, want %g", i, theta, inv[i])
		}
		if tab.Rows[r][1] != fmt.Sprintf("%d, %d", i, i+64) || tab.Rows[r][2] != fmt.Sprintf("%d, %d", 2*i, 2*i+1) {
			t.Errorf("pair %d: channels %q %q", i, tab.Rows[r][1], tab.Rows[r][2])
		}
	}
	if _, _, err := RopeAngles(128, 1e6, []int{64}, AnglePositions()); err == nil {
		t.Error("pair 64 of a 128-channel head: no error")
	}
}

func TestWrongPairing(t *testing.T) {
	fig, tab, err := WrongPairing(tinySource)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := tinySource.ReadReference()
	if err != nil {
		t.Fatal(err)
	}
	d := parseSVG(t, fig.SVG)
	wantSeries := []string{"split halves (correct)", "neighbours (RopeSplit off)", "base 10,000 (RopeBase off)"}
	if got := d.labels("series"); !slices.Equal(got, wantSeries) {
		t.Errorf("series %q, want %q", got, wantSeries)
	}
	if len(tab.Rows) != len(wantSeries)*len(ref.Cases) {
		t.Fatalf("%d rows", len(tab.Rows))
	}
	errs := map[string][]float64{}
	for _, row := range tab.Rows {
		v, err := strconv.ParseFloat(row[3], 64)
		if err != nil {
			t.Fatal(err)
		}
		errs[row[0]] = append(errs[row[0]], v)
	}
	for i, c := range ref.Cases {
		right, wrong := errs[wantSeries[0]][i], errs[wantSeries[1]][i]
		if right > parity.Tolerance {
			t.Errorf("case %d: the correct configuration's error %g exceeds the gate", c.Index, right)
		}
		switch {
		// Position 0 rotates by 0 in either pairing, so both graphs compute the same function
		// there; they are still two compiled graphs whose kernels may sum in other orders, so
		// they agree within float32 rounding (the errors themselves are ~1e-5), not bit for bit.
		case c.Positions() == 1 && math.Abs(wrong-right) > 1e-5:
			t.Errorf("case %d (one position): neighbour pairing error %g differs from the correct %g; position 0 rotates by 0", c.Index, wrong, right)
		case c.Positions() > 1 && wrong < 100*parity.Tolerance:
			t.Errorf("case %d: neighbour pairing error %g, want far above the gate", c.Index, wrong)
		}
	}
}

func TestMeasureParity(t *testing.T) {
	r, err := MeasureParity(tinySource)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := tinySource.ReadReference()
	if err != nil {
		t.Fatal(err)
	}
	if r.Err() != nil || !strings.HasPrefix(r.Verdict(), "PASS") {
		t.Fatalf("verdict %s", r.Verdict())
	}
	var logits int64
	for _, c := range ref.Cases {
		logits += int64(c.Positions() * c.Vocab)
	}
	binned := r.Zeros
	for _, n := range r.Bins {
		binned += n
	}
	if r.Logits != logits || binned != logits {
		t.Errorf("%d logits compared, %d binned, want %d", r.Logits, binned, logits)
	}
	tab := r.Table()
	if len(tab.Rows) != 2*len(ref.Cases) {
		t.Errorf("%d rows, want two per case", len(tab.Rows))
	}
	for _, row := range tab.Rows {
		if row[6] != "PASS" {
			t.Errorf("row %q", row)
		}
	}
	// The per-position maxima are the full path's rows of the protocol.
	for i, c := range r.Cases {
		worst := slices.Max(c.MaxErr)
		if full := r.Report.Rows[2*i]; full.Path != parity.PathFull || full.Stats.MaxAbsoluteError != worst {
			t.Errorf("case %d: per-position maximum %g, protocol's full row %+v", c.Index, worst, full)
		}
	}
	// The median logit range, recomputed from the reference.
	want, err := ref.Cases[1].Logits()
	if err != nil {
		t.Fatal(err)
	}
	var ranges []float64
	for p := range want.Rows {
		row := want.Row(p)
		ranges = append(ranges, float64(slices.Max(row))-float64(slices.Min(row)))
	}
	slices.Sort(ranges)
	med := ranges[len(ranges)/2]
	if got := r.RangeTable().Rows[1][2]; got != fmt.Sprintf("%.1f", med) {
		t.Errorf("case 1 median range %s, want %.1f", got, med)
	}

	for _, f := range []Figure{r.Histogram(), r.PerPosition(), r.RangeFigure()} {
		d := parseSVG(t, f.SVG)
		if !slices.Contains(d.labels("refline"), "gate 1e-3") {
			t.Errorf("%s: no gate line", f.Name)
		}
	}
	if got := parseSVG(t, r.PerPosition().SVG).labels("series"); len(got) != len(ref.Cases) {
		t.Errorf("per-position series %q", got)
	}
	hist := parseSVG(t, r.Histogram().SVG)
	bars := 0
	for _, n := range r.Bins {
		if n > 0 {
			bars++
		}
	}
	if got := len(hist.rects) - 2; got != bars { // less the background and the frame
		t.Errorf("%d histogram bars, want %d non-empty bins", got, bars)
	}

	path := filepath.Join(t.TempDir(), "parity.gob")
	if err := r.Save(path); err != nil {
		t.Fatal(err)
	}
	back, err := LoadParityResult(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Verdict() != r.Verdict() || back.Logits != r.Logits || !slices.Equal(back.Cases[3].MaxErr, r.Cases[3].MaxErr) {
		t.Error("the saved result reads back differently")
	}
}

func TestTokenHTML(t *testing.T) {
	tok, err := tokenizer.LoadDir(tokenizerDir)
	if err != nil {
		t.Fatal(err)
	}
	text := "RoPE 東京 🚀\n"
	sn, ids, err := TokenHTML(tok, "t", "t", text)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, tok.Encode(text)) {
		t.Errorf("ids %v", ids)
	}
	sp, err := spans(tok, ids)
	if err != nil {
		t.Fatal(err)
	}
	var joined strings.Builder
	n := 0
	for _, s := range sp {
		joined.WriteString(s.text)
		n += len(s.ids)
	}
	if joined.String() != text || n != len(ids) {
		t.Errorf("spans give %q from %d ids, want %q from %d", joined.String(), n, text, len(ids))
	}
	if got := strings.Count(sn.HTML, `class="token"`); got != len(sp) {
		t.Errorf("%d token spans in the HTML, want %d", got, len(sp))
	}
	if !strings.Contains(sn.HTML, "↵") {
		t.Error("the newline is not shown")
	}
	// Glyphs that depend on the viewer's fonts carry their bytes beside them, and the page says so.
	for _, want := range []string{`京<small class="token-bytes" style="color:#555;font-size:70%">\xe4\xba\xac</small>`, ` 🚀<small class="token-bytes" style="color:#555;font-size:70%">\x20\xf0\x9f\x9a\x80</small>`, "depend on the fonts"} {
		if !strings.Contains(sn.HTML, want) {
			t.Errorf("the token strip lacks %q:\n%s", want, sn.HTML)
		}
	}
	if strings.Contains(sn.HTML, `RoPE<small`) {
		t.Error("ASCII tokens got their bytes drawn")
	}

	prompt, pids, err := ChatPrompt(tok, "Hi", false)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := tok.TokenID("<|im_start|>")
	if pids[0] != im || !strings.Contains(prompt.HTML, `title="id `+strconv.Itoa(im)+`" style="background:#444`) {
		t.Errorf("the chat prompt does not start with a dark <|im_start|>: %v", pids[:3])
	}
}

func TestReplyTable(t *testing.T) {
	tab := ReplyTable("<think>\nhmm\n</think>\n\nYes.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call><tool_call>oops</tool_call>")
	want := [][]string{{"thinking", "hmm"}, {"content", "Yes."}, {"tool call", `f {"x": 1}`}}
	if len(tab.Rows) != 4 || !slices.EqualFunc(tab.Rows[:3], want, slices.Equal) || tab.Rows[3][0] != "error" {
		t.Errorf("rows %q", tab.Rows)
	}
}

func TestGenerationAndHalf(t *testing.T) {
	tok, err := tokenizer.LoadDir(tokenizerDir)
	if err != nil {
		t.Fatal(err)
	}
	prompts, err := Prompts(tinySource, tok, HalfQuestions())
	if err != nil {
		t.Fatal(err)
	}
	cases, err := parity.ReadCases(filepath.Join(tinySource.Dir, parity.CasesFileName))
	if err != nil {
		t.Fatal(err)
	}
	// The tiny vocabulary cannot hold Qwen3's tokens: the prompts are the cases of two tokens or more.
	var want [][]int
	for _, c := range cases {
		if len(c) >= 2 {
			want = append(want, c)
		}
	}
	if len(prompts) != len(want) {
		t.Fatalf("%d prompts, want %d", len(prompts), len(want))
	}
	for i := range want {
		if !slices.Equal(prompts[i].IDs, want[i]) {
			t.Errorf("prompt %d: %v", i, prompts[i].IDs)
		}
	}

	m, err := tinySource.Load(octlm.Float32, nil)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := Generate(m, tok, prompts[0].IDs, 8)
	m.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 {
		t.Fatalf("%d runs", len(runs))
	}
	for _, r := range runs {
		if len(r.Gen.GeneratedIDs) != 8 || len(r.Steps) != 8 || r.Text != decodeIDs(tok, r.Gen.GeneratedIDs) {
			t.Errorf("%s: %d tokens, %d step times", r.Mode, len(r.Gen.GeneratedIDs), len(r.Steps))
		}
	}
	wantSeries := []string{"greedy, fastest to slowest", "greedy", "sampled, seed 1, fastest to slowest", "sampled, seed 1", "sampled, seed 2, fastest to slowest", "sampled, seed 2"}
	latency := LatencyFigure(runs, "tiny").SVG
	if got := parseSVG(t, latency).labels("series"); !slices.Equal(got, wantSeries) {
		t.Errorf("latency series %q", got)
	}
	// Repeated runs: each token's median lies within its fastest and slowest, and the figure says
	// how many runs and what the machine was doing.
	for _, r := range runs {
		if r.Repeats != LatencyRepeats || len(r.Rates) != LatencyRepeats || len(r.Fastest) != len(r.Steps) || len(r.Slowest) != len(r.Steps) {
			t.Fatalf("%s: %d repeats, %d rates, %d/%d/%d step times", r.Mode, r.Repeats, len(r.Rates), len(r.Fastest), len(r.Steps), len(r.Slowest))
		}
		for i := range r.Steps {
			if r.Fastest[i] > r.Steps[i] || r.Steps[i] > r.Slowest[i] {
				t.Errorf("%s token %d: median %v outside %v..%v", r.Mode, i, r.Steps[i], r.Fastest[i], r.Slowest[i])
			}
		}
		if !slices.Contains(r.Rates, r.Gen.TokensPerSecond()) {
			t.Errorf("%s: the shown generation is none of the repeats", r.Mode)
		}
	}
	for _, w := range []string{fmt.Sprintf("line: median of %d runs", LatencyRepeats), "machine meanwhile: ", " CPUs", `class="range"`} {
		if !strings.Contains(string(latency), w) {
			t.Errorf("the latency figure lacks %q", w)
		}
	}
	if tab := GenerationTable(runs, "tiny"); len(tab.Rows) != 3 || tab.Rows[0][2] != "8" || tab.Rows[0][6] != strings.TrimSuffix(fmt.Sprint(runs[0].Gen.GeneratedIDs[:5]), "]")+" …]" {
		t.Errorf("generation table %q", tab.Rows)
	}

	fig, tab, err := HalfGreedy(tinySource, tok, prompts, 8)
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Rows) != 2*len(prompts) {
		t.Fatalf("%d rows, want bf16 and f16 per prompt", len(tab.Rows))
	}
	d := parseSVG(t, fig.SVG)
	if len(d.groups["series"]) != len(tab.Rows) {
		t.Errorf("%d strips for %d rows", len(d.groups["series"]), len(tab.Rows))
	}
	var differ int
	for _, row := range tab.Rows {
		var same, n int
		if _, err := fmt.Sscanf(row[2], "%d/%d", &same, &n); err != nil || n != 8 {
			t.Fatalf("row %q", row)
		}
		differ += n - same
		if (row[4] == "none") != (row[3] == "8") {
			t.Errorf("row %q: first difference and common prefix disagree", row)
		}
	}
	red := 0
	for _, r := range d.rects {
		if r["fill"] == "#e45756" {
			red++
		}
	}
	light := 0
	for _, r := range d.rects {
		if r["fill"] == "#b5d9a8" {
			light++
		}
	}
	// The legend shows a swatch of each colour the strips use, and only those.
	swatch := func(used bool) int {
		if used {
			return 1
		}
		return 0
	}
	if red-swatch(differ > 0) != differ {
		t.Errorf("%d red cells (legend included), want %d differing tokens", red, differ)
	}
	if d.hasText("another token") != (differ > 0) || d.hasText("after the texts diverged") != (light > 0) {
		t.Errorf("legend %q: want exactly the colours used (%d red, %d light cells)", d.groups["legend"], differ, light-swatch(light > 0))
	}
}

func TestLatencyAxisEndsAtTheLastToken(t *testing.T) {
	runs := []GenRun{{Mode: "greedy", Steps: make([]time.Duration, 32)}}
	for i := range runs[0].Steps {
		runs[0].Steps[i] = time.Duration(i+1) * time.Millisecond
	}
	d := parseSVG(t, LatencyFigure(runs, "t").SVG)
	ticks := d.classes["tick x"]
	if len(ticks) == 0 || ticks[len(ticks)-1] != "30" {
		t.Errorf("x ticks %q: want them to end at 30 for 31 tokens (not 40)", ticks)
	}
}

func TestGroupDigits(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 106944: "106,944", -1234567: "-1,234,567"} {
		if got := units.Commas(n); got != want {
			t.Errorf("units.Commas(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestFitLabel(t *testing.T) {
	tests := []struct {
		name  string
		width float64
		want  string
	}{
		{"model.embed_tokens.weight", 200, "model.embed_tokens.weight"},
		{"model.embed_tokens.weight", 140, "embed_tokens.weight"},
		{"model.layers.0.self_attn.q_proj.weight", 140, "…q_proj.weight"},
		{"model.layers.0.self_attn.q_proj.weight", 60, "…weight"},
		{"averyveryverylongname", 60, "averyvery…"},
	}
	for _, tt := range tests {
		if got := fitLabel(tt.name, tt.width); got != tt.want {
			t.Errorf("fitLabel(%q, %g) = %q, want %q", tt.name, tt.width, got, tt.want)
		}
	}
}

func TestLoadMemory(t *testing.T) {
	fig, tab, err := LoadMemory(tinySource, octlm.Float32)
	if err != nil {
		t.Fatal(err)
	}
	d := parseSVG(t, fig.SVG)
	labels := d.labels("series")
	if len(labels) < 2 || labels[0] != "checkpoint bytes read" || labels[1] != "Go heap − before" {
		t.Errorf("series %q", labels)
	}
	cfg, err := tinySource.Qwen3Config()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tab.Rows[0][1], units.Commas(cfg.Parameters())+" ") {
		t.Errorf("parameters row %q, want %d", tab.Rows[0], cfg.Parameters())
	}
	if want := units.Bytes(4 * cfg.Parameters()); tab.Rows[2][1] != want {
		t.Errorf("resident float32 weights %q, want %s", tab.Rows[2][1], want)
	}
}

func TestSourceWithoutReference(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"config.json", "model.safetensors"} {
		data, err := os.ReadFile(filepath.Join(tinyDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := Open(Options{Model: dir, Backend: "go"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if src.Reference != "" {
		t.Errorf("reference %q for a folder without one", src.Reference)
	}
	if _, err := src.ReadReference(); err == nil || !strings.Contains(err.Error(), EnvReference) {
		t.Errorf("ReadReference: %v, want an error naming %s", err, EnvReference)
	}
	tok, from, err := src.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(from, "Qwen3's tokenizer") || tok.VocabSize() != 151669 {
		t.Errorf("tokenizer from %q with %d tokens", from, tok.VocabSize())
	}
	// Without cases.json or a reference, a tiny vocabulary has no prompts.
	if _, err := Prompts(src, tok, HalfQuestions()); err == nil {
		t.Error("Prompts: no error")
	}
}

func TestDecodeIDs(t *testing.T) {
	tok, err := tokenizer.LoadDir(tokenizerDir)
	if err != nil {
		t.Fatal(err)
	}
	lead, ok := tok.TokenID("æ") // the byte-level token of 0xE6, the first byte of 東
	if !ok {
		t.Fatal("no byte-level token for 0xE6")
	}
	tests := []struct {
		name string
		ids  []int
		want string
	}{
		{"whole characters", tok.Encode("東京 🚀"), "東京 🚀"},
		{"a character cut short", []int{lead}, `\xe6`},
		{"cut short, then text", append([]int{lead}, tok.Encode("ok")...), `\xe6ok`},
		{"an ID beyond the vocabulary", append(tok.Encode("a"), 10_000_000), "a⟨10000000⟩"},
		{"a character with no glyph", tok.Encode("a\u0007b\n"), `a\u0007b` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decodeIDs(tok, tt.ids); got != tt.want {
				t.Errorf("decodeIDs = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTensorBytes(t *testing.T) {
	ck, err := loader.OpenCheckpoint(tinySource.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var infos []loader.TensorInfo
	for e, err := range ck.Tensors() {
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, e.Info)
	}
	fig, err := TensorBytes("tiny", infos)
	if err != nil {
		t.Fatal(err)
	}
	d := parseSVG(t, fig.SVG)
	if got := len(d.groups["series"]); got != len(infos) {
		t.Errorf("%d bars, want one per tensor (%d)", got, len(infos))
	}
	if got := len(d.classes["value"]); got != len(infos) {
		t.Errorf("%d value labels, want %d", got, len(infos))
	}
	if !d.hasText(fmt.Sprintf("Bytes per tensor: tiny (%d tensors", len(infos))) || !d.hasText("stored size (KiB)") {
		t.Errorf("title or axis label missing: %q", d.texts)
	}
	if !d.hasText(units.Bytes(infos[0].Size)) {
		t.Errorf("no value label %q", units.Bytes(infos[0].Size))
	}
	if _, err := TensorBytes("none", nil); err == nil || !strings.Contains(err.Error(), "none has no tensors") {
		t.Errorf("no tensors: error %v", err)
	}
}

// TestTokenSpread: per token, the median (the lower one of an even count), the least and the
// most over the repeats, cut to the shortest repeat; medianIndex points at the median value.
func TestTokenSpread(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	med, lo, hi := tokenSpread([][]time.Duration{ms(5, 1, 9), ms(3, 40, 2), ms(4, 2)})
	if !slices.Equal(med, ms(4, 2)) || !slices.Equal(lo, ms(3, 1)) || !slices.Equal(hi, ms(5, 40)) {
		t.Errorf("median %v, least %v, most %v", med, lo, hi)
	}
	for _, c := range []struct {
		xs   []float64
		want int
	}{{[]float64{360, 1138, 400}, 2}, {[]float64{3, 1, 2, 4}, 2}, {[]float64{7}, 0}} {
		if got := medianIndex(c.xs); got != c.want {
			t.Errorf("medianIndex(%v) = %d, want %d", c.xs, got, c.want)
		}
	}
}
