package figures

import (
	"cmp"
	"errors"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/octlm/octlm/internal/sysinfo"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/chat"
	"github.com/octlm/octlm/octlm/tokenizer"
	"github.com/octlm/octlm/parity"
	"github.com/octlm/octlm/units"
)

// tokenColors are the backgrounds of successive tokens.
var tokenColors = []string{"#cfe2f3", "#fde2c4", "#d5ecd0", "#f6cfcf", "#d7f0ee", "#e8d6ea", "#fbf0c4"}

// tokenSpan is a run of text drawn as one coloured token: usually one token, several when a
// character's UTF-8 bytes are split across tokens.
type tokenSpan struct {
	ids     []int
	text    string
	special bool
}

// spans groups ids into spans of whole characters.
func spans(tok *tokenizer.Tokenizer, ids []int) ([]tokenSpan, error) {
	var out []tokenSpan
	var cur tokenSpan
	var pending []byte
	for _, id := range ids {
		b, err := tok.DecodeToken(id)
		if err != nil {
			return nil, err
		}
		cur.ids = append(cur.ids, id)
		cur.special = cur.special || tok.IsSpecial(id)
		pending = append(pending, b...)
		if utf8.Valid(pending) {
			cur.text = string(pending)
			out = append(out, cur)
			cur, pending = tokenSpan{}, nil
		}
	}
	if len(cur.ids) > 0 {
		cur.text = escapeInvalidUTF8(pending)
		out = append(out, cur)
	}
	return out, nil
}

// spansHTML draws spans as coloured boxes, whitespace kept and newlines shown as ↵.
func spansHTML(sp []tokenSpan) string {
	var b strings.Builder
	b.WriteString(`<div class="tokens" style="font-family:monospace;white-space:pre-wrap;line-height:1.9">`)
	for i, s := range sp {
		ids := make([]string, len(s.ids))
		for j, id := range s.ids {
			ids[j] = strconv.Itoa(id)
		}
		style := "background:" + tokenColors[i%len(tokenColors)] + ";border-radius:3px;padding:1px 0"
		if s.special {
			style = "background:#444;color:white;border-radius:3px;padding:1px 2px"
		}
		text := html.EscapeString(s.text)
		text = strings.ReplaceAll(text, "\n", "↵\n")
		if needsFont(s.text) {
			text += `<small class="token-bytes" style="color:#555;font-size:70%">` + escapedBytes(s.text) + `</small>`
		}
		fmt.Fprintf(&b, `<span class="token" title="id %s" style="%s">%s</span>`, strings.Join(ids, "+"), style, text)
	}
	b.WriteString("</div>")
	for _, s := range sp {
		if needsFont(s.text) {
			b.WriteString(`<p style="font-size:smaller;color:#555">CJK and emoji glyphs depend on the fonts of the browser that shows this page; ` +
				`the bytes beside each (UTF-8, as the token holds them) do not.</p>`)
			break
		}
	}
	return b.String()
}

// needsFont reports whether text holds a character that common monospace fonts lack: CJK,
// Hangul, emoji and the other scripts and symbols from U+2E80 on.
func needsFont(text string) bool {
	for _, r := range text {
		if r >= 0x2E80 && r != utf8.RuneError {
			return true
		}
	}
	return false
}

// escapedBytes writes text's UTF-8 bytes as \xNN.
func escapedBytes(text string) string {
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		fmt.Fprintf(&b, `\x%02x`, text[i])
	}
	return b.String()
}

// TokenHTML shows how the tokenizer cuts text: each token in its own colour (special tokens dark),
// its ID in the tooltip, followed by the ID list.
func TokenHTML(tok *tokenizer.Tokenizer, name, title, text string) (Snippet, []int, error) {
	ids := tok.Encode(text)
	sp, err := spans(tok, ids)
	if err != nil {
		return Snippet{}, nil, err
	}
	back, err := tok.Decode(ids)
	if err != nil {
		return Snippet{}, nil, err
	}
	if back != text {
		return Snippet{}, nil, fmt.Errorf("figures: %s: decoding the tokens does not give the text back", name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<p>%d characters, %d tokens (%.2f characters per token)</p>`, utf8.RuneCountInString(text), len(ids), float64(utf8.RuneCountInString(text))/float64(max(1, len(ids))))
	b.WriteString(spansHTML(sp))
	fmt.Fprintf(&b, `<p style="font-family:monospace;font-size:smaller;color:#555">%s</p>`, html.EscapeString(fmt.Sprint(ids)))
	return Snippet{Name: name, Title: title, HTML: b.String()}, ids, nil
}

// ChatPrompt renders a one-question conversation with Qwen3's chat template (think selects
// thinking mode) and shows its tokens.
func ChatPrompt(tok *tokenizer.Tokenizer, question string, think bool) (Snippet, []int, error) {
	text, err := chat.Render(chat.UserPrompt(question, think))
	if err != nil {
		return Snippet{}, nil, err
	}
	return TokenHTML(tok, "03-chat-prompt", "Qwen3 chat template: the rendered prompt, tokenized", text)
}

// ReplyTable takes a generated reply apart with chat.ParseReply: its thinking, its answer and its
// tool calls, one row each, and any part that could not be parsed.
func ReplyTable(reply string) Table {
	r := chat.ParseReply(reply)
	t := Table{Name: "03-reply", Caption: "chat.ParseReply on a Qwen3-style reply", Header: []string{"part", "text"}}
	t.Rows = append(t.Rows, []string{"thinking", r.Thinking}, []string{"content", r.Content})
	for _, tc := range r.ToolCalls {
		args, err := tc.ArgumentsText()
		if err != nil {
			args = "(" + err.Error() + ")"
		}
		t.Rows = append(t.Rows, []string{"tool call", tc.Name + " " + args})
	}
	for _, err := range r.Errors {
		t.Rows = append(t.Rows, []string{"error", err.Error()})
	}
	return t
}

// Prompt is a token prompt for generation and a description of where it came from.
type Prompt struct {
	Name string // short: "q1", "case 2"
	IDs  []int
	From string
}

// Prompts returns generation prompts for the checkpoint: the chat prompts of questions when the
// model's vocabulary holds the tokenizer's (a real Qwen3), else the token-ID cases of the
// checkpoint's cases.json or reference (a tiny checkpoint's vocabulary is too small for text).
func Prompts(src *Source, tok *tokenizer.Tokenizer, questions []string) ([]Prompt, error) {
	shape, err := src.Shape()
	if err != nil {
		return nil, err
	}
	if shape.Vocab >= tok.VocabSize() {
		var out []Prompt
		for _, q := range questions {
			text, err := chat.Render(chat.UserPrompt(q, false))
			if err != nil {
				return nil, err
			}
			out = append(out, Prompt{Name: fmt.Sprintf("q%d", len(out)+1), IDs: tok.Encode(text), From: "chat prompt: " + q})
		}
		return out, nil
	}
	var cases [][]int
	if _, err := os.Stat(filepath.Join(src.Dir, parity.CasesFileName)); err == nil {
		if cases, err = parity.ReadCases(filepath.Join(src.Dir, parity.CasesFileName)); err != nil {
			return nil, err
		}
	} else if src.Reference != "" {
		ref, err := src.ReadReference()
		if err != nil {
			return nil, err
		}
		for _, c := range ref.Cases {
			cases = append(cases, c.IDs)
		}
	}
	var out []Prompt
	for i, c := range cases {
		if len(c) >= 2 {
			out = append(out, Prompt{Name: fmt.Sprintf("case %d", i), IDs: c, From: fmt.Sprintf("cases.json case %d (%d token IDs below %d: the vocabulary is too small for text)", i, len(c), shape.Vocab)})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("figures: %s: vocabulary %d < the tokenizer's %d, and no cases.json or reference to take prompts from", src.Label, shape.Vocab, tok.VocabSize())
	}
	return out, nil
}

// decodeIDs decodes generated IDs to text a reader can read: complete UTF-8 characters as text,
// the bytes of a character cut short (a byte-level token that is only part of one) as \xNN
// escapes instead of U+FFFD, and IDs the tokenizer does not have (embedding rows beyond the
// vocabulary) as ⟨id⟩.
func decodeIDs(tok *tokenizer.Tokenizer, ids []int) string {
	var b strings.Builder
	var pending []byte
	for _, id := range ids {
		t, err := tok.DecodeToken(id)
		if errors.Is(err, tokenizer.ErrUnknownID) {
			b.WriteString(escapeInvalidUTF8(pending))
			pending = pending[:0]
			fmt.Fprintf(&b, "⟨%d⟩", id)
			continue
		}
		pending = append(pending, t...)
	}
	b.WriteString(escapeInvalidUTF8(pending))
	return b.String()
}

// quoteText quotes decoded text for a table cell, with newlines and tabs visible; the \xNN escapes
// of decodeIDs stay as they are.
func quoteText(s string) string {
	return `"` + strings.NewReplacer("\n", `\n`, "\t", `\t`, `"`, `\"`).Replace(s) + `"`
}

// escapeInvalidUTF8 returns b as text with every byte that is not part of a valid UTF-8 character
// written as \xNN, and characters with no glyph (controls other than whitespace, unassigned code
// points) as \uNNNN.
func escapeInvalidUTF8(b []byte) string {
	var out strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			fmt.Fprintf(&out, `\x%02x`, b[0])
			b = b[1:]
			continue
		}
		if !unicode.IsGraphic(r) && !unicode.IsSpace(r) {
			fmt.Fprintf(&out, `\u%04x`, r) // a control or unassigned character: no glyph to show
			b = b[n:]
			continue
		}
		out.Write(b[:n])
		b = b[n:]
	}
	return out.String()
}

// GenRun is one mode of generation (greedy, or sampled with a seed) run Repeats times, with
// its per-token timing over the repeats.
type GenRun struct {
	Mode     string
	Sampling octlm.Sampling
	Gen      octlm.Generation // the repeat of median decode speed (every repeat gives the same tokens)
	Text     string
	// Steps is, for each token, the median over the repeats of the time from the previous token
	// (the first: from the start); Fastest and Slowest are the least and the most.
	Steps, Fastest, Slowest []time.Duration
	Rates                   []float64 // decode tokens/s of each repeat
	Repeats                 int
	Machine                 string // what the machine was doing meanwhile: CPUs and load average
}

// LatencyRepeats is how many times Generate runs each mode: one run's timing is mostly what
// else the machine did meanwhile, the median of several is the model's.
const LatencyRepeats = 5

// Generate continues prompt n tokens greedily and with Qwen3's sampling defaults under two seeds,
// after one untimed greedy run that compiles the graphs. Each mode runs LatencyRepeats times, the
// modes taking turns, so that a busy moment of the machine falls on all of them alike.
func Generate(m *octlm.Model, tok *tokenizer.Tokenizer, prompt []int, n int) ([]GenRun, error) {
	var stop []int
	for _, id := range octlm.Qwen3StopIDs() {
		if id < m.Shape().Vocab {
			stop = append(stop, id)
		}
	}
	if _, err := m.Generate(prompt, octlm.GenerateOptions{MaxNewTokens: n, Sampling: octlm.Greedy(), StopIDs: stop}); err != nil {
		return nil, err // warm-up: compiles every graph the runs below use
	}
	seeded := func(seed uint64) octlm.Sampling { s := octlm.QwenDefaults(); s.Seed = seed; return s }
	runs := []GenRun{{Mode: "greedy", Sampling: octlm.Greedy()}, {Mode: "sampled, seed 1", Sampling: seeded(1)}, {Mode: "sampled, seed 2", Sampling: seeded(2)}}
	loadBefore := sysinfo.LoadAverage()
	gens := make([][]octlm.Generation, len(runs))
	steps := make([][][]time.Duration, len(runs))
	for rep := 0; rep < LatencyRepeats; rep++ {
		for i := range runs {
			r := &runs[i]
			var st []time.Duration
			last := time.Now()
			g, err := m.Generate(prompt, octlm.GenerateOptions{MaxNewTokens: n, Sampling: r.Sampling, StopIDs: stop, OnToken: func(int) bool {
				now := time.Now()
				st = append(st, now.Sub(last))
				last = now
				return true
			}})
			if err != nil {
				return nil, fmt.Errorf("figures: %s generation: %w", r.Mode, err)
			}
			if rep > 0 && !slices.Equal(g.GeneratedIDs, gens[i][0].GeneratedIDs) {
				return nil, fmt.Errorf("figures: %s generation gave other tokens on repeat %d", r.Mode, rep+1)
			}
			gens[i] = append(gens[i], g)
			steps[i] = append(steps[i], st)
		}
	}
	loadAfter := sysinfo.LoadAverage()
	machine := fmt.Sprintf("%d CPUs", runtime.NumCPU())
	if loadBefore > 0 || loadAfter > 0 {
		machine += fmt.Sprintf(", load average %.2f before and %.2f after (1 min)", loadBefore, loadAfter)
	}
	for i := range runs {
		r := &runs[i]
		r.Repeats, r.Machine = LatencyRepeats, machine
		for _, g := range gens[i] {
			r.Rates = append(r.Rates, g.TokensPerSecond())
		}
		r.Gen = gens[i][medianIndex(r.Rates)]
		r.Steps, r.Fastest, r.Slowest = tokenSpread(steps[i])
		r.Text = decodeIDs(tok, r.Gen.GeneratedIDs)
	}
	return runs, nil
}

// medianIndex is the index of the median of xs (the lower one of an even count).
func medianIndex(xs []float64) int {
	order := make([]int, len(xs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(xs[a], xs[b]) })
	return order[(len(order)-1)/2]
}

// tokenSpread takes the step times of several repeats and returns, for each token, the median,
// the least and the most (the lower median of an even count).
func tokenSpread(reps [][]time.Duration) (median, fastest, slowest []time.Duration) {
	n := len(reps[0])
	for _, r := range reps {
		n = min(n, len(r))
	}
	for j := 0; j < n; j++ {
		col := make([]time.Duration, len(reps))
		for i, r := range reps {
			col[i] = r[j]
		}
		slices.Sort(col)
		median = append(median, col[(len(col)-1)/2])
		fastest = append(fastest, col[0])
		slowest = append(slowest, col[len(col)-1])
	}
	return median, fastest, slowest
}

// samplingText describes sampling settings.
func samplingText(s octlm.Sampling) string {
	if s.Temperature == 0 {
		return "argmax"
	}
	return fmt.Sprintf("T=%g top-k=%d top-p=%g min-p=%g", s.Temperature, s.TopK, s.TopP, s.MinP)
}

// GenerationTable tabulates generation runs: settings, tokens, stop reason, speed and text.
func GenerationTable(runs []GenRun, label string) Table {
	t := Table{Name: "03-generation", Caption: "greedy and sampled generation, " + label,
		Header: []string{"mode", "sampling", "tokens", "stop", "prefill", "decode tokens/s (median, least–most)", "first IDs", "text"}}
	if len(runs) > 0 && runs[0].Repeats > 1 {
		t.Caption += fmt.Sprintf(", %d runs of each mode taking turns (prefill: the median run's); %s", runs[0].Repeats, runs[0].Machine)
	}
	for _, r := range runs {
		ids := r.Gen.GeneratedIDs
		first := fmt.Sprint(ids[:min(5, len(ids))])
		if len(ids) > 5 {
			first = strings.TrimSuffix(first, "]") + " …]"
		}
		t.Rows = append(t.Rows, []string{r.Mode, samplingText(r.Sampling), strconv.Itoa(len(ids)), r.Gen.StopReason,
			r.Gen.Prefill.Round(10 * time.Microsecond).String(), rateText(r), first, shorten(r.Text, 120)})
	}
	return t
}

// rateText is a run's decode speed: the median over its repeats and their range.
func rateText(r GenRun) string {
	if len(r.Rates) < 2 {
		return fmt.Sprintf("%.1f", r.Gen.TokensPerSecond())
	}
	return fmt.Sprintf("%.1f (%.1f–%.1f)", r.Gen.TokensPerSecond(), slices.Min(r.Rates), slices.Max(r.Rates))
}

// LatencyFigure draws the time each generated token took: the median over the repeats as a
// line, the fastest to the slowest repeat as a bar at each token, and what the machine was doing.
func LatencyFigure(runs []GenRun, label string) Figure {
	var all []series
	var legend []int
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for k, r := range runs {
		color := palette[k%len(palette)]
		med := series{Label: r.Mode, Kind: lineSeries, Color: color}
		spread := series{Label: r.Mode + ", fastest to slowest", Kind: rangeSeries, Color: color}
		for i, d := range r.Steps {
			if i == 0 {
				continue // the prefill, in the table
			}
			med.X = append(med.X, float64(i))
			med.Y = append(med.Y, ms(d))
			if i < len(r.Fastest) && i < len(r.Slowest) {
				spread.X = append(spread.X, float64(i))
				spread.Lo = append(spread.Lo, ms(r.Fastest[i]))
				spread.Y = append(spread.Y, ms(r.Slowest[i]))
			}
		}
		if len(spread.X) > 0 {
			all = append(all, spread)
		}
		legend = append(legend, len(all))
		all = append(all, med)
	}
	title := "Time per generated token: " + label
	note := "after a warm-up run that compiled the graphs; the first token (the prompt's forward pass) is left out"
	if len(runs) > 0 && runs[0].Repeats > 1 {
		note = fmt.Sprintf("line: median of %d runs per mode (taking turns), bar: fastest to slowest run; after a warm-up run; first token left out\nmachine meanwhile: %s",
			runs[0].Repeats, runs[0].Machine)
	}
	c := chart{Title: title, Width: 760, Series: all, Legend: legend, X: axis{Label: "generated token", Tight: true}, Y: axis{Label: "ms since the previous token (log scale)", Log: true},
		Note: note}
	return Figure{Name: "03-token-latency", Title: title, SVG: c.render()}
}

// HalfGreedy generates n tokens greedily from each prompt with float32, bfloat16 and float16
// weights and activations, and compares the half-precision tokens with the float32 ones: how many
// steps agree, how many tokens come before the first difference, and a strip per prompt (green:
// same token as float32).
func HalfGreedy(src *Source, tok *tokenizer.Tokenizer, prompts []Prompt, n int) (Figure, Table, error) {
	dtypes := []octlm.DType{octlm.Float32, octlm.BFloat16, octlm.Float16}
	gen := map[octlm.DType][][]int{}
	for _, dt := range dtypes {
		m, err := src.Load(dt, nil)
		if err != nil {
			return Figure{}, Table{}, err
		}
		for i, p := range prompts {
			g, err := m.Generate(p.IDs, octlm.GenerateOptions{MaxNewTokens: n, Sampling: octlm.Greedy()})
			if err != nil {
				m.Close()
				return Figure{}, Table{}, fmt.Errorf("figures: %s greedy generation from prompt %d: %w", dt, i, err)
			}
			gen[dt] = append(gen[dt], g.GeneratedIDs)
		}
		m.Close()
	}
	t := Table{Name: "03-half-greedy", Caption: fmt.Sprintf("%d greedy tokens per prompt: half precision against float32, %s", n, src.Label),
		Header: []string{"dtype", "prompt", "same token", "common prefix", "first difference (float32 → half)"}}
	const cell, left, top = 14.0, 130.0, 40.0
	rowsN := (len(dtypes) - 1) * len(prompts)
	w := max(760, left+cell*float64(n)+20)
	h := top + 18*float64(rowsN) + 40
	title := "Greedy tokens of bfloat16 and float16 against float32: " + src.Label
	var b strings.Builder
	svgOpen(&b, w, h, title)
	row := 0
	const same, after, other = "#54a24b", "#b5d9a8", "#e45756"
	used := map[string]bool{}
	for _, dt := range dtypes[1:] {
		for i, p := range prompts {
			gr := parity.GreedyRow{DType: dt, Case: i, Float32IDs: gen[octlm.Float32][i], IDs: gen[dt][i]}
			diff := "none"
			if p := gr.CommonPrefix(); p < gr.Tokens() {
				a, b := gr.Float32IDs[p], gr.IDs[p]
				diff = fmt.Sprintf("step %d: %s (%d) → %s (%d)", p, quoteText(decodeIDs(tok, []int{a})), a, quoteText(decodeIDs(tok, []int{b})), b)
			}
			t.Rows = append(t.Rows, []string{string(dt), p.Name, fmt.Sprintf("%d/%d", gr.Matches(), gr.Tokens()), strconv.Itoa(gr.CommonPrefix()), diff})
			y := top + 18*float64(row)
			fmt.Fprintf(&b, `<g class="series" data-label="%s %s"><text x="%g" y="%.1f" text-anchor="end">%s · %s</text>`, dt, esc(p.Name), left-8, y+10, dt, esc(p.Name))
			for s := range gr.Tokens() {
				color := same
				if gr.Float32IDs[s] != gr.IDs[s] {
					color = other
				} else if s >= gr.CommonPrefix() {
					color = after // same token, but after the texts diverged
				}
				used[color] = true
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="14" fill="%s"/>`, left+cell*float64(s), y, cell-1, color)
			}
			b.WriteString("</g>")
			row++
		}
	}
	// The legend lists the colours the strips use.
	fmt.Fprintf(&b, `<g class="legend"><text class="axis-label x" x="%g" y="%.1f">generated token →</text>`, left, h-12)
	lx := left + 120
	for _, k := range []struct{ color, label string }{
		{same, "float32's token"}, {after, "the same token after the texts diverged"}, {other, "another token"},
	} {
		if !used[k.color] {
			continue
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="12" height="10" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`, lx, h-21, k.color, lx+16, h-12, esc(k.label))
		lx += 30 + 5.8*float64(utf8.RuneCountInString(k.label))
	}
	b.WriteString("</g>")
	b.WriteString("</svg>\n")
	return Figure{Name: "03-half-greedy", Title: title, SVG: []byte(b.String())}, t, nil
}

// ModelSummary is one line about a loaded model, for notebooks.
func ModelSummary(m *octlm.Model, label string) string {
	return fmt.Sprintf("%s: %s parameters, %s of %s weights on %s", label, humanCount(m.Parameters()), units.Bytes(m.WeightBytes()), m.DType, m.Backend.Name())
}
