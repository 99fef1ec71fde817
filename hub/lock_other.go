//go:build !unix

package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// tryLock takes an exclusive lock by creating path (O_EXCL), removed on release; errLocked when
// another holder has it.
func tryLock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		f.Close()
		return func() { os.Remove(path) }, nil
	}
	if errors.Is(err, fs.ErrExist) {
		return nil, errLocked
	}
	return nil, fmt.Errorf("hub: locking %s: %w", path, err)
}
