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
// another holder has it. The lock goes with the process should it die.
func tryLock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|oNoFollow|oNonBlock, 0o644)
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
