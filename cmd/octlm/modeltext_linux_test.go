//go:build linux

package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/octlm/octlm/internal/termsafe"
)

// hostileReply is what a crafted or random checkpoint may generate: a window title (OSC 0), a
// clipboard write (OSC 52), a screen clear, C1 CSI, a bidirectional override, DEL, a carriage
// return, and a character split across two pieces.
var hostileReply = []string{"<think>", "\x1b]0;PWNED\x07", "\xe6", "\x9d\xb1", "</think>", "\x1b]52;c;aGk=\x07\x1b[2J", "\u009b1m\u202eexe.txt\x7f\rok\n\tend"}

// TestModelTextOnTerminal: on a terminal the model's text reaches it escaped, octlm's own
// dimming of the think block stays a real sequence; piped, the bytes pass as generated.
func TestModelTextOnTerminal(t *testing.T) {
	_, terminal := openPTY(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	tests := []struct {
		name string
		out  *os.File
		want string
	}{
		{"terminal", terminal, "\x1b[2m<think>" + `\x1b]0;PWNED\x07` + "東</think>\x1b[0m" + `\x1b]52;c;aGk=\x07\x1b[2J\x9b1m\u202eexe.txt\x7f\x0dok` + "\n\tend"},
		{"pipe", w, "\x1b[2m<think>\x1b]0;PWNED\x07東</think>\x1b[0m" + strings.Join(hostileReply[5:], "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			v := &replyView{out: &b, text: modelText(&b, isTerminal(tt.out)), faint: true}
			for _, p := range hostileReply {
				v.write(p)
			}
			v.end()
			got := b.String()
			if got != tt.want {
				t.Errorf("shown %q\nwant  %q", got, tt.want)
			}
		})
	}
}

// TestToolCallLineEscaped: a "[tool call] name(args)" line built from a crafted reply reaches a
// terminal escaped, on one line.
func TestToolCallLineEscaped(t *testing.T) {
	text := "<tool_call>\n{\"name\": \"get\\u001b]0;PWNED\\u0007\", \"arguments\": {\"city\": \"\\u001b[2J\\nParis\"}}\n</tool_call>"
	var b bytes.Buffer
	w := termsafe.NewWriter(&b)
	showReply(w, text)
	w.Flush()
	got := b.String()
	if strings.Contains(got, "\x1b") || !strings.HasPrefix(got, `[tool call] get\x1b]0;PWNED\x07(`) {
		t.Errorf("shown %q", got)
	}
	var raw bytes.Buffer
	showReply(io.Writer(&raw), text)
	if !strings.Contains(raw.String(), "\x1b]0;PWNED") {
		t.Errorf("piped: %q, want the name as generated", raw.String())
	}
}
