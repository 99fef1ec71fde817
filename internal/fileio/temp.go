package fileio

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Temporaries are named ".BASE.KIND-PID-N" beside the target BASE they become: KIND says what
// writes them ("tmp" for a file, "synth" for a checkpoint folder), PID is the writing process
// and N a random number. A process killed outright (SIGKILL, a power cut) cannot remove its
// temporaries; the PID lets a later run tell them from those of a writer still at work and
// remove them (RemoveStale, which CreateTemp and MkdirTemp call on the folder they write in).
//
// While a temporary is being written it is also listed in this process, so that a signal
// handler can remove every one before the process exits (RemoveLive).

// staleName matches a temporary's name: base, kind, PID and the random part.
var staleName = regexp.MustCompile(`^\.(.+)\.([a-z]+)-([0-9]+)-([0-9]+)$`)

// tempKinds are the kinds RemoveStale removes; other names that happen to match are left alone.
var tempKinds = map[string]bool{"tmp": true, "synth": true}

var live struct {
	sync.Mutex
	paths map[string]bool
}

// track lists path as a temporary of this process; it reports false when path already was.
func track(path string) bool {
	live.Lock()
	defer live.Unlock()
	if live.paths == nil {
		live.paths = map[string]bool{}
	}
	if live.paths[path] {
		return false
	}
	live.paths[path] = true
	return true
}

func tracked(path string) bool {
	live.Lock()
	defer live.Unlock()
	return live.paths[path]
}

// Release takes path off the list of this process's temporaries once it was renamed into
// place or removed.
func Release(path string) {
	live.Lock()
	defer live.Unlock()
	delete(live.paths, path)
}

// critical is held by Uninterruptible; EndProcess takes it and never gives it back.
var critical sync.Mutex

// Uninterruptible runs fn, a step that must not be cut in two (a checkpoint folder swapped for
// another by two renames): EndProcess, and so a signal that ends the process, waits for it.
func Uninterruptible(fn func() error) error {
	critical.Lock()
	defer critical.Unlock()
	return fn()
}

// EndProcess is a signal handler's last step before it ends the process: it waits for an
// Uninterruptible step in progress, holds back every later one, and removes the temporaries
// this process is writing (RemoveLive), returning the paths removed.
func EndProcess() []string {
	critical.Lock() // never released: the process ends
	return RemoveLive()
}

// RemoveLive removes every temporary this process is writing (files and folders), for a
// signal handler about to end the process; it returns the paths removed. Writers still at
// work then fail or finish into unlinked files.
func RemoveLive() []string {
	live.Lock()
	defer live.Unlock()
	var removed []string
	for p := range live.paths {
		if err := os.RemoveAll(p); err == nil {
			removed = append(removed, p)
		}
		delete(live.paths, p)
	}
	return removed
}

// tempName is the name of a new temporary of kind for target.
func tempName(target, kind string) string {
	return filepath.Join(filepath.Dir(target), fmt.Sprintf(".%s.%s-%d-%d", filepath.Base(target), kind, os.Getpid(), rand.Uint32()))
}

// CreateTemp creates a temporary file of kind beside target (mode 0600, as os.CreateTemp),
// listed as this process's until Release, after removing stale temporaries in that folder.
func CreateTemp(target, kind string) (*os.File, error) {
	RemoveStale(filepath.Dir(target))
	for range 100 {
		name := tempName(target, kind)
		if !track(name) {
			continue
		}
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			Release(name)
			continue
		}
		if err != nil {
			Release(name)
			return nil, err
		}
		return f, nil
	}
	return nil, &fs.PathError{Op: "createtemp", Path: target, Err: fs.ErrExist}
}

// MkdirTemp creates a temporary folder of kind beside target (mode 0700), listed as this
// process's until Release, after removing stale temporaries in that folder.
func MkdirTemp(target, kind string) (string, error) {
	RemoveStale(filepath.Dir(target))
	return mkdirTemp(target, kind)
}

func mkdirTemp(target, kind string) (string, error) {
	for range 100 {
		name := tempName(target, kind)
		if !track(name) {
			continue
		}
		err := os.Mkdir(name, 0o700)
		if errors.Is(err, fs.ErrExist) {
			Release(name)
			continue
		}
		if err != nil {
			Release(name)
			return "", err
		}
		return name, nil
	}
	return "", &fs.PathError{Op: "mkdirtemp", Path: target, Err: fs.ErrExist}
}

// RemoveStale removes the temporaries in dir whose writer is gone: its process no longer
// runs, or a process of that PID started after the temporary was last changed (the PID was
// reused, as it is by every container's first process), or it is this process's PID but not
// one of its temporaries. It returns the names removed; errors (an unreadable folder, a
// temporary another user owns) leave things as they are.
func RemoveStale(dir string) []string { return removeStale(dir, "") }

// removeStale is RemoveStale for the temporaries whose target's name starts with prefix.
func removeStale(dir, prefix string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		m := staleName.FindStringSubmatch(e.Name())
		if m == nil || !tempKinds[m[2]] || !strings.HasPrefix(m[1], prefix) {
			continue
		}
		pid, err := strconv.Atoi(m[3])
		if err != nil || pid <= 0 {
			continue
		}
		path := filepath.Join(dir, e.Name())
		info, err := e.Info()
		if err != nil {
			continue
		}
		if !writerGone(path, pid, info.ModTime()) {
			continue
		}
		if os.RemoveAll(path) == nil {
			removed = append(removed, e.Name())
		}
	}
	return removed
}

// writerGone reports whether the process that wrote the temporary at path (PID pid, last
// changed at mtime) can no longer be writing it.
func writerGone(path string, pid int, mtime time.Time) bool {
	if pid == os.Getpid() {
		return !tracked(path)
	}
	running, started := process(pid)
	if !running {
		return true
	}
	// A writer makes its temporary after it starts; allow for the coarse clocks involved.
	return !started.IsZero() && started.After(mtime.Add(2*time.Second))
}

// RemoveTemp removes a temporary (file or folder, if still there) and takes it off the list.
func RemoveTemp(path string) error {
	err := os.RemoveAll(path)
	Release(path)
	return err
}

// ScratchDir creates a private working folder for this process in the system's temporary
// folder (named after name, which starts with "octlm-", and the PID), removed by RemoveTemp,
// by RemoveLive on a signal, or by a later ScratchDir should this process be killed. Only
// octlm's own scratch folders there are looked at, not other programs' files.
func ScratchDir(name string) (string, error) {
	if !strings.HasPrefix(name, scratchPrefix) {
		return "", fmt.Errorf("fileio: scratch folder name %q does not start with %q", name, scratchPrefix)
	}
	removeStale(os.TempDir(), scratchPrefix)
	return mkdirTemp(filepath.Join(os.TempDir(), name), "tmp")
}

// scratchPrefix starts the name of every scratch folder.
const scratchPrefix = "octlm-"
