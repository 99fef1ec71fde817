package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// testdata/executed.ipynb was executed by jupyter nbconvert --execute --allow-errors with the gonb
// kernel (docker/install.sh). Its cells: 1 setup, 2 stdout and harmless stderr, 3 an HTML table, an
// SVG (gonbui.DisplaySVG) and a PNG, 4 panic, 5 os.Exit(3), 6 a compile error, 7 fine.
func readFixture(t *testing.T) (*notebook, []byte) {
	t.Helper()
	b, err := os.ReadFile("testdata/executed.ipynb")
	if err != nil {
		t.Fatal(err)
	}
	nb, err := parseNotebook("executed.ipynb", b)
	if err != nil {
		t.Fatal(err)
	}
	return nb, b
}

// keepCells returns a copy of nb with only the given 1-based cells.
func keepCells(nb *notebook, cells ...int) *notebook {
	out := *nb
	out.Cells = nil
	for _, c := range cells {
		out.Cells = append(out.Cells, nb.Cells[c-1])
	}
	return &out
}

type found struct {
	cell int
	msg  string // prefix of problem.Msg
}

func matchProblems(t *testing.T, got []problem, want []found) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), problemsString(got))
	}
	for i, w := range want {
		if got[i].Cell != w.cell || !strings.HasPrefix(got[i].Msg, w.msg) {
			t.Errorf("problem %d = cell %d %q, want cell %d %q...", i, got[i].Cell, got[i].Msg, w.cell, w.msg)
		}
	}
}

func problemsString(ps []problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.String())
		b.WriteString("\n")
	}
	return b.String()
}

func TestCheckExecuted(t *testing.T) {
	nb, _ := readFixture(t)
	stream := func(name, text string) output {
		return output{OutputType: "stream", Name: name, Text: multiText(text)}
	}
	one := 1
	synthetic := func(outs ...output) *notebook {
		return &notebook{NBFormat: 4, Cells: []cell{{CellType: "code", Source: "%%\nx()", ExecutionCount: &one, Outputs: outs}}}
	}
	tests := []struct {
		name string
		nb   *notebook
		want []found
	}{
		{"gonb fixture", nb, []found{
			{4, "the cell's program exited with status 2"},
			{5, "the cell's program exited with status 3"},
			{6, "gonb reported an error"},
			{6, "error output: ERROR: failed to run"},
		}},
		{"clean cells of the fixture", keepCells(nb, 1, 2, 3, 7), nil},
		{"fatal error on stderr", synthetic(stream("stderr", "fatal error: runtime: out of memory\n")), []found{{1, "the cell's program crashed"}}},
		{"panic on stdout is text", synthetic(stream("stdout", "panic: this is printed, not raised\nexit status 1\n")), nil},
		{"stderr progress", synthetic(stream("stderr", "loading 3/28 layers\n")), nil},
		{"killed", synthetic(stream("stderr", "signal: killed\n")), []found{{1, "the cell's program crashed"}}},
		{"not executed", &notebook{NBFormat: 4, Cells: []cell{{CellType: "code", Source: "%%\nx()"}}}, []found{{1, "was not executed"}}},
		{"tagged skip-execution need not run", func() *notebook {
			c := cell{CellType: "code", Source: "%%\nwidgets()"}
			c.Metadata.Tags = []string{"skip-execution"}
			return &notebook{NBFormat: 4, Cells: []cell{c}}
		}(), nil},
		{"another tag does not excuse it", func() *notebook {
			c := cell{CellType: "code", Source: "%%\nx()"}
			c.Metadata.Tags = []string{"slow"}
			return &notebook{NBFormat: 4, Cells: []cell{c}}
		}(), []found{{1, "was not executed"}}},
		{"empty cell need not run", &notebook{NBFormat: 4, Cells: []cell{{CellType: "code", Source: "  \n"}}}, nil},
		{"markdown ignored", &notebook{NBFormat: 4, Cells: []cell{{CellType: "markdown", Source: "exit status 3"}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			matchProblems(t, checkExecuted(tt.nb), tt.want)
		})
	}
}

func TestExpectations(t *testing.T) {
	nb, _ := readFixture(t)
	tests := []struct {
		line string
		ok   bool
	}{
		{"table", true},
		{"table 1", true},
		{"table 2", false},
		{"svg", true},
		{"figure", false}, // the fixture's SVG is inline HTML (gonbui.DisplaySVG), which export sanitises
		{"png 1", true},
		{"png 2", false},
		{"mime image/png", true},
		{"mime text/html 3", true}, // table, SVG, and the compile error's HTML
		{"mime text/html 4", false},
		{"mime image/svg+xml", false}, // gonbui.DisplaySVG sends HTML
		{"text hello from demo", true},
		{"text hello from nowhere", false},
		{"text max |Δlogit|", true},
		{`regex <td>[0-9.]+e-0[5-9]</td>`, true},
		{`regex <td>[0-9.]+e-0[1-4]</td>`, false},
		{`regex ^after simd$`, true},
		{"absent NaN", true},
		{"absent boom", false},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			exps, err := parseExpectations("x.expect", strings.NewReader("# comment\n\n"+tt.line+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			probs := checkExpectations(nb, exps)
			if tt.ok && len(probs) > 0 {
				t.Errorf("unexpected failure: %s", problemsString(probs))
			}
			if !tt.ok {
				if len(probs) != 1 {
					t.Fatalf("got %d problems, want 1", len(probs))
				}
				if !strings.HasPrefix(probs[0].Msg, "x.expect:3: ") {
					t.Errorf("problem %q does not name x.expect:3", probs[0].Msg)
				}
			}
		})
	}
}

func TestParseExpectationsErrors(t *testing.T) {
	tests := []struct {
		text, want string
	}{
		{"tables 2", "x.expect:1: unknown expectation \"tables\""},
		{"table 0", "x.expect:1: count \"0\""},
		{"svg two", "x.expect:1: count \"two\""},
		{"# only\n\nmime html", "x.expect:3: mime wants a MIME type"},
		{"text", "x.expect:1: text wants a string"},
		{"regex (", "x.expect:1: error parsing regexp"},
		{"# nothing\n", "x.expect: no expectations"},
	}
	for _, tt := range tests {
		_, err := parseExpectations("x.expect", strings.NewReader(tt.text))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parse %q: error %v, want %q", tt.text, err, tt.want)
		}
	}
}

func TestCheckCommitted(t *testing.T) {
	nb, raw := readFixture(t)
	stripped, _, err := strip("executed.ipynb", raw)
	if err != nil {
		t.Fatal(err)
	}
	clean, err := parseNotebook("stripped", stripped)
	if err != nil {
		t.Fatal(err)
	}
	wrongKernel := *clean
	wrongKernel.Metadata.Kernelspec.Name = "python3"
	noSetup := keepCells(clean, 2, 3)
	var executedWant []found
	for i := 1; i <= 7; i++ {
		executedWant = append(executedWant, found{i, "has "})
	}
	tests := []struct {
		name string
		nb   *notebook
		want []found
	}{
		{"stripped", clean, nil},
		{"executed", nb, executedWant},
		{"kernel", &wrongKernel, []found{{0, `kernelspec name is "python3"`}}},
		{"no setup cell", noSetup, []found{{1, "the first code cell must run the setup line"}}},
		{"no code", &notebook{NBFormat: 4, Cells: []cell{{CellType: "markdown"}}}, []found{{0, `kernelspec name is ""`}, {0, "no code cells"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.nb.Metadata.Kernelspec.Name == "" && tt.name != "no code" {
				t.Fatal("fixture lost its kernelspec")
			}
			matchProblems(t, checkCommitted(tt.nb), tt.want)
		})
	}
}

func TestStrip(t *testing.T) {
	_, raw := readFixture(t)
	out, changed, err := strip("executed.ipynb", raw)
	if err != nil {
		t.Fatal(err)
	}
	if !changed {
		t.Fatal("strip of an executed notebook reported no change")
	}
	again, changed2, err := strip("stripped", out)
	if err != nil {
		t.Fatal(err)
	}
	if changed2 || !bytes.Equal(again, out) {
		t.Errorf("strip is not idempotent: changed=%v, equal=%v", changed2, bytes.Equal(again, out))
	}
	if bytes.Contains(out, []byte(`\u003c`)) || !bytes.HasSuffix(out, []byte("}\n")) {
		t.Errorf("strip output is not written as Jupyter writes it (HTML escaped or no final newline)")
	}
	// Everything but outputs and execution counts survives.
	var before, after map[string]any
	if err := json.Unmarshal(raw, &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &after); err != nil {
		t.Fatal(err)
	}
	for _, m := range []map[string]any{before, after} {
		for _, c := range m["cells"].([]any) {
			cm := c.(map[string]any)
			delete(cm, "outputs")
			delete(cm, "execution_count")
		}
	}
	bj, _ := json.Marshal(before)
	aj, _ := json.Marshal(after)
	if !bytes.Equal(bj, aj) {
		t.Errorf("strip changed more than outputs:\nbefore %s\nafter  %s", bj, aj)
	}
	if _, _, err := strip("bad", []byte(`{"cells": 3}`)); err == nil {
		t.Error("strip accepted a notebook whose cells are not a list")
	}
}

func TestMultiText(t *testing.T) {
	tests := []struct {
		json, want string
	}{
		{`"one"`, "one"},
		{`["a\n", "b"]`, "a\nb"},
		{`null`, ""},
		{`{"k": 1}`, `{"k": 1}`},
		{`[1, 2]`, `[1, 2]`},
	}
	for _, tt := range tests {
		var m multiText
		if err := json.Unmarshal([]byte(tt.json), &m); err != nil {
			t.Errorf("%s: %v", tt.json, err)
			continue
		}
		if string(m) != tt.want {
			t.Errorf("%s -> %q, want %q", tt.json, m, tt.want)
		}
	}
}

func TestParseNotebookRejects(t *testing.T) {
	for _, b := range []string{`not json`, `{"nbformat": 3, "cells": []}`} {
		if _, err := parseNotebook("x.ipynb", []byte(b)); err == nil || !strings.HasPrefix(err.Error(), "x.ipynb: ") {
			t.Errorf("parse %q: error %v, want one naming x.ipynb", b, err)
		}
	}
}

func TestIsKlogLine(t *testing.T) {
	tests := []struct {
		line string
		want bool
	}{
		{"I1130 07:33:52.867850   15753 main.go:187] x", true},
		{"E1130 07:33:54.300013   15753 execcode.go:258] Failed", true},
		{"Traceback (most recent call last):", false},
		{"nbclient.exceptions.CellExecutionError: An error occurred", false},
		{"I", false},
	}
	for _, tt := range tests {
		if got := isKlogLine(tt.line); got != tt.want {
			t.Errorf("isKlogLine(%q) = %v, want %v", tt.line, got, tt.want)
		}
	}
}
