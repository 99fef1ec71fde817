//go:build unix

package hub

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// tryLock takes an exclusive flock(2) on path (created if needed), as Python's huggingface_hub
// does on the same file, so downloads from octlm and from Python take turns; errLocked when
// another holder has it. The lock goes with the process should it die. A symbolic link in the
// lock's place is removed, never opened through.
func tryLock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|oNoFollow|oNonBlock, 0o644)
	if errors.Is(err, syscall.ELOOP) {
		// A symbolic link where the lock file goes is no one's lock: never open through it.
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("hub: locking %s: a symbolic link that cannot be removed: %w", path, err)
		}
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|oNoFollow|oNonBlock, 0o644)
	}
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case err == nil:
		return func() {
			syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			f.Close()
		}, nil
	case errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EINTR):
		f.Close()
		return nil, errLocked
	}
	f.Close()
	return nil, fmt.Errorf("hub: locking %s: %w", path, err)
}
