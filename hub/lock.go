package hub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// errLocked is tryLock's answer when another holder has the lock.
var errLocked = errors.New("locked by another holder")

// lockFile takes an exclusive lock on path (see tryLock), so two downloads of one blob take
// turns, polling every 50 ms while another holder has it. waiting is called once if another
// holder makes it wait. The returned function releases the lock.
func lockFile(ctx context.Context, path string, waiting func()) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	for {
		unlock, err := tryLock(path)
		if !errors.Is(err, errLocked) {
			return unlock, err
		}
		if waiting != nil {
			waiting()
			waiting = nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
