//go:build linux

package fileio

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// deadPID is the PID of a process that ran and was reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("cannot run true:", err)
	}
	pid := cmd.Process.Pid
	if running, _ := process(pid); running {
		t.Skip("the PID was reused at once")
	}
	return pid
}

// TestRemoveStale: temporaries whose writer is gone (a dead PID, a PID that started after the
// temporary was last changed, this process's PID on a temporary it is not writing) are removed;
// those of a live writer, this process's own, and names that are not temporaries stay.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-time.Hour)
	mk := func(name string, folder bool, mtime time.Time) string {
		p := filepath.Join(dir, name)
		var err error
		if folder {
			if err = os.Mkdir(p, 0o755); err == nil {
				err = os.WriteFile(filepath.Join(p, ".model.safetensors.tmp-1-2"), []byte("x"), 0o644)
			}
		} else {
			err = os.WriteFile(p, []byte("partial"), 0o644)
		}
		if err == nil && !mtime.IsZero() {
			err = os.Chtimes(p, mtime, mtime)
		}
		if err != nil {
			t.Fatal(err)
		}
		return name
	}
	dead := strconv.Itoa(deadPID(t))
	self := strconv.Itoa(os.Getpid())
	parent := strconv.Itoa(os.Getppid()) // started before the file was made: a live writer
	own, err := CreateTemp(filepath.Join(dir, "mine.jsonl"), "tmp")
	if err != nil {
		t.Fatal(err)
	}
	defer RemoveTemp(own.Name())
	own.Close()
	ownDir, err := MkdirTemp(filepath.Join(dir, "ckpt2"), "synth")
	if err != nil {
		t.Fatal(err)
	}
	defer RemoveTemp(ownDir)
	stale := []string{
		mk(".ckpt.synth-"+dead+"-123", true, time.Time{}),
		mk(".p.jsonl.tmp-"+dead+"-9", false, time.Time{}),
		mk(".p.jsonl.tmp-"+self+"-77", false, time.Time{}),                    // this PID, not this process's
		mk(".q.jsonl.tmp-"+parent+"-5", false, old.Add(-24*time.Hour*365*50)), // before the parent started
	}
	kept := []string{
		mk(".r.jsonl.tmp-"+parent+"-5", false, time.Time{}),
		mk(".ckpt.other-"+dead+"-1", true, time.Time{}), // not a kind of octlm's
		mk(".notes.tmp-"+dead, false, time.Time{}),      // no random part
		mk("model.safetensors", false, old),
		filepath.Base(own.Name()),
		filepath.Base(ownDir),
	}
	removed := RemoveStale(dir)
	slices.Sort(removed)
	slices.Sort(stale)
	if !slices.Equal(removed, stale) {
		t.Errorf("removed %q, want %q", removed, stale)
	}
	for _, name := range kept {
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range stale {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s survived", name)
		}
	}
}

// TestRemoveLive: RemoveLive removes what this process is writing and nothing it finished.
func TestRemoveLive(t *testing.T) {
	dir := t.TempDir()
	done := filepath.Join(dir, "done.txt")
	if err := WriteFile(done, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	o, err := Create(filepath.Join(dir, "rows.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Abort()
	folder, err := MkdirTemp(filepath.Join(dir, "ckpt"), "synth")
	if err != nil {
		t.Fatal(err)
	}
	removed := RemoveLive()
	if !slices.Contains(removed, o.Name()) || !slices.Contains(removed, folder) {
		t.Errorf("removed %q, want %s and %s", removed, o.Name(), folder)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "done.txt" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("left %q, want only done.txt", names)
	}
}

// TestScratchDir: a scratch folder lives in $TMPDIR under octlm's prefix; a later one removes
// a dead process's scratch folders there and leaves other programs' files alone, even when
// they are named like octlm's temporaries.
func TestScratchDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := strconv.Itoa(deadPID(t))
	stale := filepath.Join(tmp, ".octlm-parity.tmp-"+dead+"-1")
	other := filepath.Join(tmp, ".editor.tmp-"+dead+"-1")
	for _, p := range []string{stale, other} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := ScratchDir("octlm-parity")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(dir) != tmp || !strings.HasPrefix(filepath.Base(dir), ".octlm-parity.tmp-"+strconv.Itoa(os.Getpid())+"-") {
		t.Errorf("scratch folder %s", dir)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("the dead process's scratch folder survived")
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another program's folder was removed: %v", err)
	}
	if err := RemoveTemp(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := ScratchDir("figures"); err == nil {
		t.Error("a scratch name without octlm's prefix was accepted")
	}
}
