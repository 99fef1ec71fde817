package main

import (
	"context"
	"fmt"
	"io"

	"github.com/octlm/octlm/eval"
	"github.com/octlm/octlm/internal/fileio"
	"github.com/octlm/octlm/octlm/tokenizer"
	"github.com/octlm/octlm/xla"
)

// maxKLTextBytes bounds the --kl-text file (256 MiB).
const maxKLTextBytes = 256 << 20

// runKLDivergence is eval's llama-perplexity mode: write the base file of the model's
// log-probabilities on a text, or compare the model with a base written before (by octlm or by
// llama-perplexity --kl-divergence-base on the same tokens).
func runKLDivergence(ctx context.Context, a evalArgs, stdout, stderr io.Writer) error {
	dir, err := a.model.resolve(ctx)
	if err != nil {
		return err
	}
	var tokens []int
	if !a.klCompare {
		text, err := fileio.ReadFile(a.klText, maxKLTextBytes)
		if err != nil {
			return fmt.Errorf("--kl-text: %w", err)
		}
		tok, err := tokenizer.LoadDir(dir)
		if err != nil {
			return fmt.Errorf("%s: the base needs the tokenizer: %w", dir, err)
		}
		tokens = tok.Encode(string(text))
		if len(tokens) < 2*a.klCtx {
			return usageError{fmt.Sprintf("--kl-text %s gives %d tokens; at least %d (two chunks of --kl-ctx %d) are needed", a.klText, len(tokens), 2*a.klCtx, a.klCtx)}
		}
	}
	var in *fileio.Output
	if a.klCompare {
		f, err := fileio.OpenRead(a.klBase)
		if err != nil {
			return fmt.Errorf("--kl-divergence-base: %w", err)
		}
		defer f.Close()
		n, _, _, err := eval.ReadKLHeader(f)
		if err != nil {
			return fmt.Errorf("%s: %w", a.klBase, err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		m, err := a.model.openDir(dir, n, xla.Workload{}, stderr)
		if err != nil {
			return err
		}
		defer m.Close()
		res, err := eval.KLDivergence(f, m, m.Shape().Vocab)
		if err != nil {
			return fmt.Errorf("%s: %w", a.klBase, err)
		}
		out := &errWriter{fileio.ErrWriter{W: stdout}}
		fmt.Fprintf(out, "positions            %d\n", res.Positions)
		fmt.Fprintf(out, "Mean PPL(Q)          %.6f\n", res.MeanPPL)
		fmt.Fprintf(out, "Mean PPL(base)       %.6f\n", res.MeanPPLBase)
		fmt.Fprintf(out, "Mean    KLD          %.6f ± %.6f\n", res.MeanKLD, res.KLDStderr)
		fmt.Fprintf(out, "Maximum KLD          %.6f\n", res.MaxKLD)
		fmt.Fprintf(out, "99.0%%   KLD          %.6f\n", res.KLD99)
		fmt.Fprintf(out, "Median  KLD          %.6f\n", res.MedianKLD)
		fmt.Fprintf(out, "RMS Δp               %.3f %%\n", 100*res.RMSDeltaP)
		fmt.Fprintf(out, "Maximum Δp           %.3f %%\n", 100*res.MaxDeltaP)
		fmt.Fprintf(out, "Same top p           %.3f %%\n", 100*res.SameTop)
		return out.check()
	}
	m, err := a.model.openDir(dir, a.klCtx, xla.Workload{}, stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	in, err = fileio.Create(a.klBase)
	if err != nil {
		return err
	}
	defer in.Abort()
	ppl, err := eval.WriteKLBase(in, m, tokens, m.Shape().Vocab, eval.KLBaseOptions{Ctx: a.klCtx, Chunks: a.klChunks})
	if err != nil {
		return err
	}
	if err := in.Commit(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s: perplexity %.4f on the scored half of each chunk\n", printable(a.klBase), ppl)
	return nil
}
