package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/octlm/octlm/figures"
	"github.com/octlm/octlm/internal/fileio"
	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm/chat"
	"github.com/octlm/octlm/octlm/lora"
	"github.com/octlm/octlm/octlm/tokenizer"
	"github.com/octlm/octlm/train"
	"github.com/octlm/octlm/xla"
)

func init() {
	register("finetune", "fine-tune a checkpoint (LoRA or full) on JSONL data", func(args []string) error {
		return runFinetune(args, os.Stderr)
	})
}

// finetuneFlags are `octlm finetune`'s flags, named as Hugging Face's TrainingArguments, PEFT's
// LoraConfig and TRL's SFTConfig name them.
type finetuneFlags struct {
	model, data, out, backend, logPath, saveGrads, initAdapter, plot string
	steps, batch, gradAccum, warmup, maxLength, saveEvery, keep      int
	epochs, lr, wd, beta1, beta2, eps, maxGradNorm                   float64
	schedule, saveDType, baseDType, targets                          string
	loraR                                                            int
	loraAlpha, loraDropout                                           float64
	rslora, full, shuffle, resume, gradCkpt                          bool
	seed                                                             uint64
	maxShardBytes                                                    int64
	set                                                              []string // the flags given
}

func (f *finetuneFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.model, "model", "", "checkpoint `DIR` (or Hugging Face name) to fine-tune")
	fs.StringVar(&f.data, "data", "", "training rows, `FILE.jsonl`: {\"input_ids\",\"labels\"}, {\"text\"}, {\"prompt\",\"completion\"} or {\"messages\"}")
	fs.StringVar(&f.out, "out", "", "output `DIR`: the result at its top, checkpoints in DIR/checkpoint-K")
	fs.StringVar(&f.backend, "backend", "go", "compute backend (the pure-Go backend differentiates every operation the decoder uses)")
	fs.IntVar(&f.steps, "steps", 0, "optimizer steps (max_steps)")
	fs.Float64Var(&f.epochs, "epochs", 0, "passes over the data, when --steps is not given (num_train_epochs)")
	fs.IntVar(&f.batch, "batch", 1, "rows per micro-batch (per_device_train_batch_size)")
	fs.IntVar(&f.gradAccum, "grad-accum", 1, "micro-batches per optimizer step (gradient_accumulation_steps)")
	fs.Float64Var(&f.lr, "lr", 2e-4, "peak learning rate")
	fs.StringVar(&f.schedule, "lr-schedule", "linear", "learning-rate schedule: constant, linear or cosine (with warmup)")
	fs.IntVar(&f.warmup, "warmup-steps", 0, "linear warmup steps (the first runs at lr 0, as transformers' schedules do)")
	fs.Float64Var(&f.wd, "weight-decay", 0, "AdamW's decoupled weight decay")
	fs.Float64Var(&f.beta1, "adam-beta1", 0.9, "AdamW beta1")
	fs.Float64Var(&f.beta2, "adam-beta2", 0.999, "AdamW beta2")
	fs.Float64Var(&f.eps, "adam-eps", 1e-8, "AdamW epsilon")
	fs.Float64Var(&f.maxGradNorm, "max-grad-norm", 1, "clip the gradients' global L2 norm to this (0: no clipping)")
	fs.IntVar(&f.maxLength, "max-length", 1024, "refuse rows of more tokens than this")
	fs.Uint64Var(&f.seed, "seed", 42, "seed of the data order, the LoRA initialisation and dropout")
	fs.BoolVar(&f.shuffle, "shuffle", true, "shuffle the rows each epoch (false: file order)")
	fs.BoolVar(&f.full, "full", false, "train every weight, not a LoRA adapter")
	fs.IntVar(&f.loraR, "lora-r", 8, "LoRA rank r")
	fs.Float64Var(&f.loraAlpha, "lora-alpha", 16, "LoRA alpha (scale alpha/r)")
	fs.Float64Var(&f.loraDropout, "lora-dropout", 0, "dropout on the LoRA input")
	fs.BoolVar(&f.rslora, "lora-rslora", false, "rank-stabilised scale alpha/√r")
	fs.StringVar(&f.targets, "lora-targets", "q_proj,v_proj", "comma-separated modules (q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj; Qwen3.5 also in_proj_qkv,in_proj_z,out_proj) or all-linear")
	fs.StringVar(&f.initAdapter, "init-adapter", "", "start from this PEFT adapter `DIR` (its r, alpha and targets)")
	fs.StringVar(&f.logPath, "log", "", "write one JSON row per step to `FILE.jsonl`")
	fs.StringVar(&f.plot, "plot", "", "draw the loss per step into `FILE.svg` when the run ends")
	fs.StringVar(&f.saveGrads, "save-gradients", "", "write step 1's gradients (before clipping) to `FILE.safetensors`")
	fs.IntVar(&f.saveEvery, "save-every", 0, "write a checkpoint every K steps (0: only when interrupted)")
	fs.IntVar(&f.keep, "keep", 0, "keep only the newest N checkpoints (0: all)")
	fs.BoolVar(&f.resume, "resume", false, "continue from the newest checkpoint in --out")
	fs.StringVar(&f.saveDType, "save-dtype", "f32", "full fine-tune: the saved weights' dtype, f32 or bf16")
	fs.StringVar(&f.baseDType, "base-dtype", "f32", "LoRA: the frozen base weights in f32; bf16 (held and run in bfloat16, float32 adapters, as transformers with torch_dtype=bfloat16 and PEFT); or bf16-stored (held in bfloat16, run in float32: the f32 numbers for a bfloat16 checkpoint)")
	fs.BoolVar(&f.gradCkpt, "gradient-checkpointing", false, "recompute each decoder layer's activations in the backward pass instead of keeping them (less memory, more compute)")
	fs.Int64Var(&f.maxShardBytes, "max-shard-bytes", 0, "full fine-tune: split the weights into files of at most this many bytes (0: the Hub's 4 GB)")
}

// settings checks the flags and turns them into the loop's settings for rows rows.
func (f *finetuneFlags) settings(rows int) (train.Settings, error) {
	steps := f.steps
	switch {
	case f.steps < 0 || !(f.epochs >= 0) || f.epochs > 1e6:
		return train.Settings{}, usageError{"--steps and --epochs must be non-negative (--epochs at most 1e6)"}
	case f.steps == 0 && f.epochs == 0:
		return train.Settings{}, usageError{"give --steps or --epochs"}
	case f.steps > 0 && f.epochs > 0:
		return train.Settings{}, usageError{"give --steps or --epochs, not both"}
	case f.batch < 1 || f.gradAccum < 1:
		return train.Settings{}, usageError{"--batch and --grad-accum must be at least 1"}
	case f.epochs > 0:
		steps = int(math.Ceil(f.epochs * float64(rows) / float64(f.batch*f.gradAccum)))
	}
	s := train.Settings{
		Steps: steps, Batch: f.batch, GradAccum: f.gradAccum, LR: f.lr,
		Schedule:    train.Schedule{Kind: f.schedule, Warmup: f.warmup, Total: steps},
		AdamW:       train.AdamW{Beta1: f.beta1, Beta2: f.beta2, Eps: f.eps, WeightDecay: f.wd},
		MaxGradNorm: f.maxGradNorm, Full: f.full, Base: train.BaseDType(f.baseDType), Seed: f.seed, Shuffle: f.shuffle, PadMultiple: 8, MaxLength: f.maxLength,
		LoRA: train.LoRASettings{R: f.loraR, Alpha: f.loraAlpha, Dropout: f.loraDropout, RSLoRA: f.rslora, Targets: strings.Split(f.targets, ",")},
	}
	if err := s.Check(); err != nil {
		return s, usageError{err.Error()}
	}
	return s, nil
}

func runFinetune(args []string, stderr io.Writer) error {
	ctx, stop := interruptContext()
	defer stop()
	fs := flag.NewFlagSet("finetune", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f finetuneFlags
	f.register(fs)
	fs.Usage = func() { // to fs.Output(): where parseFlags sends help
		fmt.Fprintln(fs.Output(), "usage: octlm finetune --model DIR --data FILE.jsonl --out DIR (--steps N | --epochs E) [flags]\n\n"+
			"Fine-tunes a Qwen3 or Qwen3.5 checkpoint: a LoRA adapter (PEFT's folder layout; default)\n"+
			"or every weight (--full). The loss, AdamW, clipping and schedules are PyTorch's and\n"+
			"transformers' arithmetic. Checkpoints go to DIR/checkpoint-K as Hugging Face's Trainer\n"+
			"lays them out; --resume continues from the newest. Ctrl-C or SIGTERM writes a checkpoint\n"+
			"and exits (130, 143).\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case f.model == "" || f.data == "" || f.out == "":
		return usageError{"--model, --data and --out are required"}
	case f.saveDType != "f32" && f.saveDType != "bf16":
		return usageError{fmt.Sprintf("--save-dtype %q: f32 or bf16", f.saveDType)}
	case !slices.Contains(train.BaseDTypes, train.BaseDType(f.baseDType)):
		return usageError{fmt.Sprintf("--base-dtype %q: f32, bf16 or bf16-stored", f.baseDType)}
	case f.gradCkpt && f.backend != "go":
		return usageError{"--gradient-checkpointing needs --backend go (ONNX Runtime has no optimization barrier)"}
	case f.keep < 0 || f.saveEvery < 0:
		return usageError{"--keep and --save-every must not be negative"}
	}
	fs.Visit(func(fl *flag.Flag) { f.set = append(f.set, fl.Name) })
	if f.initAdapter != "" {
		for _, name := range f.set {
			switch name {
			case "lora-r", "lora-alpha", "lora-targets", "lora-rslora":
				return usageError{fmt.Sprintf("--%s with --init-adapter: the adapter's adapter_config.json sets it", name)}
			}
		}
	}
	return finetune(ctx, &f, stderr)
}

func finetune(ctx context.Context, f *finetuneFlags, stderr io.Writer) error {
	dir, err := resolveCheckpoint(ctx, f.model)
	if err != nil {
		return err
	}
	model, err := train.OpenModel(dir, train.ModelOptions{RecomputeLayers: f.gradCkpt})
	if err != nil {
		return err
	}
	opts := train.DataOptions{Vocab: train.Vocab(model), MaxLength: f.maxLength, EOS: -1, Template: chat.CheckModelDir(dir)}
	if tok, err := tokenizer.LoadDir(dir); err == nil {
		opts.Tokenizer = tok
		if id, ok := tok.SpecialToken("eos_token"); ok {
			opts.EOS = id
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	rows, err := train.ReadJSONL(f.data, opts)
	if err != nil {
		return err
	}
	s, err := f.settings(len(rows))
	if err != nil {
		return err
	}
	var init *lora.Adapter
	if f.initAdapter != "" {
		if init, err = lora.Read(f.initAdapter); err != nil {
			return err
		}
		if slices.Contains(f.set, "lora-dropout") { // a training setting, not the adapter's shape
			init.Config.LoraDropout = f.loraDropout
		}
	}
	if err := fileio.CheckWritableDir(f.out); err != nil {
		return err
	}
	backend, info, err := xla.Open(f.backend)
	if err != nil {
		return err
	}
	defer backend.Finalize()
	fmt.Fprintf(stderr, "backend: %s\n", shortBackend(info))
	weights, closeWeights, err := train.CheckpointWeights(dir)
	if err != nil {
		return err
	}
	tr, err := train.NewTrainer(model, backend, weights, rows, s, init)
	closeWeights()
	if err != nil {
		return err
	}
	defer tr.Close()
	var history []train.LogRow
	if f.resume {
		steps, err := train.Checkpoints(f.out)
		if err != nil {
			return err
		}
		if len(steps) == 0 {
			return fmt.Errorf("--resume: no checkpoint-K folder in %s", f.out)
		}
		from := filepath.Join(f.out, train.CheckpointName(steps[len(steps)-1]))
		if history, err = tr.Resume(from); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "resumed from %s (step %d of %d)\n", printable(from), tr.Step, s.Steps)
	}
	log, err := openTrainLog(f.logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	for _, row := range history { // a resumed log holds the checkpoint's steps, then the new ones
		if err := log.write(row); err != nil {
			return err
		}
	}
	what := fmt.Sprintf("LoRA r %d, alpha %g on %s", tr.LoRAConfig.R, tr.LoRAConfig.LoraAlpha, strings.Join(tr.LoRAConfig.TargetModules, ","))
	if s.Full {
		what = "every weight"
	}
	trainable := 0
	for _, t := range tr.Trainable {
		trainable += len(t.Data)
	}
	fmt.Fprintf(stderr, "training %s (%d values) on %d rows for %d steps of %d×%d rows\n", what, trainable, len(rows), s.Steps, s.Batch, s.GradAccum)
	bar := newTrainProgress(stderr, s.Steps, tr.Step)
	save := func() error {
		path, err := tr.SaveCheckpoint(f.out, dir, history, f.keep)
		if err == nil {
			bar.note("saved " + printable(path))
		}
		return err
	}
	for tr.Step < s.Steps {
		if ctx.Err() != nil {
			break
		}
		begin := time.Now()
		res, err := tr.RunStep(f.saveGrads != "" && tr.Step == 0)
		if err != nil {
			return err
		}
		row := train.RowOf(res, float64(res.Tokens)/time.Since(begin).Seconds())
		history = append(history, row)
		if err := log.write(row); err != nil {
			return err
		}
		if res.Grads != nil {
			if err := tr.SaveGradients(f.saveGrads, res.Grads); err != nil {
				return err
			}
		}
		bar.update(row)
		if f.saveEvery > 0 && tr.Step%f.saveEvery == 0 && tr.Step < s.Steps {
			if err := save(); err != nil {
				return err
			}
		}
	}
	if f.plot != "" && len(history) > 0 {
		if err := fileio.WriteFile(f.plot, figures.LossCurve(history, filepath.Base(f.out)).SVG); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		bar.finish()
		if tr.Step > 0 {
			if err := save(); err != nil {
				return err
			}
		}
		return interruptedBy(ctx)
	}
	dtype := loader.F32
	if f.saveDType == "bf16" {
		dtype = loader.BF16
	}
	if f.saveEvery > 0 {
		if err := save(); err != nil {
			return err
		}
	}
	if err := tr.WriteResult(f.out, dir, f.model, dtype, f.maxShardBytes); err != nil {
		return err
	}
	bar.finish()
	fmt.Fprintf(stderr, "wrote %s\n", printable(f.out))
	return nil
}

// trainLog is the --log file: one JSON row per step, each line flushed.
type trainLog struct{ f *os.File }

// openTrainLog opens path (none: ""), replacing what it held.
func openTrainLog(path string) (*trainLog, error) {
	if path == "" {
		return &trainLog{}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &trainLog{f: f}, nil
}

func (l *trainLog) write(row train.LogRow) error {
	if l.f == nil {
		return nil
	}
	data, err := json.Marshal(row)
	if err != nil {
		return err
	}
	if _, err := l.f.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("writing %s: %w", l.f.Name(), err)
	}
	return nil
}

func (l *trainLog) Close() {
	if l.f != nil {
		l.f.Close()
	}
}

// trainProgress shows step/total, the smoothed loss, lr, tokens/s and the time left: one
// rewritten line on a terminal, else a line every twentieth of the run.
type trainProgress struct {
	w           io.Writer
	terminal    bool
	total       int
	smooth      float64
	started     time.Time
	first, done int
	lastLine    bool
}

func newTrainProgress(w io.Writer, total, done int) *trainProgress {
	return &trainProgress{w: w, terminal: isTerminal(w), total: total, started: time.Now(), first: done, done: done}
}

func (p *trainProgress) update(row train.LogRow) {
	p.done = row.Step
	if p.done == p.first+1 {
		p.smooth = row.Loss
	} else {
		p.smooth = 0.9*p.smooth + 0.1*row.Loss
	}
	perStep := time.Since(p.started) / time.Duration(p.done-p.first)
	left := (perStep * time.Duration(p.total-p.done)).Round(time.Second)
	line := fmt.Sprintf("step %d/%d  loss %.4f  lr %.3g  %.0f tokens/s  %s left", p.done, p.total, p.smooth, row.LR, row.TokensPerSecond, left)
	switch {
	case p.terminal:
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.lastLine = true
	case p.done == p.total || p.done%max(1, p.total/20) == 0 || p.done == p.first+1:
		fmt.Fprintln(p.w, line)
	}
}

// note prints a message on its own line.
func (p *trainProgress) note(msg string) {
	p.finish()
	fmt.Fprintln(p.w, msg)
}

func (p *trainProgress) finish() {
	if p.lastLine {
		fmt.Fprintln(p.w)
		p.lastLine = false
	}
}
