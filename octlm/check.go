package octlm

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/octlm/octlm/loader"
)

// checkArchSizes is checkSizes for an architecture: its config against the checkpoint's header.
func checkArchSizes(arch architecture, ckpt *loader.Checkpoint) error {
	embedding, layers := arch.sizeNames()
	return checkSizes(arch.shape(), ckpt, embedding, layers)
}

// checkDirSizes is checkArchSizes for the checkpoint in dir, when dir holds one (a folder of
// config.json alone, for an estimate, has only its config's bounds): only the headers are read.
func checkDirSizes(arch architecture, dir string) error {
	ckpt, err := loader.OpenCheckpoint(dir)
	var format *loader.FormatError
	if errors.As(err, &format) && format.Rule == loader.RuleNoCheckpoint {
		return nil
	}
	if err != nil {
		return err
	}
	defer ckpt.Close()
	return checkArchSizes(arch, ckpt)
}

// checkSizes compares the sizes a config announces with the checkpoint's header before
// anything whose size comes from the config is built: the number of layers (from the
// <layers>N. names, e.g. model.layers.N.) and the embedding's [vocab_size, hidden_size] (the
// first of embedding's names found). A config.json that claims a billion layers is then refused
// at once instead of driving a billion-entry weight list; every other shape is checked tensor by
// tensor before it is allocated.
func checkSizes(cfg Shape, ckpt *loader.Checkpoint, embedding []string, layers string) error {
	var e loader.Entry
	found := false
	for _, name := range embedding {
		if e, found = ckpt.Lookup(name); found {
			break
		}
	}
	if !found {
		return fmt.Errorf("octlm: %s: missing checkpoint tensor %q", ckpt.Dir(), embedding[0])
	}
	if want := []int{cfg.Vocab, cfg.Width}; !slices.Equal(e.Info.Shape, want) {
		return fmt.Errorf("octlm: %s: tensor %q: shape %v does not match the config's vocab_size × hidden_size %v",
			e.File.Path(), e.Info.Name, e.Info.Shape, want)
	}
	seen := map[int]bool{}
	for e := range ckpt.Tensors() {
		rest, ok := strings.CutPrefix(e.Info.Name, layers)
		if !ok {
			continue
		}
		digits, _, ok := strings.Cut(rest, ".")
		n, err := strconv.Atoi(digits)
		if !ok || err != nil || n < 0 || digits != strconv.Itoa(n) {
			return fmt.Errorf("octlm: %s: tensor %q: unexpected checkpoint tensor", e.File.Path(), e.Info.Name)
		}
		seen[n] = true
	}
	for n := range seen {
		if n >= cfg.Layers {
			return fmt.Errorf("octlm: %s: the checkpoint holds layer %d, the config's num_hidden_layers is %d", ckpt.Dir(), n, cfg.Layers)
		}
	}
	if len(seen) != cfg.Layers {
		return fmt.Errorf("octlm: %s: the config's num_hidden_layers is %d, the checkpoint holds %d layers", ckpt.Dir(), cfg.Layers, len(seen))
	}
	return nil
}
