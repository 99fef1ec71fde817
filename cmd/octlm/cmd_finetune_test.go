package main

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm/lora"
	"github.com/octlm/octlm/train"
)

const (
	ftModel   = "../../testdata/tiny-qwen3"
	ftFixture = "../../testdata/tiny-qwen3-finetune"
)

// loraFixtureArgs are the flags of tiny-qwen3-finetune/lora's run (train.json).
func loraFixtureArgs(out string, steps int) []string {
	return []string{"finetune", "--model", ftModel, "--data", ftFixture + "/train.jsonl",
		"--init-adapter", ftFixture + "/lora/init-adapter", "--steps", itoa(steps), "--batch", "2",
		"--lr", "1e-3", "--lr-schedule", "constant", "--max-grad-norm", "0", "--shuffle=false", "--out", out}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// adapterGap is the largest |a − b| over two adapter folders' matrices, relative to each
// tensor's largest entry.
func adapterGap(t *testing.T, a, b string) float64 {
	t.Helper()
	x, err := lora.Read(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := lora.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Modules) != len(y.Modules) {
		t.Fatalf("%d modules against %d", len(x.Modules), len(y.Modules))
	}
	worst := 0.0
	for name, m := range y.Modules {
		n, ok := x.Modules[name]
		if !ok {
			t.Fatalf("module %s missing from %s", name, a)
		}
		worst = max(worst, relGap(n.A, m.A), relGap(n.B, m.B))
	}
	return worst
}

// relGap is max |got − want| over the largest |want|.
func relGap(got, want []float32) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var d, s float64
	for i := range want {
		d = max(d, math.Abs(float64(got[i]-want[i])))
		s = max(s, math.Abs(float64(want[i])))
	}
	if math.IsNaN(d) {
		return math.Inf(1)
	}
	return d / max(s, 1e-30)
}

// TestFinetuneMatchesReference runs the command on the fixture's LoRA run: the adapter it writes,
// the log and the saved gradients against the float64 reference.
func TestFinetuneMatchesReference(t *testing.T) {
	out := t.TempDir()
	logPath, grads := filepath.Join(out, "log.jsonl"), filepath.Join(t.TempDir(), "g.safetensors")
	plot := filepath.Join(t.TempDir(), "loss.svg")
	_, stderr, code := runOctlm(t, "", append(loraFixtureArgs(out, 5), "--log", logPath, "--save-gradients", grads, "--plot", plot)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if svg, err := os.ReadFile(plot); err != nil || !strings.Contains(string(svg), "5 steps") {
		t.Errorf("--plot: %v, or no 5-step curve", err)
	}
	if gap := adapterGap(t, out, ftFixture+"/lora/reference-adapter"); gap > 1e-5 {
		t.Errorf("the adapter differs from the reference by %.3g of a tensor's largest entry", gap)
	}
	cfg, err := os.ReadFile(filepath.Join(out, lora.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"peft_type": "LORA"`, `"task_type": "CAUSAL_LM"`, `"base_model_name_or_path": "../../testdata/tiny-qwen3"`, `"bias": "none"`} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("adapter_config.json lacks %s", want)
		}
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var ref []train.LogRow
	refData, _ := os.ReadFile(ftFixture + "/lora/reference-losses.json")
	if err := json.Unmarshal(refData, &ref); err != nil {
		t.Fatal(err)
	}
	if len(lines) != len(ref) {
		t.Fatalf("%d log rows, want %d", len(lines), len(ref))
	}
	for i, line := range lines {
		var row train.LogRow
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		if row.Type != "train_step" || row.Step != i+1 || row.Tokens != ref[i].Tokens || math.Abs(row.Loss-ref[i].Loss) > 1e-4 || row.TokensPerSecond <= 0 {
			t.Errorf("log row %d: %+v, reference %+v", i+1, row, ref[i])
		}
	}
	f, err := loader.Open(grads)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := len(f.Tensors()); n != 28 {
		t.Errorf("%d gradient tensors, want 28 (A and B of 14 modules)", n)
	}
	refGrads, err := loader.Open(ftFixture + "/lora/reference-gradients.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer refGrads.Close()
	for _, info := range refGrads.Tensors() {
		g, ok := f.Lookup(info.Name)
		if !ok {
			t.Fatalf("no gradient %q (PEFT's name)", info.Name)
		}
		want, got := make([]float32, info.NumElements()), make([]float32, g.NumElements())
		if err := refGrads.ReadFloat32(info, want); err != nil {
			t.Fatal(err)
		}
		if err := f.ReadFloat32(g, got); err != nil {
			t.Fatal(err)
		}
		if gap := relGap(got, want); len(got) != len(want) || gap > 1e-4 {
			t.Errorf("gradient %s: %.3g of its largest entry from the reference", info.Name, gap)
		}
	}
}

// startFinetune starts the command and returns it with a reader of its stderr lines.
func startFinetune(t *testing.T, args ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := octlmCommand(t, args...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewScanner(pipe)
}

// waitLine reads lines until one contains want.
func waitLine(t *testing.T, sc *bufio.Scanner, want string) {
	t.Helper()
	var seen []string
	for sc.Scan() {
		if strings.Contains(sc.Text(), want) {
			return
		}
		seen = append(seen, sc.Text())
	}
	t.Fatalf("no line containing %q; got:\n%s", want, strings.Join(seen, "\n"))
}

// drain reads the rest of the lines (so the process never blocks on a full pipe).
func drain(sc *bufio.Scanner) {
	go func() {
		for sc.Scan() {
		}
	}()
}

// TestFinetuneKilledAndResumed kills the command with SIGKILL once it has written a checkpoint,
// resumes it, and checks that it ends with the weights of an uninterrupted run: a LoRA run
// (shuffled, with dropout) and a full fine-tune.
func TestFinetuneKilledAndResumed(t *testing.T) {
	const steps = 60
	fullArgs := func(out string) []string {
		return []string{"finetune", "--full", "--model", "../../testdata/tiny-qwen3-untied", "--data", ftFixture + "/train-untied.jsonl",
			"--steps", itoa(steps), "--batch", "2", "--lr", "5e-4", "--weight-decay", "0.1", "--out", out}
	}
	tests := []struct {
		name   string
		args   func(out string) []string
		result string
		gap    func(t *testing.T, a, b string) float64
	}{
		{"lora", func(out string) []string {
			return append(loraFixtureArgs(out, steps), "--lora-dropout", "0.1", "--shuffle")
		}, lora.WeightsFile, adapterGap},
		{"full", fullArgs, loader.SingleFileName, modelGap},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			straight := t.TempDir()
			if _, stderr, code := runOctlm(t, "", tc.args(straight)...); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			out := t.TempDir()
			logPath := filepath.Join(t.TempDir(), "log.jsonl")
			args := append(tc.args(out), "--save-every", "1", "--keep", "2", "--log", logPath)
			cmd, sc := startFinetune(t, args...)
			waitLine(t, sc, "checkpoint-3")
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			drain(sc)
			if code := waitExit(t, cmd); code != -1 {
				t.Fatalf("exit status %d: the run ended before the kill", code)
			}
			if _, err := os.Stat(filepath.Join(out, tc.result)); err == nil {
				t.Fatal("the killed run wrote its result")
			}
			_, stderr, code := runOctlm(t, "", append(args, "--resume")...)
			if code != 0 {
				t.Fatalf("resumed: exit %d: %s", code, stderr)
			}
			if !strings.Contains(stderr, "resumed from") {
				t.Errorf("stderr does not say where it resumed: %s", stderr)
			}
			if gap := tc.gap(t, out, straight); gap > 1e-6 {
				t.Errorf("the resumed run's weights differ from the uninterrupted one's by %.3g", gap)
			}
			if data, err := os.ReadFile(logPath); err != nil || strings.Count(string(data), "\n") != steps {
				t.Errorf("the resumed log holds %d rows (%v), want one per step, %d", strings.Count(string(data), "\n"), err, steps)
			}
			steps2, err := train.Checkpoints(out)
			if err != nil || len(steps2) != 2 || steps2[1] != steps {
				t.Errorf("checkpoints %v (%v), want the newest two ending at %d", steps2, err, steps)
			}
			entries, _ := os.ReadDir(out)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".") {
					t.Errorf("a temporary %s was left in --out", e.Name())
				}
			}
		})
	}
}

// modelGap is the largest |a − b| over two checkpoint folders' tensors, relative to each
// tensor's largest entry.
func modelGap(t *testing.T, a, b string) float64 {
	t.Helper()
	x, err := loader.OpenCheckpoint(a)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	y, err := loader.OpenCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	worst := 0.0
	for e, err := range y.Tensors() {
		if err != nil {
			t.Fatal(err)
		}
		f, ok := x.Lookup(e.Info.Name)
		if !ok {
			t.Fatalf("%s missing from %s", e.Info.Name, a)
		}
		want, got := make([]float32, e.Info.NumElements()), make([]float32, f.Info.NumElements())
		if err := e.File.ReadFloat32(e.Info, want); err != nil {
			t.Fatal(err)
		}
		if err := f.File.ReadFloat32(f.Info, got); err != nil {
			t.Fatal(err)
		}
		worst = max(worst, relGap(got, want))
	}
	return worst
}

// TestFinetuneSignals: SIGINT and SIGTERM write a checkpoint and end with 130 and 143.
func TestFinetuneSignals(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			out := t.TempDir()
			cmd, sc := startFinetune(t, loraFixtureArgs(out, 100000)...)
			waitLine(t, sc, "step 1/")
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			drain(sc)
			if code := waitExit(t, cmd); code != tc.code {
				t.Fatalf("exit status %d, want %d", code, tc.code)
			}
			steps, err := train.Checkpoints(out)
			if err != nil || len(steps) != 1 {
				t.Fatalf("checkpoints %v (%v), want the one written on the signal", steps, err)
			}
			if _, err := lora.Read(filepath.Join(out, train.CheckpointName(steps[0]))); err != nil {
				t.Errorf("the checkpoint is not a readable adapter: %v", err)
			}
		})
	}
}

func TestFinetuneBadInput(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"input_ids\": [1, 2, 3]}\n{\"input_ids\": [1, 999]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"ID outside the vocabulary", []string{"finetune", "--model", ftModel, "--data", bad, "--steps", "1", "--out", out}, "bad.jsonl:2: input_ids[1]: token ID 999 outside the vocabulary"},
		{"no steps", []string{"finetune", "--model", ftModel, "--data", ftFixture + "/train.jsonl", "--out", out}, "give --steps or --epochs"},
		{"unknown target", []string{"finetune", "--model", ftModel, "--data", ftFixture + "/train.jsonl", "--steps", "1", "--lora-targets", "qkv", "--out", out}, `target module "qkv" matches none`},
		{"bad schedule", []string{"finetune", "--model", ftModel, "--data", ftFixture + "/train.jsonl", "--steps", "1", "--lr-schedule", "step", "--out", out}, `unknown learning-rate schedule "step"`},
		{"rank with an initial adapter", []string{"finetune", "--model", ftModel, "--data", ftFixture + "/train.jsonl", "--steps", "1", "--init-adapter", ftFixture + "/lora/init-adapter", "--lora-r", "8", "--out", out}, "--lora-r with --init-adapter"},
		{"bf16 base for a full fine-tune", []string{"finetune", "--full", "--base-dtype", "bf16", "--model", ftModel, "--data", ftFixture + "/train.jsonl", "--steps", "1", "--out", out}, "bfloat16 base weights are for LoRA"},
		{"recompute on ONNX Runtime", []string{"finetune", "--gradient-checkpointing", "--backend", "onnx", "--model", ftModel, "--data", ftFixture + "/train.jsonl", "--steps", "1", "--out", out}, "--gradient-checkpointing needs --backend go"},
		{"unknown base dtype", []string{"finetune", "--base-dtype", "f16", "--model", ftModel, "--data", ftFixture + "/train.jsonl", "--steps", "1", "--out", out}, `--base-dtype "f16": f32, bf16 or bf16-stored`},
		{"NaN eps", []string{"finetune", "--model", ftModel, "--data", ftFixture + "/train.jsonl", "--steps", "1", "--adam-eps", "NaN", "--out", out}, "AdamW eps NaN is not a finite number"},
		{"infinite epochs", []string{"finetune", "--model", ftModel, "--data", ftFixture + "/train.jsonl", "--epochs", "+Inf", "--out", out}, "--epochs at most 1e6"},
		{"resume without checkpoints", []string{"finetune", "--model", ftModel, "--data", ftFixture + "/train.jsonl", "--steps", "1", "--resume", "--out", out}, "no checkpoint-K folder"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runOctlm(t, "", tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(out, lora.WeightsFile)); err == nil {
		t.Error("a refused run wrote an adapter")
	}
}

func TestMergeCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "merged")
	_, stderr, code := runOctlm(t, "", "merge", "--model", ftModel, "--adapter", ftFixture+"/lora/init-adapter", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, err := loader.OpenCheckpoint(out); err != nil {
		t.Fatal(err)
	}
	dora := t.TempDir()
	cfg, _ := os.ReadFile(ftFixture + "/lora/init-adapter/" + lora.ConfigFile)
	w, _ := os.ReadFile(ftFixture + "/lora/init-adapter/" + lora.WeightsFile)
	os.WriteFile(filepath.Join(dora, lora.ConfigFile), []byte(strings.Replace(string(cfg), `"use_dora": false`, `"use_dora": true`, 1)), 0o644)
	os.WriteFile(filepath.Join(dora, lora.WeightsFile), w, 0o644)
	_, stderr, code = runOctlm(t, "", "merge", "--model", ftModel, "--adapter", dora, "--out", filepath.Join(t.TempDir(), "x"))
	if code != 2 || !strings.Contains(stderr, "use_dora (DoRA)") {
		t.Errorf("a DoRA adapter: exit %d, %s", code, stderr)
	}
}

// TestFinetuneFull runs the fixture's full fine-tune through the command, its result sharded:
// a checkpoint folder (config copied, an index over the shards) within 1e-5 of the reference on
// all but 0.01% of the entries.
func TestFinetuneFull(t *testing.T) {
	out := t.TempDir()
	_, stderr, code := runOctlm(t, "", "finetune", "--full", "--model", "../../testdata/tiny-qwen3-untied",
		"--data", ftFixture+"/train-untied.jsonl", "--steps", "3", "--batch", "2", "--lr", "5e-4", "--lr-schedule", "constant",
		"--weight-decay", "0.1", "--max-grad-norm", "0", "--shuffle=false", "--max-shard-bytes", "200000", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "config.json")); err != nil {
		t.Error("config.json not copied")
	}
	ck, err := loader.OpenCheckpoint(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if !ck.Sharded() {
		t.Error("not sharded with --max-shard-bytes 200000")
	}
	ref, err := loader.Open(ftFixture + "/full-untied/reference-model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	total, off := 0, 0
	for _, info := range ref.Tensors() {
		e, ok := ck.Lookup(info.Name)
		if !ok || e.Info.DType != loader.F32 {
			t.Fatalf("%s missing or not float32", info.Name)
		}
		want := make([]float32, info.NumElements())
		got := make([]float32, len(want))
		if err := ref.ReadFloat32(info, want); err != nil {
			t.Fatal(err)
		}
		if err := e.File.ReadFloat32(e.Info, got); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Abs(float64(got[i]-want[i])) > 1e-5 {
				off++
			}
		}
		total += len(want)
	}
	if total == 0 || float64(off) > 1e-4*float64(total) {
		t.Errorf("%d of %d entries beyond 1e-5", off, total)
	}
}
