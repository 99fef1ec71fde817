//go:build unix

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/parity"
)

// within fails the test when f has not returned in a few seconds: the inputs here are ones a
// careless reader would block on forever or allocate for without bound.
func within(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("did not return within 20 s")
		return nil
	}
}

// copyDir copies the regular files of src (not its subfolders) into a new temporary folder.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// hiddenLeft lists the hidden entries (temporaries) in dir.
func hiddenLeft(t *testing.T, dir string) []string {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestSmallFilesBounded: config.json, tokenizer.json and generation_config.json that are a
// FIFO or a symlink to /dev/zero are refused promptly, naming the file, by the commands that
// read them.
func TestSmallFilesBounded(t *testing.T) {
	tiny := testdata("tiny-qwen3")
	tok := testdata("qwen3-tokenizer")
	type command func(dir string) error
	parityCmd := func(dir string) error {
		return runParity([]string{"--backend", "go", "--model", dir, "--reference", filepath.Join(tiny, "reference")}, io.Discard, io.Discard)
	}
	tokenizeCmd := func(dir string) error {
		return runTokenizeIO([]string{"--model", dir}, strings.NewReader(`"hi"`+"\n"), io.Discard, io.Discard)
	}
	generateCmd := func(dir string) error {
		return runGenerate([]string{"--backend", "go", "--model", dir, "--prompt-ids", "1,2", "--max-new-tokens", "1"}, io.Discard, io.Discard)
	}
	cases := []struct {
		file string
		src  string
		run  command
	}{
		{"config.json", tiny, parityCmd},
		{"tokenizer.json", tok, tokenizeCmd},
		{"generation_config.json", tiny, generateCmd},
	}
	for _, c := range cases {
		for _, kind := range []string{"FIFO", "symlink to /dev/zero"} {
			t.Run(c.file+" "+kind, func(t *testing.T) {
				dir := copyDir(t, c.src)
				p := filepath.Join(dir, c.file)
				os.Remove(p)
				var err error
				if kind == "FIFO" {
					err = syscall.Mkfifo(p, 0o644)
				} else {
					err = os.Symlink("/dev/zero", p)
				}
				if err != nil {
					t.Fatal(err)
				}
				err = within(t, func() error { return c.run(dir) })
				if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "not a regular file") {
					t.Fatalf("got %v, want a not-a-regular-file error naming %s", err, p)
				}
			})
		}
	}
}

// TestParityOutKeepsFile: --out is replaced only by a complete run; bad input leaves an
// existing file as it was, an unwritable destination fails before any work, and /dev/full
// fails the command instead of losing the rows.
func TestParityOutKeepsFile(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "rows.jsonl")
	if err := os.WriteFile(existing, []byte("earlier rows\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, out string
		args      []string
		wantErr   string
	}{
		{"bad input", existing, []string{"--model", filepath.Join(dir, "missing")}, "missing"},
		{"missing folder", filepath.Join(dir, "no", "rows.jsonl"), nil, "--out"},
		{"/dev/full", "/dev/full", []string{"--backend", "go"}, "--out"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.out == "/dev/full" {
				if _, err := os.Stat("/dev/full"); err != nil {
					t.Skip("no /dev/full")
				}
			}
			var stderr bytes.Buffer
			err := runParity(append([]string{"--out", c.out}, c.args...), io.Discard, &stderr)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, c.wantErr)
			}
			if c.name == "missing folder" && strings.Contains(stderr.String(), "loading") {
				t.Errorf("loaded the model before failing on --out:\n%s", stderr.String())
			}
			if b, _ := os.ReadFile(existing); string(b) != "earlier rows\n" {
				t.Errorf("the existing file now holds %q", b)
			}
			if left := hiddenLeft(t, dir); len(left) > 0 {
				t.Errorf("temporaries left: %v", left)
			}
		})
	}
	if st, err := os.Stat("/dev/full"); err == nil && st.Mode().IsRegular() {
		t.Fatal("/dev/full was replaced by a regular file")
	}
}

// TestManifestNeedsForce: an existing manifest is replaced only with --force.
func TestManifestNeedsForce(t *testing.T) {
	dir := copyDir(t, testdata("tiny-qwen3"))
	if err := runManifest([]string{dir}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, loader.ManifestFileName)
	before := fileSum(t, manifest)
	// Tamper with the folder: re-running without --force must not bless the change.
	if err := os.WriteFile(filepath.Join(dir, "cases.json"), []byte("[[1]]"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := runManifest([]string{dir}, io.Discard, io.Discard)
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("got %v, want a usage error asking for --force", err)
	}
	if fileSum(t, manifest) != before {
		t.Fatal("the manifest changed without --force")
	}
	if err := runManifest([]string{"--verify", dir}, io.Discard, io.Discard); !errors.Is(err, errCheckFailed) {
		t.Fatalf("--verify of the tampered folder: %v, want a failed check", err)
	}
	if err := runManifest([]string{"--force", dir}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if fileSum(t, manifest) == before {
		t.Fatal("--force did not rewrite the manifest")
	}
	if left := hiddenLeft(t, dir); len(left) > 0 {
		t.Errorf("temporaries left: %v", left)
	}
}

// TestWriteErrorsFail: a command whose output cannot be written (full disk, closed pipe)
// fails instead of exiting 0.
func TestWriteErrorsFail(t *testing.T) {
	dir := copyDir(t, testdata("tiny-qwen3"))
	if err := runManifest([]string{dir}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		run  func(stdout io.Writer) error
	}{
		{"backends", func(w io.Writer) error { return runBackends([]string{"--check=false"}, w, io.Discard) }},
		{"manifest --verify", func(w io.Writer) error { return runManifest([]string{"--verify", dir}, w, io.Discard) }},
		{"manifest --force", func(w io.Writer) error { return runManifest([]string{"--force", dir}, w, io.Discard) }},
		{"inspect", func(w io.Writer) error { return runInspect([]string{"--tensors", dir}, w, io.Discard) }},
		{"inspect --json", func(w io.Writer) error { return runInspect([]string{"--json", dir}, w, io.Discard) }},
		{"synth", func(w io.Writer) error {
			return runSynth([]string{"--like", "tiny", "--no-tokenizer", "--out", filepath.Join(t.TempDir(), "s")}, w, io.Discard)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.run(failingWriter{}) // main_test.go: every write fails
			if err == nil || !strings.Contains(err.Error(), "no space left on device") {
				t.Fatalf("got %v, want the write error", err)
			}
		})
	}
}

// TestInspectEscapesNames: tensor names and metadata with terminal escape sequences are
// printed escaped; the JSON report keeps them exact.
func TestInspectEscapesNames(t *testing.T) {
	evil := "w\x1b]0;owned\x07\x1b[2J\u009b31m\u202e"
	path := filepath.Join(t.TempDir(), "evil.safetensors")
	err := loader.WriteFile(path, []loader.WriteTensor{{Name: evil, DType: loader.F32, Shape: []int{1}, Data: make([]byte, 4)}},
		map[string]string{"note\x1b[5m": "x\x1b[31m\u0085"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runInspect([]string{"--tensors", path}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, bad := range []string{"\x1b", "\x07", "\u009b", "\u0085", "\u202e"} {
		if strings.Contains(text, bad) {
			t.Errorf("output holds the raw control %q:\n%s", bad, text)
		}
	}
	for _, want := range []string{`w\x1b]0;owned\x07\x1b[2J\x9b31m\u202e`, `\x85`} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks the escaped form %s:\n%s", want, text)
		}
	}
	out.Reset()
	if err := runInspect([]string{"--json", path}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `\u001b]0;owned`) {
		t.Errorf("JSON report lost the name:\n%s", out.String())
	}
}

// TestPrintable checks the escaping rules on their own.
func TestPrintable(t *testing.T) {
	cases := []struct{ in, want, wantText string }{
		{"model.layers.0.mlp", "model.layers.0.mlp", "model.layers.0.mlp"},
		{"東京 🚀", "東京 🚀", "東京 🚀"},
		{"a\x1b[2Jb", `a\x1b[2Jb`, `a\x1b[2Jb`},
		{"tab\tnew\nline", `tab\x09new\x0aline`, "tab\tnew\nline"},
		{"c1 \u009b and del \x7f", `c1 \x9b and del \x7f`, `c1 \x9b and del \x7f`},
		{"bidi \u202e\u2066", `bidi \u202e\u2066`, `bidi \u202e\u2066`},
		{"bad \xff utf8", `bad \xff utf8`, `bad \xff utf8`},
		{"replacement \ufffd kept", "replacement \ufffd kept", "replacement \ufffd kept"},
	}
	for _, c := range cases {
		if got := printable(c.in); got != c.want {
			t.Errorf("printable(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := printableText(c.in); got != c.wantText {
			t.Errorf("printableText(%q) = %q, want %q", c.in, got, c.wantText)
		}
	}
}

// TestBenchBandwidthBoundedByMemory: a bandwidth read larger than the memory is refused
// before anything is loaded, with the numbers.
func TestBenchBandwidthBoundedByMemory(t *testing.T) {
	var stderr bytes.Buffer
	err := within(t, func() error {
		return runBench([]string{"--model", testdata("tiny-qwen3"), "--backend", "go", "--bandwidth-gib", "1000000"}, io.Discard, &stderr)
	})
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "does not fit") || !strings.Contains(err.Error(), "GiB") {
		t.Fatalf("got %v, want a usage error with the sizes", err)
	}
	if strings.Contains(stderr.String(), "loading") {
		t.Errorf("loaded the model before refusing:\n%s", stderr.String())
	}
}

// TestParityWarnsJunkReferenceFiles: a misnamed reference file is reported on stderr, not
// silently skipped.
func TestParityWarnsJunkReferenceFiles(t *testing.T) {
	ref := copyDir(t, testdata("tiny-qwen3", "reference"))
	junk := filepath.Join(ref, "reference-logits-x.safetensors")
	if err := os.WriteFile(junk, []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if err := runParity([]string{"--backend", "go", "--model", testdata("tiny-qwen3"), "--reference", ref}, io.Discard, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "warning: "+junk+": ignored") {
		t.Errorf("stderr does not warn about %s:\n%s", junk, stderr.String())
	}
	if r, err := parity.ReadReference(testdata("tiny-qwen3", "reference")); err != nil || len(r.Warnings) != 0 {
		t.Errorf("clean reference: warnings %q, %v", r.Warnings, err)
	}
}

// TestStrayShardWarnedByCommands: a shard the index does not list is warned about by inspect
// and by the commands that load the model.
func TestStrayShardWarnedByCommands(t *testing.T) {
	dir := copyDir(t, testdata("tiny-qwen3"))
	stray := filepath.Join(dir, "model-00002-of-00002.safetensors")
	if err := loader.WriteFile(stray, []loader.WriteTensor{{Name: "extra", DType: loader.F32, Shape: []int{1}, Data: make([]byte, 4)}}, nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		run  func(stderr io.Writer) error
	}{
		{"inspect", func(w io.Writer) error { return runInspect([]string{dir}, io.Discard, w) }},
		{"parity", func(w io.Writer) error {
			return runParity([]string{"--backend", "go", "--model", dir, "--reference", testdata("tiny-qwen3", "reference")}, io.Discard, w)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if err := c.run(&stderr); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(stderr.String(), "warning: "+stray+": ignored") {
				t.Errorf("stderr does not warn about %s:\n%s", stray, stderr.String())
			}
		})
	}
}

// TestSynthSafeOutput: synth refuses sizes beyond the free disk before writing, replaces an
// existing checkpoint only with --force (and then wholly: no stale reference/ left), never
// replaces a folder that is not a checkpoint, and leaves no temporaries.
func TestSynthSafeOutput(t *testing.T) {
	root := t.TempDir()
	tiny := []string{"--like", "tiny", "--no-tokenizer"}
	synthTo := func(out string, extra ...string) error {
		return within(t, func() error {
			return runSynth(append(append(append([]string{}, tiny...), "--out", out), extra...), io.Discard, io.Discard)
		})
	}
	t.Run("sizes beyond what octlm reads", func(t *testing.T) {
		// Refused before any list of tensors is made (Qwen3.5's would hold one per layer).
		for _, like := range []string{"tiny", "qwen3.5-0.8b"} {
			for _, flag := range [][]string{{"--layers", "1000000000"}, {"--layers", "1025"}, {"--vocab", "2000000000"},
				{"--hidden", "65537"}, {"--ff", "1000000000"}} {
				out := filepath.Join(root, "huge")
				err := within(t, func() error {
					return runSynth([]string{"--like", like, "--no-tokenizer", "--out", out, flag[0], flag[1]}, io.Discard, io.Discard)
				})
				var ue usageError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), flag[0]+" "+flag[1]+" is beyond the largest octlm reads") {
					t.Fatalf("%s %v: got %v, want a usage error naming the flag and its bound", like, flag, err)
				}
				if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%v: %s was created", flag, out)
				}
			}
		}
	})
	t.Run("sizes beyond the disk", func(t *testing.T) {
		for _, flag := range [][]string{{"--vocab", "16777216", "--hidden", "65536"}} {
			out := filepath.Join(root, "huge")
			err := synthTo(out, flag...)
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), "free") {
				t.Fatalf("%v: got %v, want a usage error about free disk", flag, err)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%v: %s was created", flag, out)
			}
		}
	})
	t.Run("error while writing", func(t *testing.T) {
		out := filepath.Join(root, "failed")
		err := within(t, func() error {
			return runSynth([]string{"--like", "tiny", "--out", out, "--tokenizer-dir", filepath.Join(root, "none")}, io.Discard, io.Discard)
		})
		if err == nil {
			t.Fatal("a missing --tokenizer-dir was accepted")
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was created by a failed run", out)
		}
	})
	out := filepath.Join(root, "ckpt")
	if err := synthTo(out, "--seed", "1"); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(out, loader.SingleFileName)
	first := fileSum(t, model)
	stale := filepath.Join(out, "reference")
	os.Mkdir(stale, 0o755)
	t.Run("existing checkpoint without --force", func(t *testing.T) {
		err := synthTo(out, "--seed", "2")
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--force") {
			t.Fatalf("got %v, want a usage error asking for --force", err)
		}
		if fileSum(t, model) != first {
			t.Fatal("the checkpoint changed")
		}
	})
	t.Run("existing checkpoint with --force", func(t *testing.T) {
		if err := synthTo(out, "--seed", "2", "--force"); err != nil {
			t.Fatal(err)
		}
		if fileSum(t, model) == first {
			t.Fatal("--force did not replace the checkpoint")
		}
		if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
			t.Error("the old reference/ folder survived the replacement")
		}
	})
	t.Run("folder that is not a checkpoint", func(t *testing.T) {
		other := filepath.Join(root, "notes")
		os.Mkdir(other, 0o755)
		os.WriteFile(filepath.Join(other, "todo.txt"), []byte("keep me"), 0o644)
		err := synthTo(other, "--force")
		var ue usageError
		if !errors.As(err, &ue) {
			t.Fatalf("got %v, want a usage error", err)
		}
		if b, _ := os.ReadFile(filepath.Join(other, "todo.txt")); string(b) != "keep me" {
			t.Error("the folder's files were touched")
		}
	})
	if left := hiddenLeft(t, root); len(left) > 0 {
		t.Errorf("temporaries left: %v", left)
	}
}

// TestSynthInterrupted: an interrupt while synth writes removes its temporaries and leaves an
// existing checkpoint as it was, both through a cancelled context and a real SIGINT.
func TestSynthInterrupted(t *testing.T) {
	// Keep SIGINT from ending the test binary should it arrive after synth stopped listening.
	guard := make(chan os.Signal, 1)
	signal.Notify(guard, os.Interrupt)
	defer signal.Stop(guard)
	for _, how := range []string{"context", "SIGINT"} {
		t.Run(how, func(t *testing.T) {
			root := t.TempDir()
			out := filepath.Join(root, "ckpt")
			base := []string{"--like", "tiny", "--no-tokenizer", "--out", out}
			if err := runSynth(base, io.Discard, io.Discard); err != nil {
				t.Fatal(err)
			}
			before := fileSum(t, filepath.Join(out, loader.SingleFileName))
			// A vocabulary large enough that writing takes a while (2 × 64 MB of BF16).
			args := append(base, "--force", "--seed", "9", "--vocab", "500000")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			interrupt := func() {
				if how == "context" {
					cancel()
				} else {
					syscall.Kill(os.Getpid(), syscall.SIGINT)
				}
			}
			// Interrupt once the weights are being written: synth's first progress line.
			progress := &onWrite{want: "synth: model.safetensors", do: interrupt}
			var err error
			if how == "context" {
				err = within(t, func() error { return synthCmd(ctx, args, io.Discard, progress) })
			} else {
				err = within(t, func() error { return runSynth(args, io.Discard, progress) })
			}
			cancel()
			if !errors.Is(err, errInterrupted) {
				t.Fatalf("got %v, want errInterrupted (exit status 130)", err)
			}
			if fileSum(t, filepath.Join(out, loader.SingleFileName)) != before {
				t.Error("the existing checkpoint changed")
			}
			if left := hiddenLeft(t, root); len(left) > 0 {
				t.Errorf("temporaries left: %v", left)
			}
		})
	}
}

// onWrite calls do once, the first time what is written contains want.
type onWrite struct {
	mu   sync.Mutex
	buf  strings.Builder
	want string
	do   func()
	done bool
}

func (w *onWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.want) {
		w.done = true
		w.do()
	}
	return len(p), nil
}

// TestFiguresOutSafe: an --out that cannot be written fails before any figure is computed;
// files of the same names are replaced only with --force.
func TestFiguresOutSafe(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every figure on the bundled checkpoint")
	}
	base := []string{"--backend", "go", "--model", testdata("tiny-qwen3")}
	t.Run("unwritable", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		os.WriteFile(file, nil, 0o644)
		var stderr bytes.Buffer
		err := runFigures(append(base, "--out", filepath.Join(file, "figs")), io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error(), "--out") {
			t.Fatalf("got %v, want an --out error", err)
		}
		if strings.Contains(stderr.String(), "figures of") {
			t.Errorf("computed before failing:\n%s", stderr.String())
		}
	})
	t.Run("same names", func(t *testing.T) {
		out := t.TempDir()
		mine := filepath.Join(out, "04-parity.md")
		os.WriteFile(mine, []byte("my notes"), 0o644)
		var stdout bytes.Buffer
		err := runFigures(append(base, "--out", out), &stdout, io.Discard)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "04-parity.md") || !strings.Contains(err.Error(), "--force") {
			t.Fatalf("got %v, want a usage error naming 04-parity.md and --force", err)
		}
		if b, _ := os.ReadFile(mine); string(b) != "my notes" {
			t.Fatal("the existing file was replaced without --force")
		}
		if entries, _ := os.ReadDir(out); len(entries) != 1 {
			t.Errorf("%d entries in --out after the refusal, want only the existing file", len(entries))
		}
		if err := runFigures(append(base, "--out", out, "--force"), io.Discard, io.Discard); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(mine); string(b) == "my notes" {
			t.Error("--force did not replace the file")
		}
	})
}
