package hub

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolveLocalLooking: a name that is no folder but reads as a local path is refused as a
// missing folder without asking the Hub (the endpoint here would fail the test if asked);
// names that read as Hub names still go to the Hub.
func TestResolveLocalLooking(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "testdata"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	for _, c := range []struct {
		name  string
		local bool
	}{
		{"testdata/tiny-qwen3-nope", true},
		{"./nope", true},
		{"../nope", true},
		{"/nonexistent/checkpoint", true},
		{"~/octlm-no-such-checkpoint", true},
		{".hidden/model", true},
		{"Qwen/Qwen3-0.6B", false},
		{"org/tiny@main", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Resolve(context.Background(), c.name, Options{Endpoint: "http://127.0.0.1:1", CacheDir: t.TempDir()})
			if err == nil {
				t.Fatal("resolved")
			}
			local := strings.Contains(err.Error(), "no such folder (a local path")
			if local != c.local {
				t.Errorf("local %v, want %v: %v", local, c.local, err)
			}
		})
	}
}
