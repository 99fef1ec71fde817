package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/units"
)

func init() {
	register("manifest", "write (or --verify) a checkpoint folder's size and SHA-256 manifest", func(args []string) error {
		return runManifest(args, os.Stdout, os.Stderr)
	})
}

// runManifest is `octlm manifest`; a failed write to stdout fails it.
func runManifest(args []string, stdout, stderr io.Writer) error {
	return withOutputCheck(stdout, func(stdout io.Writer) error { return manifest(args, stdout, stderr) })
}

func manifest(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("manifest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verify := fs.Bool("verify", false, "check DIR against its manifest (and shipped Hub entries) instead of writing one")
	repo := fs.String("repo", "", "Hub repository recorded in the manifest (default: from a cache snapshot's path)")
	revision := fs.String("revision", "", "Hub commit recorded in the manifest (default: from a cache snapshot's path)")
	force := fs.Bool("force", false, "replace an existing "+loader.ManifestFileName)
	model := fs.String("model", "", "the checkpoint folder `DIR`, as the positional argument is")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "usage: octlm manifest [--verify] [--force] [--repo Org/Name] [--revision COMMIT] DIR   (or --model DIR)\n\n"+
			"Writes DIR/"+loader.ManifestFileName+": every file's size and SHA-256; an existing one is\n"+
			"replaced only with --force. With --verify, checks DIR against it (exit 1 on a mismatch).\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, "[DIR]"); err != nil {
		return err
	}
	dir, err := pathArg(fs, *model, "DIR")
	if err != nil {
		return err
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return usageError{fmt.Sprintf("%s is not a folder", dir)}
	}
	if *verify {
		checks, err := loader.VerifySnapshot(dir, stderr)
		var fe *loader.FormatError
		if errors.As(err, &fe) && (fe.Rule == loader.RuleManifestSize || fe.Rule == loader.RuleManifestHash || fe.Rule == loader.RuleManifestMissed) {
			// The folder differs from its manifest: a failed check. A malformed manifest
			// file is bad input (exit status 2).
			return fmt.Errorf("%w: %w", errCheckFailed, err)
		}
		if err != nil {
			return err
		}
		for _, m := range checks {
			src := loader.ManifestFileName
			if m.Repo != "" {
				src += " (" + m.Repo + ")"
			}
			fmt.Fprintf(stdout, "ok: %d files match %s\n", len(m.Files), src)
		}
		return nil
	}
	// Rewriting the manifest of a changed folder would bless the change: refuse unless asked.
	if _, err := os.Lstat(filepath.Join(dir, loader.ManifestFileName)); err == nil && !*force {
		return usageError{fmt.Sprintf("%s already exists: check the folder with --verify, or give --force to replace it with the folder's current contents",
			filepath.Join(dir, loader.ManifestFileName))}
	}
	r, c := loader.SnapshotRepo(dir)
	if *repo == "" {
		*repo = r
	}
	if *revision == "" {
		*revision = c
	}
	m, err := loader.WriteManifest(dir, *repo, *revision, stderr)
	if err != nil {
		return err
	}
	for _, f := range m.Files {
		fmt.Fprintf(stdout, "%s  %14s  %s\n", f.SHA256, units.Commas(f.Size), printable(f.Name))
	}
	fmt.Fprintf(stdout, "wrote %s (%d files)\n", loader.ManifestFileName, len(m.Files))
	return nil
}
