package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/synth"
	"github.com/octlm/octlm/xla"
)

func TestGenerateGreedyJSON(t *testing.T) {
	t.Setenv(xla.EnvBackend, "go")
	for _, fixture := range []string{"tiny-qwen3", "tiny-qwen3-untied"} {
		t.Run(fixture, func(t *testing.T) { testGenerateGreedyJSON(t, fixture) })
	}
}

// testGenerateGreedyJSON reproduces a fixture's reference/greedy.json through octlm generate.
func testGenerateGreedyJSON(t *testing.T, fixture string) {
	data, err := os.ReadFile(testdata(fixture, "reference", "greedy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		PromptIDs    []int `json:"prompt_ids"`
		GeneratedIDs []int `json:"generated_ids"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		ids := strings.Trim(jsonText(c.PromptIDs), "[]") // "165,77,202"
		var stdout, stderr bytes.Buffer
		err := runGenerate([]string{"--model", testdata(fixture), "--prompt-ids", ids, "--temperature", "0",
			"--max-new-tokens", "24", "--json"}, &stdout, &stderr)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		var got generationResult
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
			t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
		}
		if !slices.Equal(got.GeneratedIDs, c.GeneratedIDs) || !slices.Equal(got.PromptIDs, c.PromptIDs) {
			t.Errorf("generated %v, reference %v", got.GeneratedIDs, c.GeneratedIDs)
		}
		if got.StopReason != "length" || got.Text != "" {
			t.Errorf("stop %q text %q: want length and no text (the fixture has no tokenizer)", got.StopReason, got.Text)
		}
	}
}

func TestGenerateChatWithTokenizer(t *testing.T) {
	t.Setenv(xla.EnvBackend, "go")
	// A small random checkpoint with Qwen3's full vocabulary and its real tokenizer files:
	// real tokens and template, random text.
	cfg := synth.Tiny()
	cfg.VocabSize, cfg.BOSTokenID, cfg.EOSTokenID = 151936, 151643, 151645
	dir := t.TempDir()
	if err := synth.Write(dir, cfg, 1, nil); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err := runGenerate([]string{"--model", dir, "--chat", "What is 2 + 2?", "--think=false", "--max-new-tokens", "4", "--seed", "3", "--json"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var got generationResult
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	// <|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n
	want := []int{151644, 872, 198, 3838, 374, 220, 17, 488, 220, 17, 30, 151645, 198, 151644, 77091, 198, 151667, 271, 151668, 271}
	if !slices.Equal(got.PromptIDs, want) {
		t.Errorf("prompt %v\nwant   %v", got.PromptIDs, want)
	}
	if len(got.GeneratedIDs) == 0 || got.StopReason == "" {
		t.Errorf("generated %v (%s)", got.GeneratedIDs, got.StopReason)
	}
}

func TestGenerateUsage(t *testing.T) {
	t.Setenv(xla.EnvBackend, "go")
	tests := []struct {
		name string
		args []string
	}{
		{"no prompt", []string{"--model", testdata("tiny-qwen3")}},
		{"two prompts", []string{"--model", testdata("tiny-qwen3"), "--prompt", "a", "--prompt-ids", "1"}},
		{"no model", []string{"--prompt-ids", "1"}},
		{"bad ids", []string{"--model", testdata("tiny-qwen3"), "--prompt-ids", "1,x"}},
		{"negative temperature", []string{"--model", testdata("tiny-qwen3"), "--prompt-ids", "1", "--temperature", "-1"}},
		{"text without tokenizer", []string{"--model", testdata("tiny-qwen3"), "--prompt", "hello"}},
		{"id outside the vocabulary", []string{"--model", testdata("tiny-qwen3"), "--prompt-ids", "1,320"}},
		{"bad dtype", []string{"--model", testdata("tiny-qwen3"), "--prompt-ids", "1", "--dtype", "int4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := runGenerate(tt.args, &stdout, &stderr)
			if err == nil || errors.Is(err, errCheckFailed) {
				t.Fatalf("err = %v, want bad input", err)
			}
		})
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestGenerateCLI runs generate as a process: exit codes, stdout and stderr as users see them.
func TestGenerateCLI(t *testing.T) {
	tiny := testdata("tiny-qwen3")
	tok := tokenizerModel(t)
	tests := []struct {
		name     string
		stdin    string
		args     []string
		code     int
		stdout   []string // substrings
		stderr   []string
		noStderr []string
	}{
		{name: "help", args: []string{"generate", "-h"}, code: 0,
			stdout: []string{"usage: octlm generate -m DIR", "-prompt-file"}, noStderr: []string{"Usage of generate", "usage:"}},
		{name: "unknown flag", args: []string{"generate", "--bogus"}, code: 2,
			stderr: []string{"flag provided but not defined: -bogus (see 'octlm generate -h')"}, noStderr: []string{"-max-new-tokens"}},
		{name: "empty prompt", args: []string{"generate", "-m", tok, "--prompt", ""}, code: 2,
			stderr: []string{"the prompt is empty"}, noStderr: []string{"exactly one"}},
		{name: "empty prompt file", args: []string{"generate", "-m", tok, "--prompt-file", "-"}, code: 2,
			stderr: []string{"stdin is empty"}},
		{name: "id outside the vocabulary before loading", args: []string{"generate", "-m", tiny, "--prompt-ids", "1,320"}, code: 2,
			stderr: []string{"token 320 at position 1 is outside the vocabulary [0, 320)", "config.json"}, noStderr: []string{"backend:"}},
		{name: "one token has no speed", args: []string{"generate", "-m", tiny, "--prompt-ids", "1,2", "-n", "1", "--temperature", "0"}, code: 0,
			stderr: []string{"1 generated (length)", "tokens/s n/a"}, noStderr: []string{"0.0 tokens/s", "seed"}},
		{name: "prompt from stdin", stdin: "Hello there", args: []string{"generate", "-m", tok, "--prompt-file", "-", "-n", "2", "--seed", "5"}, code: 0,
			stderr: []string{"2 prompt tokens, 2 generated", "seed 5"}},
		{name: "hub unreachable", args: []string{"generate", "-m", "Nobody/none", "-p", "hi"}, code: 2,
			stderr: []string{"HF_HUB_OFFLINE=1", "octlm synth --like tiny"}},
	}
	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runOctlm(t, tt.stdin, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstderr: %s", code, tt.code, stderr)
			}
			for _, want := range tt.stdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout)
				}
			}
			for _, want := range tt.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			for _, bad := range tt.noStderr {
				if strings.Contains(stderr, bad) {
					t.Errorf("stderr has %q:\n%s", bad, stderr)
				}
			}
		})
	}
}

// TestGenerateSeed: without --seed each run draws its own seed and reports it; --seed with the
// reported one repeats the run.
func TestGenerateSeed(t *testing.T) {
	tok := tokenizerModel(t)
	gen := func(extra ...string) generationResult {
		t.Helper()
		var stdout, stderr bytes.Buffer
		args := append([]string{"-m", tok, "-p", "Once upon a time", "-n", "6", "--temperature", "1.5", "--top-k", "0", "--top-p", "1", "--json"}, extra...)
		if err := runGenerate(args, &stdout, &stderr); err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		var r generationResult
		if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := gen(), gen()
	if a.Seed == b.Seed {
		t.Errorf("two runs without --seed both used seed %d", a.Seed)
	}
	again := gen("--seed", fmt.Sprint(a.Seed))
	if again.Seed != a.Seed || !slices.Equal(again.GeneratedIDs, a.GeneratedIDs) {
		t.Errorf("--seed %d generated %v, the run that reported it %v", a.Seed, again.GeneratedIDs, a.GeneratedIDs)
	}
	if a.TokensPerSecond == nil || *a.TokensPerSecond <= 0 {
		t.Errorf("tokens_per_second %v for 6 tokens", a.TokensPerSecond)
	}
}

// TestGenerateWriteError: output that cannot be written (a full disk) fails the command instead
// of exiting 0 with the text lost.
func TestGenerateWriteError(t *testing.T) {
	var stderr bytes.Buffer
	err := runGenerate([]string{"-m", tokenizerModel(t), "-p", "Hello", "-n", "20", "--seed", "1"}, failingWriter{}, &stderr)
	if err == nil || !strings.Contains(err.Error(), "writing the output") {
		t.Fatalf("err = %v, want a write error", err)
	}
	// A closed pipe (| head -c 1): the process must not exit 0.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	cmd := octlmCommand(t, "generate", "-m", tokenizerModel(t), "-p", "Hello", "-n", "20", "--seed", "1")
	cmd.Stdout = w
	err = cmd.Run()
	w.Close()
	if err == nil {
		t.Error("generate into a closed pipe exited 0")
	}
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer full.Close()
	for _, extra := range [][]string{nil, {"--json"}} {
		cmd := octlmCommand(t, append([]string{"generate", "-m", tokenizerModel(t), "-p", "Hello", "-n", "3", "--seed", "1"}, extra...)...)
		cmd.Stdout = full
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		err = cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(errOut.String(), "no space left") {
			t.Errorf("generate %v > /dev/full: %v, want exit 2 naming the write error\n%s", extra, err, errOut.String())
		}
	}
}

// TestGenerateStopsAtConfigEOS: without generation_config.json, config.json's eos_token_id
// ends the generation, as in transformers.
func TestGenerateStopsAtConfigEOS(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"config.json", "model.safetensors"} {
		data, err := os.ReadFile(testdata("tiny-qwen3", name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "config.json" {
			// Greedy decoding of 165,77,202,24,37,274,48 starts with token 261 (reference/greedy.json).
			data = bytes.Replace(data, []byte(`"eos_token_id": 1,`), []byte(`"eos_token_id": 261,`), 1)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	err := runGenerate([]string{"-m", dir, "--prompt-ids", "165,77,202,24,37,274,48", "--temperature", "0", "-n", "24", "--json"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var got generationResult
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.StopReason != "eos" || !slices.Equal(got.GeneratedIDs, []int{261}) {
		t.Errorf("generated %v (%s), want [261] (eos)", got.GeneratedIDs, got.StopReason)
	}
}

// TestGenerateNonFinite: a NaN weight makes the logits NaN; generate stops with a clear error
// and exit status 1 instead of emitting tokens.
func TestGenerateNonFinite(t *testing.T) {
	dir, _ := synthDir(t, 1)
	path := filepath.Join(dir, "model.safetensors")
	f, err := loader.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	norm, ok := f.Lookup("model.norm.weight")
	f.Close()
	if !ok {
		t.Fatal("no model.norm.weight")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint16(data[norm.Offset+6:], 0x7fc0) // BF16 NaN
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, temperature := range []string{"0", "0.6"} {
		stdout, stderr, code := runOctlm(t, "", "generate", "-m", dir, "--prompt-ids", "1,2,3", "-n", "5", "--temperature", temperature)
		if code != 1 || !strings.Contains(stderr, "non-finite logits") || strings.TrimSpace(stdout) != "" {
			t.Errorf("temperature %s: exit %d, stdout %q, stderr %s; want exit 1, no tokens, non-finite logits", temperature, code, stdout, stderr)
		}
	}
}

// TestGenerateInterrupt: Ctrl-C (SIGINT) during a generation prints what was generated and the
// summary (stop reason interrupted; with --json the whole object) and exits 130. The signal is
// sent on an event, never after a pause: as text, once the first token reached stdout; with
// --json (nothing is printed before the end), once the model is loading, so the generation may
// stop before its first token or part way.
func TestGenerateInterrupt(t *testing.T) {
	// Greedy decoding of this random checkpoint settles on repeating " story": it runs to the length limit.
	args := []string{"generate", "-m", tokenizerModel(t), "-p", "Tell me a long story", "--temperature", "0", "-n", "40000"}
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprint("json=", asJSON), func(t *testing.T) {
			a := slices.Clone(args)
			if asJSON {
				a = append(a, "--json")
			}
			cmd := octlmCommand(t, a...)
			stdoutPipe, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			stderrPipe, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			stdout, stderr := bufio.NewReader(stdoutPipe), bufio.NewReader(stderrPipe)
			var errText strings.Builder
			for !strings.Contains(errText.String(), "backend:") {
				line, err := stderr.ReadString('\n')
				errText.WriteString(line)
				if err != nil {
					t.Fatalf("stderr ended before the model loaded: %s", errText.String())
				}
			}
			errDone := make(chan struct{})
			go func() { io.Copy(&errText, stderr); close(errDone) }()
			if !asJSON {
				if _, err := stdout.Peek(1); err != nil { // the first token is out
					<-errDone
					t.Fatalf("no token on stdout: %v\n%s", err, errText.String())
				}
			}
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(stdout)
			<-errDone
			if code := waitExit(t, cmd); code != 130 {
				t.Fatalf("exit %d, want 130\nstderr: %s", code, errText.String())
			}
			if asJSON {
				var got generationResult
				if err := json.Unmarshal(out, &got); err != nil {
					t.Fatalf("stdout is not the JSON result: %v\n%s", err, out)
				}
				if got.StopReason != "interrupted" || len(got.GeneratedIDs) >= 40000 {
					t.Errorf("stop %q after %d tokens, want interrupted before the limit", got.StopReason, len(got.GeneratedIDs))
				}
				return
			}
			m := regexp.MustCompile(`(\d+) generated \(interrupted\)`).FindStringSubmatch(errText.String())
			if m == nil || m[1] == "0" || !strings.Contains(string(out), " story") {
				t.Errorf("stdout %.100q, stderr %s: want the tokens so far and \"N generated (interrupted)\" with N > 0", out, errText.String())
			}
		})
	}
}

// TestWarnHalfOnGo: the measured note on half precision, for the pure-Go backend only.
func TestWarnHalfOnGo(t *testing.T) {
	tests := []struct {
		backend string
		dtype   octlm.DType
		want    string
	}{
		{xla.Go, octlm.BFloat16, "bf16 decodes about"},
		{xla.Go, octlm.Float16, "f16 decodes about"},
		{xla.Go, octlm.Float32, ""},
		{xla.ONNX, octlm.Float16, ""},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		warnHalfOnGo(&buf, xla.Info{Name: tt.backend}, tt.dtype)
		if got := buf.String(); tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("%s %s: %q, want %q", tt.backend, tt.dtype, got, tt.want)
		}
	}
}
