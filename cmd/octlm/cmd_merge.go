package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/octlm/octlm/octlm/lora"
	"github.com/octlm/octlm/train"
)

func init() {
	register("merge", "merge a LoRA adapter into a checkpoint's weights", func(args []string) error {
		return runMerge(args, os.Stderr)
	})
}

// runMerge is `octlm merge`: W + scale·B·A for every adapted Linear, in float32, rounded once to
// the checkpoint's dtype; every other tensor and file copied.
func runMerge(args []string, stderr io.Writer) error {
	ctx, stop := interruptContext()
	defer stop()
	fs := flag.NewFlagSet("merge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "base checkpoint `DIR` (or Hugging Face name)")
	adapter := fs.String("adapter", "", "PEFT adapter `DIR` (adapter_config.json, adapter_model.safetensors)")
	out := fs.String("out", "", "output checkpoint `DIR`")
	maxShard := fs.Int64("max-shard-bytes", 0, "split the weights into files of at most this many bytes (0: the Hub's 4 GB)")
	fs.Usage = func() { // to fs.Output(): where parseFlags sends help
		fmt.Fprintln(fs.Output(), "usage: octlm merge --model DIR --adapter DIR --out DIR\n\n"+
			"Writes the base checkpoint with the adapter merged into its weights (W + scale·B·A in\n"+
			"float32, rounded once to the checkpoint's dtype), config and tokenizer files copied.\n"+
			"Adapters octlm cannot apply exactly (DoRA, modules_to_save, layers_to_transform, a bias,\n"+
			"unknown targets) are refused by name.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" || *adapter == "" || *out == "" {
		return usageError{"--model, --adapter and --out are required"}
	}
	dir, err := resolveCheckpoint(ctx, *model)
	if err != nil {
		return err
	}
	m, err := train.OpenModel(dir, train.ModelOptions{})
	if err != nil {
		return err
	}
	a, err := lora.Read(*adapter)
	if err != nil {
		return err
	}
	if err := lora.Merge(dir, *out, a, train.Linears(m.Params()), *maxShard); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "merged %d modules (scale %g) into %s\n", len(a.Modules), a.Config.Scale(), printable(*out))
	return nil
}
