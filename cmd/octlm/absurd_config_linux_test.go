//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// absurdModel copies a fixture checkpoint and Qwen3's tokenizer files into a new folder, with
// config.json's field key (in Qwen3.5's text_config) set to value.
func absurdModel(t *testing.T, fixture, key, value string) string {
	t.Helper()
	dir := copyDir(t, testdata(fixture))
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(testdata("qwen3-tokenizer", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var top map[string]any
	if err := dec.Decode(&top); err != nil {
		t.Fatal(err)
	}
	text := top
	if tc, ok := top["text_config"].(map[string]any); ok {
		text = tc
	}
	if _, ok := text[key]; !ok {
		t.Fatalf("%s has no %s", path, key)
	}
	text[key] = json.Number(value)
	out, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAbsurdConfigCommands: a config.json declaring an absurd size beside a tiny checkpoint is
// refused by every command that reads it, as a process: exit 2 within seconds, the field named
// on stderr, and a peak resident memory of the whole process under 256 MiB (a billion layers
// once drove generate past 21 GB before anything was compared with the checkpoint). inspect
// describes the files and exits 0, saying for Qwen3.5 that the config is refused and why.
func TestAbsurdConfigCommands(t *testing.T) {
	const maxRSS = 256 << 20
	commands := map[string]func(dir string) []string{
		"generate": func(dir string) []string {
			return []string{"generate", "--model", dir, "--prompt-ids", "1,2", "--max-new-tokens", "1"}
		},
		"parity": func(dir string) []string {
			return []string{"parity", "--model", dir, "--reference", testdata("tiny-qwen3", "reference")}
		},
		"bench": func(dir string) []string { return []string{"bench", "--model", dir} },
		"chat":  func(dir string) []string { return []string{"chat", "--model", dir} },
		"figures": func(dir string) []string {
			return []string{"figures", "--model", dir, "--out", filepath.Join(dir, "figs")}
		},
		"inspect": func(dir string) []string { return []string{"inspect", dir} },
	}
	type testCase struct{ fixture, key, value, command string }
	var cases []testCase
	for _, fixture := range []string{"tiny-qwen3", "tiny-qwen35"} {
		for name := range commands {
			cases = append(cases, testCase{fixture, "num_hidden_layers", "1000000000", name})
		}
		keys := []string{"vocab_size", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
			"intermediate_size", "max_position_embeddings"}
		if fixture == "tiny-qwen35" {
			keys = append(keys, "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
				"linear_value_head_dim", "linear_conv_kernel_dim")
		}
		for _, key := range keys {
			cases = append(cases, testCase{fixture, key, "2000000000", "generate"})
		}
	}
	for _, c := range cases {
		t.Run(c.fixture+"/"+c.command+"/"+c.key, func(t *testing.T) {
			dir := absurdModel(t, c.fixture, c.key, c.value)
			cmd := octlmCommand(t, commands[c.command](dir)...)
			cmd.Stdin = strings.NewReader("hi\n")
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			ended := make(chan error, 1)
			go func() { ended <- cmd.Wait() }()
			select {
			case <-ended:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				<-ended
				t.Fatalf("still running after 20 s:\n%s", stderr.String())
			}
			code, want := cmd.ProcessState.ExitCode(), 2
			if c.command == "inspect" {
				want = 0
			}
			if code != want {
				t.Errorf("exit %d, want %d\n%s", code, want, stderr.String())
			}
			if want == 2 && !strings.Contains(stderr.String(), c.key+" = "+c.value+" is beyond the largest") {
				t.Errorf("stderr does not name %s and its bound:\n%s", c.key, stderr.String())
			}
			if c.command == "inspect" && c.fixture == "tiny-qwen35" && !strings.Contains(stdout.String(), "config refused") {
				t.Errorf("inspect does not say the config is refused:\n%s", stdout.String())
			}
			if rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10; rss > maxRSS {
				t.Errorf("peak resident memory %d MiB, want under %d MiB", rss>>20, maxRSS>>20)
			}
		})
	}
}
