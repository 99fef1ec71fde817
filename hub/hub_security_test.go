package hub

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const tinyRepoDir = "models--Test--tiny-qwen3"

// resolveBounded runs Resolve and fails the test if it does not return within 30 s (a partial
// file that never ends, say), instead of hanging the test binary.
func resolveBounded(t *testing.T, ref string, opts Options) (string, error) {
	t.Helper()
	type result struct {
		dir string
		err error
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	go func() {
		dir, err := Resolve(ctx, ref, opts)
		done <- result{dir, err}
	}()
	select {
	case r := <-done:
		return r.dir, r.err
	case <-time.After(30 * time.Second):
		t.Fatalf("Resolve(%s) did not return within 30 s", ref)
		return "", nil
	}
}

// TestResolveEscapesNames: a file name from the Hub holding escape sequences and a newline
// reaches the progress output escaped.
func TestResolveEscapesNames(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	evil := "\x1b[31mRED\x1b[0m\nFAKE.safetensors"
	hub.files[evil] = []byte("other content: a blob of its own, downloaded with a progress bar")
	var progress bytes.Buffer
	opts := hub.opts(t.TempDir())
	opts.Files = []string{"*.safetensors"}
	opts.Progress = &progress
	if _, err := Resolve(context.Background(), "Test/tiny-qwen3", opts); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(progress.String(), "\x1b") || !strings.Contains(progress.String(), `\x1b[31mRED\x1b[0m\x0aFAKE.safetensors`) {
		t.Errorf("progress shows the name unescaped:\n%q", progress.String())
	}
}

// TestResolveNeverWritesThroughLinks: whatever stands where a partial or complete blob goes (a
// link out of the cache, a link to /dev/zero, a FIFO), the download neither writes through it
// nor reads it forever: it is discarded, the file is fetched, and the target is untouched.
func TestResolveNeverWritesThroughLinks(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	model := hub.files["model.safetensors"]
	cases := []struct {
		name  string
		file  string // which blob of model.safetensors: ".incomplete" or ""
		plant func(t *testing.T, at, victim string)
	}{
		{"partial links out", ".incomplete", func(t *testing.T, at, victim string) { mustSymlink(t, victim, at) }},
		{"partial links to /dev/zero", ".incomplete", func(t *testing.T, at, victim string) { mustSymlink(t, "/dev/zero", at) }},
		{"partial is a FIFO", ".incomplete", func(t *testing.T, at, victim string) {
			if err := syscall.Mkfifo(at, 0o644); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
		}},
		{"blob links out, right content", "", func(t *testing.T, at, victim string) {
			if err := os.WriteFile(victim, model, 0o644); err != nil {
				t.Fatal(err)
			}
			mustSymlink(t, victim, at)
		}},
		{"blob links out, other content", "", func(t *testing.T, at, victim string) { mustSymlink(t, victim, at) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cache := t.TempDir()
			victim := filepath.Join(t.TempDir(), "victim")
			if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
				t.Fatal(err)
			}
			blobs := filepath.Join(cache, tinyRepoDir, "blobs")
			if err := os.MkdirAll(blobs, 0o755); err != nil {
				t.Fatal(err)
			}
			blob := filepath.Join(blobs, etagOf("model.safetensors", model))
			c.plant(t, blob+c.file, victim)
			before, _ := os.ReadFile(victim)
			opts := hub.opts(cache)
			opts.Files = []string{"model.safetensors"}
			dir, err := resolveBounded(t, "Test/tiny-qwen3", opts)
			if err != nil {
				t.Fatal(err)
			}
			if after, _ := os.ReadFile(victim); !bytes.Equal(after, before) {
				t.Errorf("the file outside the cache was written: %d bytes, was %d", len(after), len(before))
			}
			if st, err := os.Lstat(blob); err != nil || !st.Mode().IsRegular() {
				t.Errorf("blob: %v, %v; want a regular file", st, err)
			}
			got, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
			if err != nil || !bytes.Equal(got, model) {
				t.Errorf("snapshot file: %d bytes, %v; want the Hub's %d", len(got), err, len(model))
			}
		})
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestResolveRefusesSnapshotLinksOut: a file of a cached snapshot (config.json, not only the
// weights) that links outside the cache is refused, online, offline and given as a folder.
func TestResolveRefusesSnapshotLinksOut(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	outside := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(outside, hub.files["config.json"], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{outside, "../../../../" + filepath.Base(filepath.Dir(outside)) + "/config.json"} {
		cache := t.TempDir()
		snap, err := Resolve(context.Background(), "Test/tiny-qwen3", hub.opts(cache))
		if err != nil {
			t.Fatal(err)
		}
		alias := filepath.Join(t.TempDir(), "model")
		mustSymlink(t, snap, alias)
		link := filepath.Join(snap, "config.json")
		os.Remove(link)
		mustSymlink(t, target, link)
		for _, c := range []struct {
			name string
			ref  string
			opts Options
		}{
			{"online", "Test/tiny-qwen3", hub.opts(cache)},
			{"offline", "Test/tiny-qwen3", Options{CacheDir: cache, Offline: true}},
			{"folder", snap, Options{CacheDir: cache, Offline: true}},
			{"folder through a link", alias, Options{CacheDir: cache, Offline: true}},
		} {
			_, err := Resolve(context.Background(), c.ref, c.opts)
			if err == nil || !strings.Contains(err.Error(), "outside") || !strings.Contains(err.Error(), "config.json") {
				t.Errorf("%s, link to %s: %v; want config.json refused as outside the cache", c.name, target, err)
			}
		}
	}
}

// TestTokenStaysOnTheEndpoint: the token goes to the endpoint's scheme, host and port only; a
// redirect to another port of the same host (a CDN, or a hostile service) gets no
// Authorization header.
func TestTokenStaysOnTheEndpoint(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	hub.token = "hf_secret"
	var mu sync.Mutex
	var leaked []string
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if a := r.Header.Get("Authorization"); a != "" {
			leaked = append(leaked, r.URL.Path+": "+a)
		}
		mu.Unlock()
		hub.serve(w, r)
	}))
	t.Cleanup(cdn.Close)
	hub.cdnURL = cdn.URL // 127.0.0.1 like the hub, another port
	if _, err := Resolve(context.Background(), "Test/tiny-qwen3", hub.opts(t.TempDir())); err != nil {
		t.Fatal(err)
	}
	if hub.gets == 0 {
		t.Fatal("nothing was downloaded through the other port")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Errorf("the token reached another port: %q", leaked)
	}
}

// TestRevisionNames: "." and the like are refused before they can name a file outside
// refs/ (refs/. is refs itself).
func TestRevisionNames(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	cache := t.TempDir()
	for _, rev := range []string{".", "..", "./main", "a/./b", "a//b", "a/", "/a", ".hidden", "a/.b", "x.lock", "a.", "a..b"} {
		if _, _, err := ParseRepoRef("Org/Name@" + rev); err == nil {
			t.Errorf("revision %q accepted", rev)
		}
		if _, err := Resolve(context.Background(), "Test/tiny-qwen3@"+rev, hub.opts(cache)); err == nil {
			t.Errorf("Resolve with revision %q succeeded", rev)
		}
	}
	if st, err := os.Lstat(filepath.Join(cache, tinyRepoDir, "refs")); err == nil && !st.IsDir() {
		t.Fatalf("refs is now a %v", st.Mode())
	}
	if _, err := Resolve(context.Background(), "Test/tiny-qwen3", hub.opts(cache)); err != nil {
		t.Errorf("a later run: %v", err)
	}
	for _, rev := range []string{"main", "v1.0", "refs/pr/1", "release-2.x", testCommit} {
		if _, _, err := ParseRepoRef("Org/Name@" + rev); err != nil {
			t.Errorf("revision %q refused: %v", rev, err)
		}
	}
}

// TestResolveRefusesFoldersLinkedOut: a blobs, refs or snapshot folder of the cache that links
// outside it is refused before anything is written there.
func TestResolveRefusesFoldersLinkedOut(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	for _, folder := range []string{"blobs", "refs", filepath.Join("snapshots", testCommit)} {
		t.Run(folder, func(t *testing.T) {
			cache := t.TempDir()
			outside := t.TempDir()
			p := filepath.Join(cache, tinyRepoDir, folder)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			mustSymlink(t, outside, p)
			_, err := Resolve(context.Background(), "Test/tiny-qwen3", hub.opts(cache))
			if err == nil || !strings.Contains(err.Error(), "outside") {
				t.Errorf("%v; want %s refused as outside the cache", err, folder)
			}
			if entries, _ := os.ReadDir(outside); len(entries) > 0 {
				t.Errorf("written outside the cache: %s", entries[0].Name())
			}
		})
	}
}

// TestLockLinkNotFollowed: a symbolic link where a download's lock file goes is not opened
// through (which would create its target outside the cache).
func TestLockLinkNotFollowed(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	cache := t.TempDir()
	victim := filepath.Join(t.TempDir(), "created")
	locks := filepath.Join(cache, ".locks", tinyRepoDir)
	if err := os.MkdirAll(locks, 0o755); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, victim, filepath.Join(locks, etagOf("config.json", hub.files["config.json"])+".lock"))
	if _, err := Resolve(context.Background(), "Test/tiny-qwen3", hub.opts(cache)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(victim); err == nil {
		t.Errorf("the lock's link was followed: %s was created", victim)
	}
}

// TestSubfolderLinkedOut: a snapshot subfolder that links outside the cache gets no link
// written through it.
func TestSubfolderLinkedOut(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	hub.files["sub/config.json"] = hub.files["config.json"]
	cache := t.TempDir()
	outside := t.TempDir()
	snap := filepath.Join(cache, tinyRepoDir, "snapshots", testCommit)
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, outside, filepath.Join(snap, "sub"))
	opts := hub.opts(cache)
	opts.Files = []string{"sub/*.json"}
	if _, err := Resolve(context.Background(), "Test/tiny-qwen3", opts); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Errorf("%v; want the subfolder refused as outside the cache", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) > 0 {
		t.Errorf("written outside the cache: %s", entries[0].Name())
	}
}
