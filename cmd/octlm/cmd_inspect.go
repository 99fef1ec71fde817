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

	"github.com/octlm/octlm/loader"
)

func init() {
	register("inspect", "list a checkpoint's tensors, sizes and unique parameter count", func(args []string) error {
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
}

type inspectTensor struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	Bytes int64  `json:"bytes"`
	File  string `json:"file"`
}

func runInspect(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print a JSON report instead of a table")
	offline := fs.Bool("offline", false, "resolve Hub names from the cache only (like HF_HUB_OFFLINE=1)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: octlm inspect [--json] PATH\n\n"+
			"PATH is a .safetensors file, a checkpoint folder (model.safetensors or a sharded\n"+
			"model.safetensors.index.json) or a Hub name Org/Name[@revision]. Every header is\n"+
			"validated; the report lists tensors (name, dtype, shape, bytes) and totals, with\n"+
			"stored copies of tied weights counted once in the unique parameter count.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, "PATH"); err != nil {
		return err
	}
	report, err := inspectPath(context.Background(), fs.Arg(0), *offline, stderr)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	return printInspect(stdout, report)
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
		dir, err := loader.Resolve(ctx, path, loader.HubOptions{Offline: offline, Progress: progress})
		if err != nil {
			return nil, withOfflineHint(err)
		}
		c, err := loader.OpenCheckpoint(dir)
		if err != nil {
			return nil, err
		}
		defer c.Close()
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
		line := fmt.Sprintf("%s\t%s\t[%s]\t%15s\t", t.Name, t.DType, strings.Join(dims, ", "), commas(t.Bytes))
		if multi {
			line += t.File + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\npath:           %s\n", r.Path)
	fmt.Fprintf(w, "files:          %d\n", len(r.Files))
	if len(r.Metadata) > 2 {
		fmt.Fprintf(w, "metadata:       %s\n", r.Metadata)
	}
	var dts []string
	for d, n := range r.DTypes {
		dts = append(dts, fmt.Sprintf("%s x%d", d, n))
	}
	sort.Strings(dts) // map order is random; the report should read the same every time
	fmt.Fprintf(w, "entries:        %d (%s)\n", r.Entries, strings.Join(dts, ", "))
	fmt.Fprintf(w, "tensor bytes:   %s (%s)\n", commas(r.Bytes), loader.HumanBytes(r.Bytes))
	fmt.Fprintf(w, "stored params:  %s\n", commas(r.Params))
	fmt.Fprintf(w, "unique params:  %s", commas(r.UniqueParams))
	if len(r.Tied) > 0 {
		fmt.Fprintf(w, " (tied copies counted once: %s)", strings.Join(r.Tied, "; "))
	}
	_, err := fmt.Fprintln(w)
	return err
}

// commas formats 596049920 as 596,049,920.
func commas(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + commas(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
