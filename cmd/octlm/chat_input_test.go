package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/octlm/octlm/octlm/synth"
	"github.com/octlm/octlm/xla"
)

// TestReadLimitedLine: lines up to the limit come back whole (with or without a last newline,
// with a CR kept for the caller); a longer one is read to its end, refused, and the next line
// reads as usual.
func TestReadLimitedLine(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []string // "!" marks a refused line
	}{
		{"short", "ab\ncd\n", []string{"ab", "cd"}},
		{"no last newline", "ab\ncd", []string{"ab", "cd"}},
		{"at the limit", "12345678\nx\n", []string{"12345678", "x"}},
		{"over the limit", "123456789\nx\n", []string{"!", "x"}},
		{"far over, past the buffer", strings.Repeat("y", 100000) + "\nok", []string{"!", "ok"}},
		{"empty lines", "\n\n", []string{"", ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := bufio.NewReaderSize(strings.NewReader(c.in), 16)
			var got []string
			for {
				line, err := readLimitedLine(r, 8)
				if err == io.EOF {
					break
				}
				var long lineTooLongError
				if errors.As(err, &long) {
					got = append(got, "!")
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, line)
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestChatLongLine: a piped line over 16 MiB is refused on stderr and the conversation goes on
// (the next turn is answered, /stats counts it); the exit status is 2 for the refused line.
func TestChatLongLine(t *testing.T) {
	stdin := "Hello\n" + strings.Repeat("a", maxChatLine+10) + "\nHow are you?\n/stats\n"
	stdout, stderr, code := runOctlm(t, stdin, "chat", "-m", tokenizerModel(t), "-n", "2", "--think=false")
	if code != 2 {
		t.Errorf("exit %d, want 2 (a line was refused)\nstderr: %s", code, stderr)
	}
	if !strings.Contains(stderr, "refused, the conversation goes on") || strings.Contains(stderr, "token too long") {
		t.Errorf("stderr does not say the line was refused:\n%s", stderr)
	}
	if !strings.Contains(stdout, "; 4 messages") {
		t.Errorf("the turns around the long line were not both answered:\n%s", stdout)
	}
}

// TestChatSaveKeepsFile: /save over an existing file keeps its mode, writes through a symbolic
// link to the file it points at (the link stays a link), refuses a link to nothing, and makes a
// new file private (0600).
func TestChatSaveKeepsFile(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing.json")
	target := filepath.Join(dir, "target.json")
	link := filepath.Join(dir, "link.json")
	dangling := filepath.Join(dir, "dangling.json")
	fresh := filepath.Join(dir, "fresh.json")
	for _, f := range []string{existing, target} {
		if err := os.WriteFile(f, []byte("old"), 0o640); err != nil {
			t.Fatal(err)
		}
		os.Chmod(f, 0o640)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "nowhere", "x.json"), dangling); err != nil {
		t.Fatal(err)
	}
	stdin := "Hi\n/save " + existing + "\n/save " + link + "\n/save " + dangling + "\n/save " + fresh + "\n"
	_, stderr, code := runOctlm(t, stdin, "chat", "-m", tokenizerModel(t), "-n", "2", "--think=false")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{existing, 0o640}, {target, 0o640}, {fresh, 0o600}} {
		st, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(c.path)
		if st.Mode().Perm() != c.mode || !json.Valid(data) {
			t.Errorf("%s: mode %v (want %v), transcript valid %v", filepath.Base(c.path), st.Mode().Perm(), c.mode, json.Valid(data))
		}
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("/save replaced the symbolic link %s with a file", link)
	}
	if !strings.Contains(stderr, "/save: "+dangling+" is a symbolic link to nothing") {
		t.Errorf("a dangling link was not refused:\n%s", stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "nowhere")); err == nil {
		t.Errorf("/save created the folder a dangling link points into")
	}
}

// TestChatVocabTooSmall: a checkpoint whose vocabulary cannot hold the tokenizer's tokens (the
// tiny fixture's 320 entries beside Qwen3's tokenizer) is refused at start with exit 2,
// before a turn is read.
func TestChatVocabTooSmall(t *testing.T) {
	dir := t.TempDir()
	if err := synth.WriteWith(dir, synth.Tiny(), synth.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runOctlm(t, "Hello\n", "chat", "-m", dir)
	if code != 2 || !strings.Contains(stderr, "vocab_size 320 cannot hold the tokenizer's") || stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
}

// TestChatPastContext: a turn that would end past the context is not sent, and the message says
// what to do: /clear, or a smaller -n with the number that fits.
func TestChatPastContext(t *testing.T) {
	src := tokenizerModel(t)
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "config.json" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	small := regexp.MustCompile(`"max_position_embeddings":\s*\d+`).ReplaceAll(cfg, []byte(`"max_position_embeddings": 64`))
	if err := os.WriteFile(filepath.Join(dir, "config.json"), small, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runOctlm(t, "Hi\n/stats\n", "chat", "-m", dir, "-n", "60", "--think=false")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !regexp.MustCompile(`context of 64\. /clear starts again .*smaller -n \(at most \d+ fits now\)`).MatchString(stderr) {
		t.Errorf("no way forward given:\n%s", stderr)
	}
	if !strings.Contains(stdout, "0 messages") {
		t.Errorf("the turn was kept:\n%s", stdout)
	}
}

// TestShortBackend: the backend line names the backend, its options and ONNX Runtime's
// version and why it was chosen in a few words, never the library's path.
func TestShortBackend(t *testing.T) {
	for _, c := range []struct {
		info xla.Info
		want string
	}{
		{xla.Info{Name: "go", Reason: "$GOMLX_BACKEND=go"}, "go ($GOMLX_BACKEND=go)"},
		{xla.Info{Name: "onnx", Options: "intra_op_num_threads=2", ONNXVersion: "1.30.0", Plugin: "/opt/x/libonnxruntime.so.1.30.0",
			Reason: "automatic: no PJRT plugin found; ONNX Runtime found in node_modules/onnxruntime-node, which is a long way of saying it"},
			"onnx,intra_op_num_threads=2 1.30.0 (automatic: no PJRT plugin found)"},
		{xla.Info{Name: "xla:cpu", Plugin: "/usr/lib/pjrt_c_api_cpu_plugin.so", Reason: strings.Repeat("why ", 30)},
			"xla:cpu (why why why why why why why why why why why why…)"},
	} {
		if got := shortBackend(c.info); got != c.want {
			t.Errorf("shortBackend(%+v) = %q, want %q", c.info, got, c.want)
		}
	}
}
