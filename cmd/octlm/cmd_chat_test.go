package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/octlm/octlm/octlm/chat"
)

// TestChatPiped holds a conversation through piped stdin: one turn a line, commands, no prompts,
// the history kept (the second turn's prompt holds the first and reuses the cache), /save
// writing a transcript that 'octlm template' can read, /bye ending the chat.
func TestChatPiped(t *testing.T) {
	model := tokenizerModel(t)
	saved := filepath.Join(t.TempDir(), "chat.json")
	stdin := strings.Join([]string{
		"Hello there",
		"/stats",
		"/no_think",
		"What is 2 + 2?",
		"/stats",
		"/save " + saved,
		"/save " + filepath.Join(saved, "not-a-folder", "x.json"),
		"/frobnicate",
		"/clear",
		"/stats",
		"/bye",
		"never read as a turn",
	}, "\n") + "\n"
	stdout, stderr, code := runOctlm(t, stdin, "chat", "-m", model, "-n", "12", "--seed", "7", "--system", "You are terse.")
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	if strings.Contains(stdout, ">>>") || strings.Contains(stdout, "\x1b[") {
		t.Errorf("prompts or ANSI codes in piped output:\n%s", stdout)
	}
	stats := regexp.MustCompile(`context: (\d+) of 40960 tokens .*; (\d+) messages`).FindAllStringSubmatch(stdout, -1)
	if len(stats) != 3 {
		t.Fatalf("%d /stats answers, want 3:\n%s", len(stats), stdout)
	}
	used := func(i int) int { n, _ := strconv.Atoi(stats[i][1]); return n }
	if stats[0][2] != "2" || stats[1][2] != "4" || stats[2][2] != "0" || used(1) <= used(0) || used(2) != 0 {
		t.Errorf("context and messages after turn 1, turn 2 and /clear: %q", stats)
	}
	reused := regexp.MustCompile(`prompt (\d+) tokens, (\d+) reused from the cache`).FindAllStringSubmatch(stdout, -1)
	if len(reused) != 2 || reused[0][2] != "0" || reused[1][2] == "0" {
		t.Errorf("prompt reuse per turn %q: want none on the first turn, some on the second", reused)
	}
	for _, want := range []string{"thinking off", "saved 5 messages to " + saved, "conversation cleared"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	for _, want := range []string{"unknown command /frobnicate", "/save: "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}

	data, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		Model string `json:"model"`
		chat.Conversation
	}
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatalf("transcript: %v\n%s", err, data)
	}
	roles := []string{}
	for _, m := range tr.Messages {
		roles = append(roles, m.Role)
	}
	if tr.Model != model || strings.Join(roles, ",") != "system,user,assistant,user,assistant" ||
		tr.Messages[0].Content != "You are terse." || tr.Messages[3].Content != "What is 2 + 2?" ||
		tr.EnableThinking == nil || *tr.EnableThinking {
		t.Errorf("transcript model %q roles %v thinking %v:\n%s", tr.Model, roles, tr.EnableThinking, data)
	}
	if _, err := chat.Render(tr.Conversation); err != nil {
		t.Errorf("the transcript does not render: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(saved)); len(entries) != 1 {
		t.Errorf("/save left %d files, want only the transcript", len(entries))
	}
}

// TestChatInterrupt: Ctrl-C stops the reply in progress; the chat goes on with the next line.
func TestChatInterrupt(t *testing.T) {
	cmd := octlmCommand(t, "chat", "-m", tokenizerModel(t), "-n", "40000", "--temperature", "0", "--think=false")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	io.WriteString(stdin, "Tell me a long story\n")
	out := bufio.NewReader(stdoutPipe)
	// The reply streams: wait for its first bytes, then press Ctrl-C.
	if _, err := out.Peek(1); err != nil {
		t.Fatalf("no reply: %v\n%s", err, stderr.String())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	var reply string
	for !strings.HasSuffix(reply, " [interrupted]\n") {
		line, err := out.ReadString('\n')
		reply += line
		if err != nil {
			t.Fatalf("reply %.200q (%v), want one ending in [interrupted]\n%s", reply, err, stderr.String())
		}
	}
	io.WriteString(stdin, "/stats\n")
	stdin.Close()
	rest, _ := io.ReadAll(out)
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) || err != nil {
		t.Fatalf("chat ended with %v after an interrupted reply, want exit 0\n%s", err, stderr.String())
	}
	if !strings.Contains(string(rest), "(interrupted)") || !strings.Contains(string(rest), "2 messages") {
		t.Errorf("/stats after the interrupt: %q", rest)
	}
}

// TestReplyView: on a terminal the think block is dimmed (ANSI faint, reset after </think>);
// in plain output the tags stay as they are, marking it.
func TestReplyView(t *testing.T) {
	pieces := []string{"<think>", "\nLet me", " see.\n", "</think>", "\n\nFour.", " Done"}
	tests := []struct {
		faint bool
		want  string
	}{
		{false, "<think>\nLet me see.\n</think>\n\nFour. Done"},
		{true, "\x1b[2m<think>\nLet me see.\n</think>\x1b[0m\n\nFour. Done"},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		v := &replyView{out: &b, faint: tt.faint}
		for _, p := range pieces {
			v.write(p)
		}
		v.end()
		if b.String() != tt.want {
			t.Errorf("faint %v: %q, want %q", tt.faint, b.String(), tt.want)
		}
	}
	// A reply stopped while thinking still resets the terminal.
	var b bytes.Buffer
	v := &replyView{out: &b, faint: true}
	v.write("<think>hmm")
	v.end()
	if b.String() != "\x1b[2m<think>hmm\x1b[0m" {
		t.Errorf("unfinished think block: %q", b.String())
	}
}

// TestChatUsage: bad flags and a checkpoint without a tokenizer are refused before the chat starts.
func TestChatUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"help", []string{"chat", "-h"}, "usage: octlm chat -m DIR"},
		{"no model", []string{"chat"}, "--model is required"},
		{"no tokenizer", []string{"chat", "-m", testdata("tiny-qwen3")}, "has no tokenizer.json"},
		{"zero tokens", []string{"chat", "-m", testdata("tiny-qwen3"), "-n", "0"}, "--max-new-tokens must be at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runOctlm(t, "", tt.args...)
			wantCode, said := 2, stderr
			if tt.name == "help" {
				wantCode, said = 0, stdout // help asked for goes to stdout
			}
			if code != wantCode || !strings.Contains(said, tt.want) {
				t.Errorf("exit %d, stdout %s, stderr %s; want exit %d and %q", code, stdout, stderr, wantCode, tt.want)
			}
		})
	}
}

// TestShowReply: a reply's tool calls are shown as such, and the history message carries the
// thinking, the answer and the calls.
func TestShowReply(t *testing.T) {
	text := "<think>\nNeed the weather.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>"
	var b bytes.Buffer
	m := showReply(&b, text)
	if b.String() != "[tool call] get_weather({\"city\": \"Paris\"})\n" {
		t.Errorf("shown %q", b.String())
	}
	if m.Role != "assistant" || m.ReasoningContent != "Need the weather." || m.Content != "Let me check." ||
		len(m.ToolCalls) != 1 || m.ToolCalls[0].Name != "get_weather" {
		t.Errorf("history message %+v", m)
	}
}
