//go:build linux

package main

import (
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm/synth"
)

// hostileModel writes a small checkpoint with Qwen3's tokenizer whose every greedy token is
// ESC or BEL: the final norm keeps one hidden dimension, and the output head gives that
// dimension a large weight towards ESC and the opposite towards BEL, so whatever its sign one of
// the two wins.
func hostileModel(t *testing.T) string {
	t.Helper()
	cfg := synth.Tiny()
	cfg.VocabSize, cfg.BOSTokenID, cfg.EOSTokenID = 151936, 151643, 151645
	cfg.HiddenSize, cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim, cfg.IntermediateSize = 32, 2, 1, 16, 48
	cfg.Untied = true
	dir := t.TempDir()
	if err := synth.Write(dir, cfg, 1, nil); err != nil {
		t.Fatal(err)
	}
	tok, err := optionalTokenizer(dir)
	if err != nil {
		t.Fatal(err)
	}
	esc, bel := tok.Encode("\x1b"), tok.Encode("\x07")
	if len(esc) != 1 || len(bel) != 1 {
		t.Fatalf("ESC encodes as %v, BEL as %v: want one token each", esc, bel)
	}
	path := filepath.Join(dir, loader.SingleFileName)
	f, err := loader.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	norm, okNorm := f.Lookup("model.norm.weight")
	head, okHead := f.Lookup("lm_head.weight")
	f.Close()
	if !okNorm || !okHead || norm.DType != loader.BF16 || head.DType != loader.BF16 {
		t.Fatalf("norm %+v, head %+v: want both in bf16", norm, head)
	}
	out, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	bf16 := func(v float32) []byte { return binary.LittleEndian.AppendUint16(nil, loader.Float32ToBFloat16(v)) }
	normValues := make([]byte, norm.Size) // zeros: every dimension but the first dropped
	copy(normValues, bf16(1))
	hidden := int64(head.Shape[1])
	for _, w := range []struct {
		data []byte
		at   int64
	}{
		{normValues, norm.Offset},
		{bf16(64), head.Offset + int64(esc[0])*hidden*2},
		{bf16(-64), head.Offset + int64(bel[0])*hidden*2},
	} {
		if _, err := out.WriteAt(w.data, w.at); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runOnTerminal runs octlm with stdin, stdout and stderr on a pseudo-terminal, lets type (if
// any) type into it as the user, and returns all the terminal showed once the command has ended.
func runOnTerminal(t *testing.T, typing func(controller io.Writer, s *screen), args ...string) string {
	t.Helper()
	controller, terminal := openPTY(t)
	cmd := octlmCommand(t, args...)
	// octlm's own dimming off, so that any ESC shown is the model's or the line editor's; the
	// editor's history in a folder of the test's.
	cmd.Env = append(cmd.Env, "NO_COLOR=1", "XDG_STATE_HOME="+t.TempDir())
	s := startOnTerminal(t, cmd, controller, terminal)
	if typing != nil {
		typing(controller, s)
	}
	errc := make(chan error, 1)
	go func() { errc <- cmd.Wait() }()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("octlm %v: %v", args, err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("octlm %v did not end:\n%q", args, s.text())
	}
	return s.waitClosed(t) // closed (EIO) when the command has gone
}

// lineEditorCSI is what the line editor itself writes to draw its prompt: cursor moves and
// erasures (ESC [ n G, ESC [ n K, ESC [ n A/B).
var lineEditorCSI = regexp.MustCompile(`\x1b\[[0-9]*[ABGK]`)

// TestHostileModelOnTerminal: a checkpoint that generates nothing but ESC and BEL cannot drive
// the terminal through generate or chat: they show the bytes escaped. Piped, generate's output
// is the bytes as generated.
func TestHostileModelOnTerminal(t *testing.T) {
	dir := hostileModel(t)
	// chatHello types a turn once the prompt shows, waits for the reply and the next prompt, and
	// ends the chat with Ctrl-D.
	chatHello := func(controller io.Writer, s *screen) {
		s.waitFor(t, ">>> ", 1)
		at := s.end()
		io.WriteString(controller, "Hello\r") // Enter, as a terminal sends it
		s.waitInOrder(t, at, "Hello", "\r\n", "6 tokens", ">>> ")
		io.WriteString(controller, "\x04") // Ctrl-D
	}
	for _, c := range []struct {
		name   string
		typing func(io.Writer, *screen)
		args   []string
	}{
		{"generate", nil, []string{"generate", "-m", dir, "-p", "Hello", "-n", "6", "--temperature", "0"}},
		{"chat", chatHello, []string{"chat", "-m", dir, "-n", "6", "--temperature", "0", "--think=false"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			screen := runOnTerminal(t, c.typing, c.args...)
			// The line editor's own cursor moves are the only escapes allowed on the screen;
			// the model's ESC and BEL show as text.
			shown := lineEditorCSI.ReplaceAllString(screen, "")
			if strings.ContainsAny(shown, "\x1b\x07") || !strings.Contains(shown, `\x1b`) && !strings.Contains(shown, `\x07`) {
				t.Errorf("the terminal showed:\n%q\nwant the model's ESC and BEL escaped, none raw", screen)
			}
		})
	}
	stdout, stderr, code := runOctlm(t, "", "generate", "-m", dir, "-p", "Hello", "-n", "6", "--temperature", "0")
	if code != 0 || strings.Trim(stdout, "\x1b\x07") != "\n" {
		t.Errorf("piped: exit %d, stdout %q (stderr %s); want six raw ESC or BEL bytes and a newline", code, stdout, stderr)
	}
}
