package hub

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestLockFileTakesTurns: a second holder waits (told once) until the first releases, and gives
// up with the context's error when it is cancelled first.
func TestLockFileTakesTurns(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".locks", "blob.lock")
	unlock, err := lockFile(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	waits := 0
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if _, err := lockFile(ctx, path, func() { waits++ }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second holder, cancelled: err = %v, want the deadline", err)
	}
	if waits != 1 {
		t.Errorf("waiting called %d times, want 1", waits)
	}
	// The first holder lets go once the second is waiting: an event, not a pause.
	waits = 0
	unlock2, err := lockFile(context.Background(), path, func() { waits++; unlock() })
	if err != nil {
		t.Fatalf("second holder after release: %v", err)
	}
	unlock2()
	if waits != 1 {
		t.Errorf("waiting called %d times, want 1", waits)
	}
}
