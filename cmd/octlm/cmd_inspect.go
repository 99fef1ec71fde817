package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/octlm/octlm/hub"
	"github.com/octlm/octlm/internal/fileio"
	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/units"
)

func init() {
	register("inspect", "summarize a checkpoint (entries, parameters, dtypes, shards, tied head, config); --tensors lists them", func(args []string) error {
		return runInspect(args, os.Stdout, os.Stderr)
	})
}

// tiedPairs are stored copies of a tied weight: counted once when their bytes are equal.
var tiedPairs = [][2]string{{"lm_head.weight", "model.embed_tokens.weight"}}

// inspectReport is what inspect prints (the --json form is this struct).
type inspectReport struct {
	Path         string          `json:"path"`
	Files        []string        `json:"files"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
	Tensors      []inspectTensor `json:"tensors"`
	Entries      int             `json:"entries"`
	Bytes        int64           `json:"bytes"`
	Params       int64           `json:"params"`        // every stored element
	UniqueParams int64           `json:"unique_params"` // tied copies counted once
	Tied         []string        `json:"tied,omitempty"`
	DTypes       map[string]int  `json:"dtypes"`
	Config       json.RawMessage `json:"config,omitempty"` // the folder's config.json
	// Qwen3.5 folders (see inspectQwen35): the architecture, its layer types, the decoder's
	// shape and the vision and MTP tensors the text decoder skips.
	Architecture   string                 `json:"architecture,omitempty"`
	LayerTypes     []string               `json:"layer_types,omitempty"`
	DecoderSummary string                 `json:"decoder,omitempty"`
	Skipped        []octlm.SkippedTensors `json:"skipped,omitempty"`
}

type inspectTensor struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	Bytes int64  `json:"bytes"`
	File  string `json:"file"`
}

// runInspect is `octlm inspect`; a failed write to stdout fails it.
func runInspect(args []string, stdout, stderr io.Writer) error {
	return withOutputCheck(stdout, func(stdout io.Writer) error { return inspect(args, stdout, stderr) })
}

func inspect(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print a JSON report (every tensor, the totals, the config) instead of text")
	listTensors := fs.Bool("tensors", false, "list every tensor (name, dtype, shape, bytes; layers in numeric order) before the summary")
	offline := fs.Bool("offline", false, "resolve Hub names from the cache only (like HF_HUB_OFFLINE=1)")
	model := fs.String("model", "", "the `PATH` to inspect, as the positional argument is")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "usage: octlm inspect [--tensors] [--json] PATH   (or --model PATH)\n\n"+
			"PATH is a .safetensors file, a checkpoint folder (model.safetensors or a sharded\n"+
			"model.safetensors.index.json) or a Hub name Org/Name[@revision]. Every header is\n"+
			"validated; the summary gives entries, parameters (stored copies of tied weights\n"+
			"counted once), dtypes, shards, the tied head and, for a folder, its config.json.\n"+
			"--tensors lists the tensors too, in natural order (layers 0, 1, 2, ..., 10).\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, "[PATH]"); err != nil {
		return err
	}
	path, err := pathArg(fs, *model, "PATH")
	if err != nil {
		return err
	}
	report, err := inspectPath(context.Background(), path, *offline, stderr)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	if *listTensors {
		return printInspect(stdout, report)
	}
	return printSummary(stdout, report)
}

func inspectPath(ctx context.Context, path string, offline bool, progress io.Writer) (*inspectReport, error) {
	var entries []loader.Entry
	var files []*loader.File
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		f, err := loader.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		files = []*loader.File{f}
		for _, t := range f.Tensors() {
			entries = append(entries, loader.Entry{File: f, Info: t})
		}
	} else {
		dir, err := hub.Resolve(ctx, path, hub.Options{Offline: offline, Progress: progress})
		if err != nil {
			return nil, withOfflineHint(err)
		}
		c, err := loader.OpenCheckpoint(dir)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		for _, w := range c.Warnings() {
			fmt.Fprintf(progress, "warning: %s\n", printable(w))
		}
		files = c.Files()
		for e, err := range c.Tensors() {
			if err != nil {
				return nil, err
			}
			entries = append(entries, e)
		}
		path = dir
	}
	r := &inspectReport{Path: path, DTypes: map[string]int{}}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		r.Config = readConfigJSON(filepath.Join(path, "config.json"))
	}
	for _, f := range files {
		r.Files = append(r.Files, f.Path())
	}
	if len(files) == 1 {
		r.Metadata, _ = json.Marshal(files[0].Metadata())
	}
	byName := map[string]loader.Entry{}
	for _, e := range entries {
		t := e.Info
		byName[t.Name] = e
		r.Tensors = append(r.Tensors, inspectTensor{t.Name, string(t.DType), t.Shape, t.Size, filepath.Base(e.File.Path())})
		r.Bytes += t.Size
		r.Params += int64(t.NumElements())
		r.DTypes[string(t.DType)]++
	}
	r.Entries = len(entries)
	sortNatural(r.Tensors)
	r.UniqueParams = r.Params
	for _, pair := range tiedPairs {
		a, okA := byName[pair[0]]
		b, okB := byName[pair[1]]
		if !okA || !okB {
			continue
		}
		same, err := loader.SameData(a, b)
		if err != nil {
			return nil, err
		}
		if same {
			r.UniqueParams -= int64(a.Info.NumElements())
			r.Tied = append(r.Tied, pair[0]+" = "+pair[1])
		}
	}
	if r.Config != nil && octlm.IsQwen35Config(r.Config) {
		inspectQwen35(r)
	}
	return r, nil
}

func printInspect(w io.Writer, r *inspectReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	multi := len(r.Files) > 1
	head := fmt.Sprintf("name\tdtype\tshape\t%15s\t", "bytes")
	if multi {
		head += "file\t"
	}
	fmt.Fprintln(tw, head)
	for _, t := range r.Tensors {
		dims := make([]string, len(t.Shape))
		for i, d := range t.Shape {
			dims[i] = fmt.Sprint(d)
		}
		line := fmt.Sprintf("%s\t%s\t[%s]\t%15s\t", printable(t.Name), printable(t.DType), strings.Join(dims, ", "), units.Commas(t.Bytes))
		if multi {
			line += printable(t.File) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return printSummary(w, r)
}

// printSummary prints the report's totals: where, shards, dtypes, parameters, the tied head,
// the config.
func printSummary(w io.Writer, r *inspectReport) error {
	fmt.Fprintf(w, "path:           %s\n", printable(r.Path))
	fmt.Fprintf(w, "files:          %s\n", printable(shardList(r.Files)))
	if len(r.Metadata) > 2 {
		fmt.Fprintf(w, "metadata:       %s\n", printable(string(r.Metadata)))
	}
	var dts []string
	for d, n := range r.DTypes {
		dts = append(dts, fmt.Sprintf("%s x%d", d, n))
	}
	sort.Strings(dts) // map order is random; the report should read the same every time
	fmt.Fprintf(w, "entries:        %d (%s)\n", r.Entries, strings.Join(dts, ", "))
	fmt.Fprintf(w, "tensor bytes:   %s (%s)\n", units.Commas(r.Bytes), units.Bytes(r.Bytes))
	fmt.Fprintf(w, "stored params:  %s\n", units.Commas(r.Params))
	fmt.Fprintf(w, "unique params:  %s", units.Commas(r.UniqueParams))
	if len(r.Tied) > 0 {
		fmt.Fprintf(w, " (tied copies counted once: %s)", printable(strings.Join(r.Tied, "; ")))
	}
	fmt.Fprintln(w)
	if line := configSummary(r.Config); line != "" {
		fmt.Fprintf(w, "config.json:    %s\n", printable(line))
	}
	printQwen35Summary(w, r)
	_, err := fmt.Fprintln(w, "(--tensors lists every tensor)")
	return err
}

// shardList is "1 (model.safetensors)", or the count and the first and last file of a sharded
// checkpoint.
func shardList(files []string) string {
	switch n := len(files); {
	case n == 0:
		return "0"
	case n == 1:
		return "1 (" + filepath.Base(files[0]) + ")"
	case n <= 3:
		names := make([]string, n)
		for i, f := range files {
			names[i] = filepath.Base(f)
		}
		return fmt.Sprintf("%d shards (%s)", n, strings.Join(names, ", "))
	default:
		return fmt.Sprintf("%d shards (%s ... %s)", n, filepath.Base(files[0]), filepath.Base(files[n-1]))
	}
}

// maxConfigBytes bounds the config.json inspect reads: real ones are a few KiB.
const maxConfigBytes = 1 << 20

// readConfigJSON returns the JSON object in path, or nil when there is none to show (absent,
// not a regular file, too large, not a JSON object): the summary then has no config line.
func readConfigJSON(path string) json.RawMessage {
	data, err := fileio.ReadFile(path, maxConfigBytes)
	var obj map[string]json.RawMessage
	if err != nil || json.Unmarshal(data, &obj) != nil || obj == nil {
		return nil
	}
	compact, err := json.Marshal(obj)
	if err != nil {
		return nil
	}
	return compact
}

// configKeys are the config.json fields the summary shows, in this order, under short names.
var configKeys = []struct{ key, label string }{
	{"model_type", ""}, {"num_hidden_layers", "layers"}, {"hidden_size", "hidden"},
	{"num_attention_heads", "heads"}, {"num_key_value_heads", "kv_heads"}, {"head_dim", "head_dim"},
	{"intermediate_size", "ff"}, {"vocab_size", "vocab"}, {"max_position_embeddings", "context"},
	{"tie_word_embeddings", "tied"}, {"torch_dtype", "dtype"},
}

// configSummary is one line of config's main fields, e.g. "qwen3, layers 28, hidden 1024, ...".
func configSummary(config json.RawMessage) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(config, &obj) != nil {
		return ""
	}
	var parts []string
	for _, k := range configKeys {
		v, ok := obj[k.key]
		if !ok {
			continue
		}
		text := strings.Trim(string(v), `"`)
		if k.label != "" {
			text = k.label + " " + text
		}
		parts = append(parts, text)
	}
	return strings.Join(parts, ", ")
}

// sortNatural orders tensors by name with digit runs compared as numbers, so that layer 10
// comes after layer 9, not after layer 1.
func sortNatural(ts []inspectTensor) {
	sort.SliceStable(ts, func(i, j int) bool { return naturalLess(ts[i].Name, ts[j].Name) })
}

// naturalLess compares a and b piece by piece: runs of digits by value, other bytes as bytes.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			if da != db {
				return da < db // "01" after "1"
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

// digitRun is the length of the run of ASCII digits at the start of s.
func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// inspectQwen35 adds the architecture, its layer types and the tensors the decoder skips to an
// inspect report of a Qwen3.5 folder.
func inspectQwen35(r *inspectReport) {
	cfg, err := octlm.Qwen35ConfigFrom(r.Config)
	if err != nil {
		r.Architecture = "qwen3_5 (config refused: " + err.Error() + ")"
		return
	}
	form := "Qwen3_5ForCausalLM (text only)"
	if cfg.Multimodal {
		form = "Qwen3_5ForConditionalGeneration (multimodal; octlm runs its text decoder)"
	}
	r.Architecture = "qwen3_5: " + form
	r.LayerTypes = cfg.LayerTypes
	r.DecoderSummary = cfg.Summary()
	for _, p := range octlm.Qwen35SkippedPrefixes() {
		s := octlm.SkippedTensors{Prefix: p}
		for _, t := range r.Tensors {
			if strings.HasPrefix(t.Name, p) {
				s.Count++
				s.Bytes += t.Bytes
			}
		}
		r.Skipped = append(r.Skipped, s)
	}
}

// printQwen35Summary prints inspectQwen35's lines.
func printQwen35Summary(w io.Writer, r *inspectReport) {
	if r.Architecture == "" {
		return
	}
	fmt.Fprintf(w, "architecture:   %s\n", printable(r.Architecture))
	if r.DecoderSummary != "" {
		fmt.Fprintf(w, "decoder:        %s\n", printable(r.DecoderSummary))
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped:        %s* %d tensors, %s (%s): not read by the text decoder\n", printable(s.Prefix), s.Count, units.Commas(s.Bytes), units.Bytes(s.Bytes))
	}
}
