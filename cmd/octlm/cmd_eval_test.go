package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

const evalFixture = "../../testdata/tiny-qwen3-eval"

// TestEvalCommand runs both fixture tasks through the command and reads back the results and
// samples files it wrote.
func TestEvalCommand(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	model := filepath.Join(evalFixture, "model")
	err := runEval(context.Background(), []string{"--model", model, "--backend", "go", "--tasks", filepath.Join(evalFixture, "tasks"),
		"--max-length", "32", "--output", out, "--log-samples"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for _, w := range []string{"tiny_quiz", "acc_norm", "0.5000", "±", "bits_per_byte", "4.8119"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, stdout.String())
		}
	}
	var res struct {
		Results map[string]map[string]any `json:"results"`
		NShot   map[string]int            `json:"n-shot"`
		Config  map[string]any            `json:"config"`
		Configs map[string]map[string]any `json:"configs"`
	}
	readResults(t, out, &res)
	if v := res.Results["tiny_quiz"]["acc_norm,none"]; v != 0.5 {
		t.Errorf("acc_norm,none = %v, want 0.5", v)
	}
	if v, _ := res.Results["tiny_quiz"]["acc_norm_stderr,none"].(float64); math.Abs(v-0.22360679774997896) > 1e-15 {
		t.Errorf("acc_norm_stderr,none = %v", v)
	}
	if v := res.Results["tiny_prose"]["bits_per_byte_stderr,none"]; v != "N/A" {
		t.Errorf("bits_per_byte_stderr,none = %v, want N/A", v)
	}
	if res.Config["model"] != model || res.Config["dtype"] != "f32" || res.Config["backend"] == "" || res.Config["octlm_version"] == nil {
		t.Errorf("config %v", res.Config)
	}
	if res.Configs["tiny_quiz"]["output_type"] != "multiple_choice" {
		t.Errorf("configs %v", res.Configs["tiny_quiz"])
	}
	samples, _ := filepath.Glob(filepath.Join(out, "*", "samples_tiny_quiz_*.jsonl"))
	if len(samples) != 1 {
		t.Fatalf("samples files %v", samples)
	}
	lines, _ := os.ReadFile(samples[0])
	n := 0
	for _, l := range bytes.Split(bytes.TrimSpace(lines), []byte("\n")) {
		var s map[string]any
		if err := json.Unmarshal(l, &s); err != nil {
			t.Fatalf("sample line %d: %v", n, err)
		}
		for _, k := range []string{"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "acc", "acc_norm", "doc_hash"} {
			if _, ok := s[k]; !ok {
				t.Errorf("sample line %d lacks %s", n, k)
			}
		}
		n++
	}
	if n != 6 {
		t.Errorf("%d sample lines, want 6", n)
	}
}

// TestEvalGroup runs a group over the fixture's quiz task: the group's results are the task's
// (one leaf task: its mean, and a pooled standard error equal to its own), under results and
// groups, and the groups table follows the tasks'.
func TestEvalGroup(t *testing.T) {
	out, dir := t.TempDir(), t.TempDir()
	group := filepath.Join(dir, "quizzes.yaml")
	if err := os.WriteFile(group, []byte("group: quizzes\ntask: [tiny_quiz]\naggregate_metric_list:\n  - metric: acc_norm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err := runEval(context.Background(), []string{"--model", filepath.Join(evalFixture, "model"), "--backend", "go",
		"--tasks", filepath.Join(evalFixture, "tasks") + "," + group, "--max-length", "32", "--output", out}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if !regexp.MustCompile(`(?m)^\|Groups *\|`).MatchString(stdout.String()) || !regexp.MustCompile(`(?m)^\|quizzes *\|.*\|acc_norm\|.*0\.5000\|± *\|0\.2236\|$`).MatchString(stdout.String()) {
		t.Errorf("no groups table with the quiz's acc_norm:\n%s", stdout.String())
	}
	var res struct {
		Results       map[string]map[string]any `json:"results"`
		Groups        map[string]map[string]any `json:"groups"`
		GroupSubtasks map[string][]string       `json:"group_subtasks"`
	}
	readResults(t, out, &res)
	g := res.Results["quizzes"]
	if g["acc_norm,none"] != 0.5 || g["sample_len"] != 6.0 {
		t.Errorf("results.quizzes = %v", g)
	}
	if v, _ := g["acc_norm_stderr,none"].(float64); math.Abs(v-0.22360679774997896) > 1e-12 {
		t.Errorf("acc_norm_stderr,none = %v, want the task's 0.2236", v)
	}
	if res.Groups["quizzes"] == nil || len(res.GroupSubtasks["quizzes"]) != 1 || res.GroupSubtasks["tiny_prose"] == nil {
		t.Errorf("groups %v, group_subtasks %v", res.Groups, res.GroupSubtasks)
	}
}

// TestEvalBadInput checks the usage errors and that a bad task fails before the model loads.
func TestEvalBadInput(t *testing.T) {
	model := filepath.Join(evalFixture, "model")
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("task: x\nprocess_docs: !function utils.p\n"), 0o644)
	for _, c := range []struct {
		args  []string
		usage bool
		want  string
	}{
		{[]string{"--model", model}, true, "--tasks is required"},
		{[]string{"--model", model, "--tasks", filepath.Join(evalFixture, "tasks"), "--adapter", filepath.Join(t.TempDir(), "none")}, false, "--adapter: lora:"},
		// the fixture adapter is tiny-qwen3's (width 64), not this model's (width 32)
		{[]string{"--model", model, "--tasks", filepath.Join(evalFixture, "tasks"), "--adapter", fixtureAdapter()}, false, "--adapter"},
		{[]string{"--model", model, "--tasks", bad, "--log-samples"}, true, "needs --output"},
		{[]string{"--model", model, "--tasks", bad}, false, "bad.yaml:2: process_docs"},
	} {
		var stdout, stderr bytes.Buffer
		err := runEval(context.Background(), c.args, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error containing %q", c.args, err, c.want)
		}
		var u usageError
		if errors.As(err, &u) != c.usage {
			t.Errorf("%v: usage error %v, want %v", c.args, errors.As(err, &u), c.usage)
		}
		if strings.Contains(stderr.String(), "loading") {
			t.Errorf("%v: the model was loaded before the error", c.args)
		}
	}
}

// TestEvalKLDivergence writes a base file from a text and compares the same model with it.
func TestEvalKLDivergence(t *testing.T) {
	model := filepath.Join(evalFixture, "model")
	base := filepath.Join(t.TempDir(), "base.kld")
	text := filepath.Join(evalFixture, "tasks", "prose.jsonl")
	var stdout, stderr bytes.Buffer
	if err := runEval(context.Background(), []string{"--model", model, "--backend", "go", "--kl-divergence-base", base, "--kl-text", text, "--kl-ctx", "32", "--kl-chunks", "2"}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	stdout.Reset()
	if err := runEval(context.Background(), []string{"--model", model, "--backend", "go", "--kl-divergence-base", base, "--kl-divergence"}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for _, w := range []string{"positions            30", "Same top p           100.000 %"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, stdout.String())
		}
	}
	// A model against its own base differs only by the base file's rounding (log-probabilities
	// in steps of 16/65535, those more than 16 below the top clamped), as in llama-perplexity:
	// about 1e-6 here, which prints as 0.000000 or 0.000001 depending on the CPU's kernels.
	var kld float64
	if m := regexp.MustCompile(`Mean +KLD +([0-9.]+)`).FindStringSubmatch(stdout.String()); m == nil {
		t.Errorf("output lacks the mean KLD:\n%s", stdout.String())
	} else if kld, _ = strconv.ParseFloat(m[1], 64); kld > 1e-5 {
		t.Errorf("mean KLD of the model against itself %g, want at most 1e-5 (the base file's rounding):\n%s", kld, stdout.String())
	}
	for _, args := range [][]string{
		{"--model", model, "--kl-divergence-base", base},
		{"--model", model, "--kl-divergence"},
		{"--model", model, "--kl-divergence-base", base, "--kl-divergence", "--tasks", text},
	} {
		var u usageError
		if err := runEval(context.Background(), args, &stdout, &stderr); !errors.As(err, &u) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// TestEvalInterrupted stops octlm eval with Ctrl-C during its second task: it exits 130, the
// results file holds the finished first task, its samples file is complete and nothing of the
// second task's is left behind.
func TestEvalInterrupted(t *testing.T) {
	dir := t.TempDir()
	quiz, _ := os.ReadFile(filepath.Join(evalFixture, "tasks", "quiz.yaml"))
	quizData, _ := os.ReadFile(filepath.Join(evalFixture, "tasks", "quiz.jsonl"))
	prose, _ := os.ReadFile(filepath.Join(evalFixture, "tasks", "prose.yaml"))
	proseData, _ := os.ReadFile(filepath.Join(evalFixture, "tasks", "prose.jsonl"))
	os.WriteFile(filepath.Join(dir, "a_quiz.yaml"), quiz, 0o644)
	os.WriteFile(filepath.Join(dir, "quiz.jsonl"), quizData, 0o644)
	os.WriteFile(filepath.Join(dir, "b_long.yaml"), prose, 0o644)
	os.WriteFile(filepath.Join(dir, "prose.jsonl"), bytes.Repeat(proseData, 400), 0o644) // minutes of work
	out := t.TempDir()
	cmd := octlmCommand(t, "eval", "--model", filepath.Join(evalFixture, "model"), "--tasks", dir, "--max-length", "32", "--output", out, "--log-samples")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		log.WriteString(lines.Text() + "\n")
		if strings.HasPrefix(lines.Text(), "tiny_quiz: 6 documents scored") {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	go io.Copy(&log, stderr)
	if code := waitExit(t, cmd); code != 130 {
		t.Fatalf("exit %d, want 130\n%s", code, log.String())
	}
	files, _ := filepath.Glob(filepath.Join(out, "*", "*"))
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	if len(files) != 2 {
		t.Fatalf("files left: %v, want the results and the quiz's samples", names)
	}
	for _, f := range files {
		data, _ := os.ReadFile(f)
		switch {
		case strings.HasPrefix(filepath.Base(f), "results_"):
			var res struct {
				Results map[string]any `json:"results"`
			}
			if err := json.Unmarshal(data, &res); err != nil || len(res.Results) != 1 || res.Results["tiny_quiz"] == nil {
				t.Errorf("results %v (%v), want tiny_quiz alone", res.Results, err)
			}
		case strings.HasPrefix(filepath.Base(f), "samples_tiny_quiz_"):
			if n := bytes.Count(data, []byte("\n")); n != 6 {
				t.Errorf("quiz samples: %d lines, want 6", n)
			}
		default:
			t.Errorf("unexpected file %s", f)
		}
	}
}

// readResults decodes the one results_*.json file an eval run wrote below out into v.
func readResults(t *testing.T, out string, v any) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, "*", "results_*.json"))
	if len(files) != 1 {
		t.Fatalf("results files %v, want one", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", files[0], err)
	}
}
