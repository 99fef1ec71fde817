package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// figureFiles are the files `octlm figures` writes for a checkpoint with a reference.
var figureFiles = []string{
	"01-header.svg", "01-load-memory.svg", "02-rope-pairs.svg", "02-rope-angles.svg", "02-wrong-pairing.svg",
	"03-token-latency.svg", "03-half-greedy.svg", "04-error-histogram.svg", "04-per-position.svg", "04-logit-range.svg",
	"01-header.md", "01-corruptions.md", "01-switches.md", "01-parameters.md", "01-load.md", "02-rope-angles.md",
	"02-wrong-pairing.md", "03-generation.md", "03-half-greedy.md", "04-parity.md", "04-argmax.md", "04-logit-range.md",
	"03-tokens.html", "03-chat-prompt.html",
}

func TestFiguresCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every figure on the bundled checkpoint")
	}
	out := filepath.Join(t.TempDir(), "figs")
	var stdout, stderr bytes.Buffer
	if err := runFigures([]string{"--backend", "go", "--out", out}, &stdout, &stderr); err != nil {
		t.Fatalf("octlm figures: %v\n%s", err, stderr.String())
	}
	var want []string
	for _, f := range figureFiles {
		want = append(want, filepath.Join(out, f))
	}
	if got := strings.Fields(stdout.String()); !slices.Equal(got, want) {
		t.Errorf("stdout lists\n%q\nwant\n%q", got, want)
	}
	for _, f := range figureFiles {
		data, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		switch filepath.Ext(f) {
		case ".svg":
			dec := xml.NewDecoder(bytes.NewReader(data))
			var root string
			for {
				tok, err := dec.Token()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				if el, ok := tok.(xml.StartElement); ok && root == "" {
					root = el.Name.Local
				}
			}
			if root != "svg" {
				t.Errorf("%s: root %q", f, root)
			}
		case ".md":
			if !bytes.Contains(data, []byte("| --- |")) {
				t.Errorf("%s is not a Markdown table:\n%s", f, data)
			}
		case ".html":
			if !bytes.Contains(data, []byte(`class="token"`)) {
				t.Errorf("%s has no tokens", f)
			}
		}
	}
	parityTable, err := os.ReadFile(filepath.Join(out, "04-parity.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(parityTable, []byte("PASS: all 8 comparisons within 0.001")) || bytes.Contains(parityTable, []byte("| FAIL |")) {
		t.Errorf("04-parity.md:\n%s", parityTable)
	}
}

// A reference with one logit moved fails the gate: the figures are still written, the exit status is 1.
func TestFiguresCommandGateFails(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every figure on the bundled checkpoint")
	}
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	err := runFigures([]string{"--backend", "go", "--model", testdata("tiny-qwen3"), "--reference", movedReference(t), "--out", out}, &stdout, &stderr)
	if !errors.Is(err, errCheckFailed) {
		t.Fatalf("err %v, want a failed check\n%s", err, stderr.String())
	}
	table, rerr := os.ReadFile(filepath.Join(out, "04-parity.md"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	if !bytes.Contains(table, []byte("FAIL")) {
		t.Errorf("04-parity.md does not show the failure:\n%s", table)
	}
}

func TestFiguresCommandUsage(t *testing.T) {
	for _, args := range [][]string{{"--nope"}, {"extra"}, {"--out", ""}} {
		err := runFigures(args, io.Discard, io.Discard)
		var u usageError
		if !errors.As(err, &u) {
			t.Errorf("%q: err %v, want a usage error", args, err)
		}
	}
}

// TestFiguresOutChecksFirst: a --out folder that holds figures is refused before anything is
// computed (the model named is never opened: it does not exist), unless --force; other files
// in the folder do not count.
func TestFiguresOutChecksFirst(t *testing.T) {
	out := t.TempDir()
	missing := filepath.Join(t.TempDir(), "no-model")
	if err := os.WriteFile(filepath.Join(out, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := runFigures([]string{"--model", missing, "--out", out}, io.Discard, io.Discard)
	if err == nil || strings.Contains(err.Error(), "already holds") || !strings.Contains(err.Error(), "no-model") {
		t.Errorf("a folder without figures: err %v, want the missing model", err)
	}
	if err := os.WriteFile(filepath.Join(out, "01-header.svg"), []byte("<svg/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = runFigures([]string{"--model", missing, "--out", out}, io.Discard, io.Discard)
	var u usageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "already holds figures (01-header.svg)") {
		t.Errorf("a folder with figures: err %v, want it refused before the model is opened", err)
	}
	err = runFigures([]string{"--model", missing, "--out", out, "--force"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no-model") {
		t.Errorf("--force: err %v, want the missing model", err)
	}
}
