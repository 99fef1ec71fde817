package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/octlm/octlm/hub"
)

// TestOfflineHintOnlyForTheNetwork: the "cannot reach the Hugging Face Hub" hint follows errors
// of reaching the Hub, never errors of the local disk (an unwritable, read-only or full cache,
// a file where a folder should be), which are syscall.Errno values like the network's.
func TestOfflineHintOnlyForTheNetwork(t *testing.T) {
	refused := httptest.NewServer(http.NotFoundHandler())
	refused.Close()
	_, unreachable := hub.Resolve(context.Background(), "Org/none", hub.Options{Endpoint: refused.URL, CacheDir: t.TempDir()})
	cases := []struct {
		name string
		err  error
		hint bool
	}{
		{"connection refused", unreachable, true},
		{"HF_HOME a file", fmt.Errorf("hub: %w", &fs.PathError{Op: "mkdir", Path: "/x/hub", Err: syscall.ENOTDIR}), false},
		{"HF_HOME unwritable", fmt.Errorf("hub: %w", &fs.PathError{Op: "mkdir", Path: "/x/hub", Err: syscall.EACCES}), false},
		{"read-only cache", fmt.Errorf("hub: %w", &fs.PathError{Op: "open", Path: "/x/refs/main", Err: syscall.EROFS}), false},
		{"disk full", fmt.Errorf("hub: downloading model.safetensors: %w", &fs.PathError{Op: "write", Path: "/x/blob", Err: syscall.ENOSPC}), false},
	}
	for _, c := range cases {
		got := withOfflineHint(c.err).Error()
		if hinted := strings.Contains(got, "cannot reach the Hugging Face Hub"); hinted != c.hint {
			t.Errorf("%s: %q: hint %v, want %v", c.name, got, hinted, c.hint)
		}
	}
}

// TestInspectCacheIsAFile runs octlm with HF_HUB_CACHE a file and a Hub (on loopback) that
// answers: the error names the disk's problem, without the offline hint.
func TestInspectCacheIsAFile(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	config := []byte(`{"model_type": "qwen3"}`)
	sum := sha1.New()
	fmt.Fprintf(sum, "blob %d\x00%s", len(config), config)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/models/Org/tiny/revision/"):
			fmt.Fprintf(w, `{"sha": %q, "siblings": [{"rfilename": "config.json"}]}`, commit)
		case strings.HasPrefix(r.URL.Path, "/Org/tiny/resolve/"):
			w.Header().Set("X-Repo-Commit", commit)
			w.Header().Set("ETag", `"`+hex.EncodeToString(sum.Sum(nil))+`"`)
			w.Header().Set("Content-Length", fmt.Sprint(len(config)))
			w.Write(config)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HUB_CACHE", file)
	t.Setenv("HF_HUB_OFFLINE", "")
	_, stderr, code := runOctlm(t, "", "inspect", "Org/tiny")
	if code != 2 || !strings.Contains(stderr, "not a directory") || strings.Contains(stderr, "HF_HUB_OFFLINE") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 2, the disk's error and no offline hint", code, stderr)
	}
}

// TestStrayFileNameEscaped: the warning about a stray .safetensors file beside a checkpoint
// shows its name escaped, on one line.
func TestStrayFileNameEscaped(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(testdata("tiny-qwen3", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "x\x1b]0;PWNED\x07\nFAKE.safetensors"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runOctlm(t, "", "generate", "-m", dir, "--prompt-ids", "1,2", "-n", "1", "--backend", "go")
	if code != 0 || strings.Contains(stderr, "\x1b") || !strings.Contains(stderr, `x\x1b]0;PWNED\x07\x0aFAKE.safetensors`) {
		t.Errorf("exit %d, stderr:\n%q\nwant exit 0 and the name escaped", code, stderr)
	}
}
