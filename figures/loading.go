package figures

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/units"
)

// tensorKind groups a Qwen3 tensor by what it is, for colours and parameter counts.
func tensorKind(name string) string {
	switch {
	case name == octlm.EmbeddingName:
		return "embedding"
	case name == octlm.TiedHeadName:
		return "lm_head (tied copy)"
	case strings.Contains(name, ".q_norm.") || strings.Contains(name, ".k_norm."):
		return "q/k RMSNorm"
	case strings.Contains(name, ".self_attn."):
		return "attention"
	case strings.Contains(name, ".mlp."):
		return "MLP"
	case strings.Contains(name, "norm"):
		return "RMSNorm"
	}
	return "other"
}

// kinds is the order (and colour order) of tensorKind's groups.
var kinds = []string{"embedding", "attention", "q/k RMSNorm", "MLP", "RMSNorm", "lm_head (tied copy)", "other", "lm_head"}

func kindColor(kind string) string {
	i := slices.Index(kinds, kind)
	return palette[(i+2)%len(palette)] // blue and orange stay for the header
}

// headerLayout is a safetensors file's layout: the length prefix, the JSON header and the tensors.
type headerLayout struct {
	path      string
	size      int64 // file size
	headerLen int64 // the length prefix's value: JSON bytes including padding
	padding   int   // trailing spaces of the JSON (so the data starts at a multiple of 8)
	json      []byte
	tensors   []loader.TensorInfo // offset order, absolute offsets
	metadata  map[string]string
}

func (h headerLayout) dataStart() int64 { return 8 + h.headerLen }

// readLayout validates path with loader.Open and reads its header bytes.
func readLayout(path string) (headerLayout, error) {
	f, err := loader.Open(path)
	if err != nil {
		return headerLayout{}, err
	}
	h := headerLayout{path: path, size: f.Size(), tensors: f.Tensors(), metadata: f.Metadata()}
	f.Close()
	r, err := os.Open(path)
	if err != nil {
		return headerLayout{}, err
	}
	defer r.Close()
	var prefix [8]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return headerLayout{}, fmt.Errorf("figures: %s: %w", path, err)
	}
	h.headerLen = int64(binary.LittleEndian.Uint64(prefix[:]))
	h.json = make([]byte, h.headerLen)
	if _, err := io.ReadFull(r, h.json); err != nil {
		return headerLayout{}, fmt.Errorf("figures: %s: %w", path, err)
	}
	h.padding = len(h.json) - len(bytes.TrimRight(h.json, " "))
	return h, nil
}

// HeaderText returns the start of a safetensors file as a reader would dump it: the 8-byte
// length prefix in hex with its value, then the first n characters of the JSON header.
func HeaderText(path string, n int) (string, error) {
	h, err := readLayout(path)
	if err != nil {
		return "", err
	}
	var prefix [8]byte
	binary.LittleEndian.PutUint64(prefix[:], uint64(h.headerLen))
	js := string(h.json)
	more := ""
	if len(js) > n {
		js, more = js[:n], fmt.Sprintf(" … (%d more bytes)", len(h.json)-n)
	}
	return fmt.Sprintf("bytes 0-7   % x   = %d, little-endian u64: the JSON header's length\nbytes 8-%d  %s%s",
		prefix[:], h.headerLen, h.dataStart()-1, js, more), nil
}

// HeaderAnatomy draws a safetensors file by byte range: the whole file (header against tensors,
// coloured by kind) and a zoom on its first bytes (length prefix, JSON, padding, first tensors),
// and tabulates the byte map.
func HeaderAnatomy(path string) (Figure, Table, error) {
	h, err := readLayout(path)
	if err != nil {
		return Figure{}, Table{}, err
	}
	title := fmt.Sprintf("Anatomy of %s: %s, %d tensors", filepath.Base(path), units.Bytes(h.size), len(h.tensors))
	var b strings.Builder
	svgOpen(&b, anatomyWidth, 270, title)
	writeWholeFile(&b, h)
	writeFirstBytes(&b, h)
	writeKindLegend(&b, h)
	b.WriteString("</svg>\n")
	return Figure{Name: "01-header", Title: title, SVG: []byte(b.String())}, byteMap(path, h), nil
}

// The anatomy's geometry: the drawing's width, the left and right ends of its rows and the
// height of a row's bar.
const (
	anatomyWidth, anatomyLeft, anatomyRight = 820.0, 20.0, 800.0
	anatomyBar                              = 30.0
)

// writeWholeFile draws the anatomy's first row: the whole file to scale, the header then each
// tensor coloured by kind, with offsets at every quarter.
func writeWholeFile(b *strings.Builder, h headerLayout) {
	const left, right, y1, bh = anatomyLeft, anatomyRight, 56.0, anatomyBar
	x := func(off int64) float64 { return left + (right-left)*float64(off)/float64(h.size) }
	fmt.Fprintf(b, `<text class="axis-label" x="%g" y="48">the whole file, to scale (header: %s of %s, %.3g%%)</text>`,
		left, units.Bytes(h.dataStart()), units.Bytes(h.size), 100*float64(h.dataStart())/float64(h.size))
	fmt.Fprintf(b, `<g class="segment" data-kind="header"><rect x="%g" y="%g" width="%.2f" height="%g" fill="%s"/></g>`,
		left, y1, max(2, x(h.dataStart())-left), bh, palette[1])
	for _, t := range h.tensors {
		k := tensorKind(t.Name)
		fmt.Fprintf(b, `<g class="segment" data-kind="%s"><rect x="%.2f" y="%g" width="%.2f" height="%g" fill="%s" stroke="white" stroke-width="0.3"><title>%s [%d, %d) %s %v</title></rect></g>`,
			esc(k), x(t.Offset), y1, max(0.3, x(t.Offset+t.Size)-x(t.Offset)), bh, kindColor(k), esc(t.Name), t.Offset, t.Offset+t.Size, t.DType, t.Shape)
	}
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
		off := int64(f * float64(h.size))
		anchor := map[float64]string{0: "start", 1: "end"}[f]
		if anchor == "" {
			anchor = "middle"
		}
		fmt.Fprintf(b, `<text class="tick x" x="%.1f" y="%g" text-anchor="%s" font-size="10">%s</text>`, x(off), y1+bh+13, anchor, esc(byteLabel(off)))
	}
}

// writeFirstBytes draws the anatomy's second row: the length prefix, the JSON header, its
// padding and the first two tensors, at schematic widths with their true offsets.
func writeFirstBytes(b *strings.Builder, h headerLayout) {
	const left, right, y2, bh = anatomyLeft, anatomyRight, 140.0, anatomyBar
	fmt.Fprintf(b, `<text class="axis-label" x="%g" y="132">the first bytes (widths not to scale; offsets are)</text>`, left)
	type seg struct {
		label, sub string
		start, end int64
		width      float64
		color      string
	}
	segs := []seg{
		{"length prefix", "u64 LE = " + strconv.FormatInt(h.headerLen, 10), 0, 8, 120, palette[0]},
		{"JSON header", fmt.Sprintf("%d tensors, dtype · shape · data_offsets", len(h.tensors)), 8, h.dataStart() - int64(h.padding), 300, palette[1]},
	}
	if h.padding > 0 {
		segs = append(segs, seg{"padding", plural(h.padding, "space"), h.dataStart() - int64(h.padding), h.dataStart(), 80, "#ccc"})
	}
	rest := right - left
	for _, s := range segs {
		rest -= s.width
	}
	for _, t := range h.tensors[:min(2, len(h.tensors))] {
		segs = append(segs, seg{t.Name, fmt.Sprintf("%s %v", t.DType, t.Shape), t.Offset, t.Offset + t.Size, rest / 2, kindColor(tensorKind(t.Name))})
	}
	xx := left
	for i, s := range segs {
		fmt.Fprintf(b, `<g class="segment" data-kind="%s"><rect x="%.1f" y="%g" width="%.1f" height="%g" fill="%s" stroke="white"/>`, esc(s.label), xx, y2, s.width, bh, s.color)
		fmt.Fprintf(b, `<text x="%.1f" y="%g" text-anchor="middle" font-size="10" fill="white">%s<title>%s</title></text></g>`, xx+s.width/2, y2+19, esc(fitLabel(s.label, s.width)), esc(s.label))
		fmt.Fprintf(b, `<text x="%.1f" y="%g" text-anchor="middle" font-size="9" fill="#333">%s</text>`, xx+s.width/2, y2+bh+26, esc(shorten(s.sub, int(s.width/5))))
		fmt.Fprintf(b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#333"/><text class="offset" x="%.1f" y="%g" font-size="10" text-anchor="%s">%d</text>`,
			xx, y2-4, xx, y2+bh+4, xx, y2+bh+13, anchor(i), s.start)
		xx += s.width
	}
	fmt.Fprintf(b, `<text class="offset" x="%.1f" y="%g" font-size="10" text-anchor="end">%d …</text>`, xx, y2+bh+13, segs[len(segs)-1].end)
	fmt.Fprintf(b, `<text x="%g" y="%g" font-size="10" fill="#333">data_offsets in the JSON count from the end of the header: a tensor at [b, e) lies at bytes [%d+b, %d+e) of the file</text>`,
		left, y2+bh+48, h.dataStart(), h.dataStart())
}

// writeKindLegend lists the header and the tensor kinds the file holds, in kinds' order.
func writeKindLegend(b *strings.Builder, h headerLayout) {
	lx := anatomyLeft
	seen := map[string]bool{}
	for _, t := range h.tensors {
		seen[tensorKind(t.Name)] = true
	}
	fmt.Fprintf(b, `<g class="legend"><rect x="%g" y="236" width="12" height="10" fill="%s"/><text x="%g" y="245">header</text>`, lx, palette[1], lx+16)
	lx += 70
	for _, k := range kinds {
		if !seen[k] {
			continue
		}
		fmt.Fprintf(b, `<rect x="%g" y="236" width="12" height="10" fill="%s"/><text x="%g" y="245">%s</text>`, lx, kindColor(k), lx+16, esc(k))
		lx += 30 + 6.5*float64(len(k))
	}
	b.WriteString("</g>")
}

// byteMap tabulates the file's byte ranges: the length prefix, the JSON header and the tensors
// (the first eight and the last two of a longer list).
func byteMap(path string, h headerLayout) Table {
	t := Table{Name: "01-header", Caption: "byte map of " + filepath.Base(path),
		Header: []string{"bytes", "size", "what", "dtype", "shape"}}
	t.Rows = append(t.Rows,
		[]string{"0 – 8", "8", "length prefix: u64 little-endian = " + strconv.FormatInt(h.headerLen, 10), "", ""},
		[]string{"8 – " + units.Commas(h.dataStart()), strconv.FormatInt(h.headerLen, 10),
			fmt.Sprintf("JSON header (%s, %s, %s of padding)", plural(len(h.tensors), "tensor"), plural(len(h.metadata), "metadata key"), plural(h.padding, "space")), "", ""})
	for i, ti := range h.tensors {
		if len(h.tensors) > 12 && i == 8 {
			t.Rows = append(t.Rows, []string{"…", "", fmt.Sprintf("%d more tensors", len(h.tensors)-10), "", ""})
		}
		if len(h.tensors) > 12 && i >= 8 && i < len(h.tensors)-2 {
			continue
		}
		t.Rows = append(t.Rows, []string{units.Commas(ti.Offset) + " – " + units.Commas(ti.Offset+ti.Size), strconv.FormatInt(ti.Size, 10), ti.Name, string(ti.DType), fmt.Sprint(ti.Shape)})
	}
	return t
}

// plural writes "1 tensor", "2 tensors".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func anchor(i int) string {
	if i == 0 {
		return "start"
	}
	return "middle"
}

func byteLabel(n int64) string {
	if n == 0 {
		return "0"
	}
	return units.Bytes(n)
}

// fitLabel fits a tensor name into a box width px wide at font size 10 (about 6 px a character, with room to spare):
// whole when it fits, else without the leading "model.", else the last dotted parts that fit
// ("…q_proj.weight"), else cut.
func fitLabel(name string, width float64) string {
	n := int(width / 6)
	if utf8.RuneCountInString(name) <= n {
		return name
	}
	if short := strings.TrimPrefix(name, "model."); utf8.RuneCountInString(short) <= n {
		return short
	}
	parts := strings.Split(name, ".")
	for i := 1; i < len(parts); i++ {
		if tail := "…" + strings.Join(parts[i:], "."); utf8.RuneCountInString(tail) <= n {
			return tail
		}
	}
	return shorten(name, n)
}

// shorten cuts s to n characters with an ellipsis.
func shorten(s string, n int) string {
	r := []rune(s)
	if n < 2 || len(r) <= n {
		if n < 2 {
			return ""
		}
		return s
	}
	return string(r[:n-1]) + "…"
}

// corruption is one way to break a copy of a safetensors file.
type corruption struct {
	what string
	rule loader.Rule // the rule loader.Open must report
	edit func(c *corruptCopy)
}

// corruptCopy is a header being corrupted: entries in offset order with offsets relative to the
// data, metadata as raw JSON values, optional edits of the encoded text, the length prefix and
// the payload length.
type corruptCopy struct {
	entries  []hdrEntry
	metadata [][2]string // key, raw JSON value
	text     func([]byte) []byte
	prefix   func(n uint64) uint64
	payload  int64
	fileSize int64
}

type hdrEntry struct {
	name, dtype string
	shape       []int
	begin, end  int64
}

// encode writes the header JSON the way the Hub's files have it: __metadata__ first, then each
// tensor, padded with spaces to a multiple of 8.
func (c *corruptCopy) encode() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	sep := ""
	if len(c.metadata) > 0 {
		b.WriteString(`"__metadata__":{`)
		for i, kv := range c.metadata {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(kv[0])
			fmt.Fprintf(&b, "%s:%s", k, kv[1])
		}
		b.WriteByte('}')
		sep = ","
	}
	for _, e := range c.entries {
		name, _ := json.Marshal(e.name)
		shape, _ := json.Marshal(e.shape)
		fmt.Fprintf(&b, `%s%s:{"dtype":%q,"shape":%s,"data_offsets":[%d,%d]}`, sep, name, e.dtype, shape, e.begin, e.end)
		sep = ","
	}
	b.WriteByte('}')
	for (8+b.Len())%8 != 0 {
		b.WriteByte(' ')
	}
	return b.Bytes()
}

// corruptions are the copies 01-loading shows failing, each with the rule it breaks.
var corruptions = []corruption{
	{"length prefix larger than the file", loader.RuleHeaderLength, func(c *corruptCopy) {
		c.prefix = func(uint64) uint64 { return uint64(c.fileSize) }
	}},
	{"file cut one byte short", loader.RulePayloadTruncated, func(c *corruptCopy) { c.payload-- }},
	{"one byte appended", loader.RuleTrailingBytes, func(c *corruptCopy) { c.payload++ }},
	{"a byte of the JSON is 0xFF", loader.RuleUTF8, func(c *corruptCopy) {
		c.text = func(b []byte) []byte { b[3] = 0xff; return b }
	}},
	{"closing brace of the JSON replaced by a space", loader.RuleJSON, func(c *corruptCopy) {
		c.text = func(b []byte) []byte { b[bytes.LastIndexByte(b, '}')] = ' '; return b }
	}},
	{"__metadata__ value is a number", loader.RuleMetadata, func(c *corruptCopy) {
		c.metadata = [][2]string{{"format", "1"}}
	}},
	{"two tensors with the same name", loader.RuleDuplicateKey, func(c *corruptCopy) { c.entries[1].name = c.entries[0].name }},
	{"empty tensor name", loader.RuleName, func(c *corruptCopy) { c.entries[0].name = "" }},
	{`dtype "BF17"`, loader.RuleDType, func(c *corruptCopy) { c.entries[0].dtype = "BF17" }},
	{"shape one row larger than the bytes", loader.RuleByteCount, func(c *corruptCopy) { c.entries[0].shape[0]++ }},
	{"data_offsets reversed", loader.RuleReversedOffsets, func(c *corruptCopy) {
		e := &c.entries[0]
		e.begin, e.end = e.end, e.begin
	}},
	{"second tensor moved 2 bytes back", loader.RuleOverlap, func(c *corruptCopy) { c.entries[1].begin -= 2; c.entries[1].end -= 2 }},
	{"last tensor moved 8 bytes on", loader.RuleGap, func(c *corruptCopy) {
		e := &c.entries[len(c.entries)-1]
		e.begin += 8
		e.end += 8
		c.payload += 8
	}},
}

// Corruptions writes corrupted copies of the safetensors file at path into dir (the header
// re-encoded with one change; the tensor bytes as a sparse run of zeros, since no rule reads them)
// and tabulates what loader.Open says about each. Every copy must be refused with the rule it
// breaks; one that is accepted, or refused for another rule, is an error.
func Corruptions(path, dir string) (Table, error) {
	h, err := readLayout(path)
	if err != nil {
		return Table{}, err
	}
	if len(h.tensors) < 2 {
		return Table{}, fmt.Errorf("figures: %s: %d tensors; the corruptions need two", path, len(h.tensors))
	}
	t := Table{Name: "01-corruptions", Caption: "corrupted copies of " + filepath.Base(path) + " and what loader.Open says",
		Header: []string{"corruption", "rule broken", "loader.Open's error"}}
	for i, c := range corruptions {
		cc := corruptCopy{payload: h.size - h.dataStart(), fileSize: h.size}
		for _, ti := range h.tensors {
			cc.entries = append(cc.entries, hdrEntry{ti.Name, string(ti.DType), slices.Clone(ti.Shape), ti.Offset - h.dataStart(), ti.Offset + ti.Size - h.dataStart()})
		}
		keys := make([]string, 0, len(h.metadata))
		for k := range h.metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v, _ := json.Marshal(h.metadata[k])
			cc.metadata = append(cc.metadata, [2]string{k, string(v)})
		}
		c.edit(&cc)
		text := cc.encode()
		if cc.text != nil {
			text = cc.text(text)
		}
		n := uint64(len(text))
		if cc.prefix != nil {
			n = cc.prefix(n)
		}
		copyPath := filepath.Join(dir, fmt.Sprintf("corrupt-%02d.safetensors", i))
		if err := writeSparse(copyPath, n, text, cc.payload); err != nil {
			return Table{}, err
		}
		f, err := loader.Open(copyPath)
		if err == nil {
			f.Close()
			return Table{}, fmt.Errorf("figures: corrupted copy %s (%s) was accepted by loader.Open", copyPath, c.what)
		}
		var fe *loader.FormatError
		if !errors.As(err, &fe) || fe.Rule != c.rule {
			return Table{}, fmt.Errorf("figures: corrupted copy %s (%s): want rule %q, got %w", copyPath, c.what, c.rule, err)
		}
		os.Remove(copyPath)
		msg := strings.ReplaceAll(err.Error(), copyPath, filepath.Base(copyPath))
		t.Rows = append(t.Rows, []string{c.what, string(fe.Rule), msg})
	}
	return t, nil
}

// writeSparse writes the length prefix n, the header text and payload bytes of zeros (a hole).
func writeSparse(path string, n uint64, text []byte, payload int64) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("figures: %w", err)
	}
	var prefix [8]byte
	binary.LittleEndian.PutUint64(prefix[:], n)
	_, err = f.Write(append(prefix[:], text...))
	if err == nil {
		err = f.Truncate(8 + int64(len(text)) + max(0, payload))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("figures: writing %s: %w", path, err)
	}
	return nil
}

// ConfigSwitches tabulates the five switches that let the classic decoder run Qwen3: the value
// each takes in the classic decoder (switch off) and in this configuration.
func ConfigSwitches(cfg octlm.Config) Table {
	classic := cfg
	classic.HeadDim, classic.FFHidden, classic.RopeBase, classic.RopeSplit, classic.QKNorm = 0, 0, 0, false, false
	pairing := func(c octlm.Config) string {
		if c.RopeSplit {
			return fmt.Sprintf("split halves: channel i with i+%d", c.HeadWidth()/2)
		}
		return "neighbours: channel 2i with 2i+1"
	}
	qk := func(on bool) string {
		if on {
			return "RMSNorm on every q and k head before RoPE"
		}
		return "none"
	}
	return Table{Name: "01-switches", Caption: "the five switches: classic decoder (all off) against this checkpoint",
		Header: []string{"switch", "config.json key", "classic (off)", "this checkpoint"},
		Rows: [][]string{
			{"HeadDim", "head_dim", fmt.Sprintf("d_model / n_heads = %d", classic.HeadWidth()), strconv.Itoa(cfg.HeadWidth())},
			{"FFHidden", "intermediate_size", fmt.Sprintf("⌈2/3 · 4 · d_model⌉₆₄ = %d", classic.FFWidth()), strconv.Itoa(cfg.FFWidth())},
			{"RopeBase", "rope_theta", strconv.FormatFloat(classic.Base(), 'f', -1, 64), strconv.FormatFloat(cfg.Base(), 'f', -1, 64)},
			{"RopeSplit", "(Hugging Face's rotate_half)", pairing(classic), pairing(cfg)},
			{"QKNorm", "(Qwen3 architecture)", qk(classic.QKNorm), qk(cfg.QKNorm)},
		}}
}

// ParameterCount counts the checkpoint's parameters by kind of tensor, from the tensor shapes in
// its headers, and checks the total against the configuration's count (the stored copy of a
// tied output head is listed but not counted; an untied head is counted).
func ParameterCount(dir string) (Table, error) {
	ck, err := loader.OpenCheckpoint(dir)
	if err != nil {
		return Table{}, err
	}
	defer ck.Close()
	cfg, err := octlm.ReadQwen3Config(filepath.Join(dir, "config.json"))
	if err != nil {
		return Table{}, err
	}
	count := map[string]int64{}
	tensors := map[string]int{}
	bytesOf := map[string]int64{}
	var total, stored int64
	for e, err := range ck.Tensors() {
		if err != nil {
			return Table{}, err
		}
		k := tensorKind(e.Info.Name)
		if k == "lm_head (tied copy)" && cfg.UntiedHead {
			k = "lm_head" // the output head's own weight, counted
		}
		n := int64(e.Info.NumElements())
		count[k] += n
		tensors[k]++
		bytesOf[k] += e.Info.Size
		stored += e.Info.Size
		if k != "lm_head (tied copy)" {
			total += n
		}
	}
	if total != cfg.Parameters() {
		return Table{}, fmt.Errorf("figures: %s: the tensors hold %d parameters, the configuration says %d", dir, total, cfg.Parameters())
	}
	t := Table{Name: "01-parameters", Caption: fmt.Sprintf("parameters of %s: %s (%d layers, d_model %d, vocabulary %d)", filepath.Base(dir), humanCount(total), cfg.NLayers, cfg.DModel, cfg.VocabSize),
		Header: []string{"kind", "tensors", "parameters", "share", "stored bytes"}}
	for _, k := range kinds {
		if tensors[k] == 0 {
			continue
		}
		share := fmt.Sprintf("%.1f%%", 100*float64(count[k])/float64(total))
		if k == "lm_head (tied copy)" {
			share = "—" // a copy of the embedding: not counted
		}
		t.Rows = append(t.Rows, []string{k, strconv.Itoa(tensors[k]), strconv.FormatInt(count[k], 10), share, units.Bytes(bytesOf[k])})
	}
	t.Rows = append(t.Rows, []string{"total (unique)", strconv.Itoa(ck.Len()), strconv.FormatInt(total, 10), "100.0%", units.Bytes(stored)})
	return t, nil
}

// humanCount writes a parameter count as 596M or 1.2K.
func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return strconv.FormatInt(n, 10)
}

// memSample is the process's memory at one moment of a load.
type memSample struct {
	t         time.Duration
	rss, heap int64 // bytes
	loaded    int64 // checkpoint bytes loaded so far
	hasRSS    bool
}

// rss reads the resident set size from /proc/self/statm (Linux); false elsewhere.
func rss() (int64, bool) {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	fields := strings.Fields(string(data))
	if len(fields) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * int64(os.Getpagesize()), true
}

var heapMetric = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

func heapBytes() int64 {
	s := slices.Clone(heapMetric)
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// LoadMemory loads the checkpoint with dtype weights while sampling the process's memory (resident
// set and Go heap) every millisecond and at every tensor the loader reports, and draws memory over
// time against the bytes loaded. Streaming shows as memory that grows with the loaded bytes to the
// size of the weights, with no second copy of the checkpoint on top.
func LoadMemory(src *Source, dtype octlm.DType) (Figure, Table, error) {
	runtime.GC()
	base, hasRSS := rss()
	baseHeap := heapBytes()
	start := time.Now()
	var (
		mu      sync.Mutex
		samples []memSample
		loaded  atomic.Int64
		total   atomic.Int64
	)
	sample := func() {
		r, ok := rss()
		s := memSample{t: time.Since(start), rss: r - base, heap: heapBytes() - baseHeap, loaded: loaded.Load(), hasRSS: ok}
		mu.Lock()
		samples = append(samples, s)
		mu.Unlock()
	}
	sample()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	m, err := src.load(octlm.LoadOptions{DType: dtype, Progress: func(_ string, d, t int64) {
		loaded.Store(d)
		total.Store(t)
		sample()
	}}, nil)
	close(stop)
	<-done
	if err != nil {
		return Figure{}, Table{}, err
	}
	took := time.Since(start)
	sample()
	weights := m.WeightBytes()
	params := m.Parameters()
	m.Close()

	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	var loadedS, rssS, heapS series
	loadedS = series{Label: "checkpoint bytes read", Kind: stepSeries, Color: palette[0]}
	rssS = series{Label: "resident set − before", Kind: stepSeries, Color: palette[3]}
	heapS = series{Label: "Go heap − before", Kind: stepSeries, Color: palette[2]}
	var peakRSS, peakHeap int64
	for _, s := range samples {
		ms := float64(s.t) / float64(time.Millisecond)
		loadedS.X, loadedS.Y = append(loadedS.X, ms), append(loadedS.Y, mib(s.loaded))
		heapS.X, heapS.Y = append(heapS.X, ms), append(heapS.Y, mib(s.heap))
		peakHeap = max(peakHeap, s.heap)
		if s.hasRSS {
			rssS.X, rssS.Y = append(rssS.X, ms), append(rssS.Y, mib(s.rss))
			peakRSS = max(peakRSS, s.rss)
		}
	}
	all := []series{loadedS, heapS}
	if hasRSS {
		all = append(all, rssS)
	}
	title := fmt.Sprintf("Streaming load of %s (%s, %s backend)", src.Label, dtype, src.Info.Name)
	c := chart{Title: title, Width: 760, X: axis{Label: "time since the load began (ms)"}, Y: axis{Label: "MiB"},
		Series: all, Lines: []refLine{{Label: "resident weights " + units.Bytes(weights), Value: mib(weights), Color: "#555"}},
		Note: fmt.Sprintf("%d samples (every 1 ms and after every tensor); memory relative to the moment before octlm.Load", len(samples))}
	rssCell := "n/a (no /proc/self/statm)"
	if hasRSS {
		rssCell = fmt.Sprintf("%s (%.2f× the weights)", units.Bytes(peakRSS), float64(peakRSS)/float64(weights))
	}
	t := Table{Name: "01-load", Caption: "loading " + src.Label,
		Header: []string{"measure", "value"},
		Rows: [][]string{
			{"parameters (unique)", fmt.Sprintf("%s (%s)", units.Commas(params), humanCount(params))},
			{"checkpoint bytes read", units.Bytes(total.Load())},
			{"resident weights (" + string(dtype) + ")", units.Bytes(weights)},
			{"peak Go heap growth", fmt.Sprintf("%s (%.2f× the weights)", units.Bytes(peakHeap), float64(peakHeap)/float64(weights))},
			{"peak resident set growth", rssCell},
			{"load time", took.Round(time.Millisecond).String()},
			{"backend", src.Info.Name},
		}}
	return Figure{Name: "01-load-memory", Title: title, SVG: c.render()}, t, nil
}

// TensorBytes draws the bytes of every tensor of a checkpoint as horizontal bars, largest scale
// on a KiB/MiB axis, each bar labelled with its size, coloured by kind of tensor.
func TensorBytes(label string, tensors []loader.TensorInfo) (Figure, error) {
	if len(tensors) == 0 {
		return Figure{}, fmt.Errorf("figures: TensorBytes: %s has no tensors", label)
	}
	var largest, total int64
	nameW := 0
	for _, t := range tensors {
		largest = max(largest, t.Size)
		total += t.Size
		nameW = max(nameW, utf8.RuneCountInString(t.Name))
	}
	// One unit for the whole axis: the largest power of 1024 below the largest tensor.
	unit, unitName := int64(1), "bytes"
	for _, u := range []struct {
		n    int64
		name string
	}{{1 << 10, "KiB"}, {1 << 20, "MiB"}, {1 << 30, "GiB"}} {
		if largest >= u.n {
			unit, unitName = u.n, u.name
		}
	}
	const rowH, top, w = 16.0, 44.0, 820.0
	left := min(360, 12+6*float64(nameW))
	right := w - 90 // room for the value labels
	h := top + rowH*float64(len(tensors)) + 70
	title := fmt.Sprintf("Bytes per tensor: %s (%d tensors, %s)", label, len(tensors), units.Bytes(total))
	var b strings.Builder
	svgOpen(&b, w, h, title)
	span := float64(largest) / float64(unit)
	step := niceStep(span / 5)
	hi := math.Ceil(span/step) * step
	x := func(n float64) float64 { return left + (right-left)*n/hi }
	bottom := top + rowH*float64(len(tensors))
	b.WriteString(`<g class="axes" stroke="#888">`)
	for _, t := range ticks(0, hi, false) {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#eee"/><text class="tick x" x="%.1f" y="%g" text-anchor="middle" stroke="none" fill="#333">%s</text>`,
			x(t.v), top-4, x(t.v), bottom, x(t.v), bottom+14, t.label)
	}
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g"/></g>`, left, top-4, left, bottom)
	fmt.Fprintf(&b, `<text class="axis-label x" x="%.1f" y="%g" text-anchor="middle">stored size (%s)</text>`, (left+right)/2, bottom+34, unitName)
	for i, t := range tensors {
		y := top + rowH*float64(i)
		k := tensorKind(t.Name)
		fmt.Fprintf(&b, `<g class="series" data-label="%s">`, esc(t.Name))
		fmt.Fprintf(&b, `<text x="%g" y="%.1f" text-anchor="end" font-size="10">%s</text>`, left-6, y+11, esc(fitLabel(t.Name, left-12)))
		fmt.Fprintf(&b, `<rect x="%g" y="%.1f" width="%.2f" height="%g" fill="%s"><title>%s: %s %v, %s</title></rect>`,
			left, y+2, max(0.5, x(float64(t.Size)/float64(unit))-left), rowH-4, kindColor(k), esc(t.Name), t.DType, t.Shape, units.Bytes(t.Size))
		fmt.Fprintf(&b, `<text class="value" x="%.1f" y="%.1f" font-size="10" fill="#333">%s</text></g>`, x(float64(t.Size)/float64(unit))+4, y+11, esc(units.Bytes(t.Size)))
	}
	// Legend: the kinds of tensor present.
	present := map[string]bool{}
	for _, t := range tensors {
		present[tensorKind(t.Name)] = true
	}
	lx := left
	b.WriteString(`<g class="legend">`)
	for _, k := range kinds {
		if !present[k] {
			continue
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%g" width="12" height="10" fill="%s"/><text x="%.1f" y="%g">%s</text>`, lx, h-14, kindColor(k), lx+16, h-5, esc(k))
		lx += 30 + 6.5*float64(utf8.RuneCountInString(k))
	}
	b.WriteString("</g></svg>\n")
	return Figure{Name: "00-tensor-bytes", Title: title, SVG: []byte(b.String())}, nil
}
