package synth

// Create and CreateQwen35: the one atomic writer of a synthetic checkpoint folder, for Qwen3's
// shapes and Qwen3.5's alike.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/octlm/octlm/internal/fileio"
	"github.com/octlm/octlm/internal/sysinfo"
	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/units"
)

// RefusedError is a target Create refuses before writing anything: a path that is not a folder,
// a folder holding other things than a checkpoint, a checkpoint to replace without force, or a
// disk with too little free space.
type RefusedError struct {
	Path    string // the target folder, or the folder whose disk is too small
	Problem string // what is wrong, after Path
	// NeedsForce: Path holds a checkpoint, which Create replaces only when forced.
	NeedsForce bool
}

func (e *RefusedError) Error() string { return e.Path + " " + e.Problem }

// Create writes a random Qwen3 checkpoint for cfg into dir atomically (WriteWith into a hidden
// folder beside dir, renamed into place when complete). A checkpoint already in dir is replaced
// only with force: at every moment dir is the old checkpoint or the new one, whole. The size is
// checked against the free disk before anything is written. When opts.Context is cancelled (an
// interrupt), or on any error, the hidden folder is removed and dir is left as it was; the error
// then matches the context's cause. A hidden folder left by a run killed outright (SIGKILL) is
// removed by the next run beside it, and a signal that ends the process (fileio.EndProcess)
// waits for the renames.
func Create(dir string, cfg QwenLike, force bool, opts Options) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	sizes := fmt.Sprintf(" (sizes: %d layers, vocabulary %d, hidden %d, MLP %d)", cfg.NumLayers, cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize)
	return create(dir, force, cfg.EstimatedBytes(), sizes, opts.Context, func(tmp string) error { return WriteWith(tmp, cfg, opts) })
}

// CreateQwen35 is Create for a Qwen3.5 checkpoint (WriteQwen35).
func CreateQwen35(dir string, cfg Qwen35Like, force bool, opts Options) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	var need float64
	for _, t := range cfg.Tensors() {
		need += float64(t.Bytes())
	}
	sizes := fmt.Sprintf(" (sizes: %d layers, vocabulary %d, hidden %d, MLP %d)", cfg.NumLayers, cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize)
	return create(dir, force, need, sizes, opts.Context, func(tmp string) error { return WriteQwen35(tmp, cfg, opts) })
}

// create is Create's writer: write fills a hidden folder beside dir, which replaces dir when
// complete. need (about that many bytes; sizes says what was asked for) is checked against the
// free disk first.
func create(dir string, force bool, need float64, sizes string, ctx context.Context, write func(tmp string) error) error {
	if ctx == nil {
		ctx = context.Background()
	}
	dir = filepath.Clean(dir)
	parent := filepath.Dir(dir)
	fileio.RemoveStale(parent) // what killed runs left beside it
	replace, err := checkTarget(dir, force)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	if free := sysinfo.FreeDiskBytes(parent); free >= 0 && need > float64(free) {
		return &RefusedError{Path: parent, Problem: fmt.Sprintf("has %s free and the checkpoint needs about %s%s", units.Bytes(free), units.BytesFloat(need), sizes)}
	}
	// The hidden folder carries this process's PID: should it be killed outright (SIGKILL),
	// the next run that writes beside it removes what it left.
	tmp, err := fileio.MkdirTemp(dir, "synth")
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	defer fileio.RemoveTemp(tmp) // gone once renamed; else the partial checkpoint
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	err = write(tmp)
	if ctx.Err() != nil {
		return fmt.Errorf("synth: %w; %s left as it was", context.Cause(ctx), dir)
	}
	if err != nil {
		return err
	}
	// A signal now would leave the old checkpoint renamed aside and the new one removed.
	return fileio.Uninterruptible(func() error { return moveIntoPlace(tmp, dir, replace) })
}

// checkTarget decides what writing to dir means: a new folder (or an empty one), or the
// replacement of an existing checkpoint, allowed only with force. A folder that holds other
// things and no checkpoint is never replaced.
func checkTarget(dir string, force bool) (replace bool, err error) {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("synth: %w", err)
	}
	if !st.IsDir() {
		return false, &RefusedError{Path: dir, Problem: "exists and is not a folder"}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("synth: %w", err)
	}
	if len(entries) == 0 {
		return true, nil
	}
	isCheckpoint := false
	for _, name := range [...]string{"config.json", loader.SingleFileName, loader.IndexFileName} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			isCheckpoint = true
		}
	}
	switch {
	case !isCheckpoint:
		return false, &RefusedError{Path: dir, Problem: "holds files but no checkpoint; not replacing it (give a new or empty folder)"}
	case !force:
		return false, &RefusedError{Path: dir, Problem: "already holds a checkpoint", NeedsForce: true}
	}
	return true, nil
}

// moveIntoPlace renames the finished folder tmp to dir. An existing dir (checked by
// checkTarget) is first renamed aside, then removed once tmp is in place, so at every moment
// dir is either the old checkpoint or the new one, whole.
func moveIntoPlace(tmp, dir string, replace bool) error {
	if !replace {
		if err := os.Rename(tmp, dir); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
		return nil
	}
	old := tmp + ".old"
	if err := os.Rename(dir, old); err != nil {
		return fmt.Errorf("synth: moving the old checkpoint aside: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if rerr := os.Rename(old, dir); rerr != nil {
			return fmt.Errorf("synth: %w (and the old checkpoint stays at %s: %v)", err, old, rerr)
		}
		return fmt.Errorf("synth: %w", err)
	}
	return os.RemoveAll(old)
}
