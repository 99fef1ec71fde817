package hub

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// stalledServer accepts connections and never answers, until the test ends.
func stalledServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// fastTimeouts are Hub client timeouts short enough for tests.
func fastTimeouts(o Options) Options {
	o.ConnectTimeout, o.ResponseTimeout, o.StallTimeout = 200*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	return o
}

// TestResolveStalledHub: a Hub that accepts connections and never answers, or stops sending
// mid-file, fails within the timeouts; with the revision cached, the cached snapshot is used
// with a warning, as when the Hub refuses the connection.
func TestResolveStalledHub(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	cached := t.TempDir()
	want, err := Resolve(context.Background(), "Test/tiny-qwen3", hub.opts(cached))
	if err != nil {
		t.Fatal(err)
	}
	stalled := stalledServer(t)
	// The hub answers everything but config.json's content, of which it sends half and stops.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	midFile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/config.json") {
			b := hub.files["config.json"]
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			w.WriteHeader(http.StatusOK)
			w.Write(b[:len(b)/2])
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		hub.serve(w, r)
	}))
	t.Cleanup(midFile.Close)

	cases := []struct {
		name, endpoint, cache string
		wantDir               string // "" for an error
		wantText              string // in the warning, or in the error (alternatives split by |)
		client                *http.Client
	}{
		{"stalled, cached", stalled, cached, want, "using the cached snapshot", nil},
		{"stalled, not cached", stalled, t.TempDir(), "", "timeout awaiting response headers|no answer within", nil},
		{"stalls mid-file", midFile.URL, t.TempDir(), "", "no data for", nil},
		// A caller's client with no timeouts of its own is still bounded by the watchdog.
		{"stalled, own client", stalled, t.TempDir(), "", "no answer within", &http.Client{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var progress bytes.Buffer
			opts := fastTimeouts(Options{Endpoint: c.endpoint, CacheDir: c.cache, Progress: &progress, Client: c.client})
			begin := time.Now()
			dir, err := Resolve(context.Background(), "Test/tiny-qwen3", opts)
			if took := time.Since(begin); took > 5*time.Second {
				t.Errorf("took %v with timeouts of 0.3 s", took)
			}
			if c.wantDir != "" {
				if err != nil || dir != c.wantDir {
					t.Fatalf("got %q, %v; want the cached snapshot %s", dir, err, c.wantDir)
				}
				if !strings.Contains(progress.String(), c.wantText) {
					t.Errorf("warning %q lacks %q", progress.String(), c.wantText)
				}
				return
			}
			if err == nil || !slices.ContainsFunc(strings.Split(c.wantText, "|"), func(w string) bool { return strings.Contains(err.Error(), w) }) {
				t.Fatalf("got %q, %v; want an error containing %q", dir, err, c.wantText)
			}
		})
	}
}

// slowHub is tinyHub that holds back file contents until two clients have asked for the
// revision, so that two concurrent downloads overlap: an event, not a pause (bounded, so a
// client that never comes fails the test instead of hanging it).
func slowHub(t *testing.T) *fakeHub {
	h := &fakeHub{t: t, repo: "Test/tiny-qwen3", files: map[string][]byte{}}
	for _, n := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(fixture(t, "tiny-qwen3"), n))
		if err != nil {
			t.Fatal(err)
		}
		h.files[n] = b
	}
	var mu sync.Mutex
	asked := 0
	bothAsked := make(chan struct{})
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			mu.Lock()
			if asked++; asked == 2 {
				close(bothAsked)
			}
			mu.Unlock()
		} else if r.Method == http.MethodGet {
			select {
			case <-bothAsked:
			case <-time.After(time.Minute):
				t.Error("the second client never asked for the revision")
			}
		}
		h.serve(w, r)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// TestResolveConcurrentFirstDownload: two downloads of the same files into an empty cache at
// the same time both succeed, each blob is fetched once, and both see the same snapshot.
func TestResolveConcurrentFirstDownload(t *testing.T) {
	clearHubEnv(t)
	hub := slowHub(t)
	cache := t.TempDir()
	const n = 2
	dirs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { dirs[i], errs[i] = Resolve(context.Background(), "Test/tiny-qwen3", hub.opts(cache)) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("download %d: %v", i, errs[i])
		}
		if dirs[i] != dirs[0] {
			t.Fatalf("downloads resolved to %s and %s", dirs[0], dirs[i])
		}
	}
	for name, b := range hub.files {
		got, err := os.ReadFile(filepath.Join(dirs[0], name))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s: %d bytes, %v; want the Hub's %d bytes", name, len(got), err, len(b))
		}
	}
	if hub.gets != len(hub.files) {
		t.Errorf("the Hub served %d downloads for %d files: the second process did not wait for the first", hub.gets, len(hub.files))
	}
	blobs, _ := os.ReadDir(filepath.Join(cache, "models--Test--tiny-qwen3", "blobs"))
	for _, b := range blobs {
		if strings.HasSuffix(b.Name(), ".incomplete") {
			t.Errorf("partial file left: %s", b.Name())
		}
	}
	snap, _ := os.ReadDir(dirs[0])
	for _, e := range snap {
		if strings.HasSuffix(e.Name(), ".link") {
			t.Errorf("temporary link left: %s", e.Name())
		}
	}
}

// TestResolveSymlinkLoopNamed: a folder given to Resolve that is a symlink loop is an error
// naming it, not a missing folder to look up on the Hub.
func TestResolveSymlinkLoopNamed(t *testing.T) {
	clearHubEnv(t)
	p := filepath.Join(t.TempDir(), "model")
	if err := os.Symlink(filepath.Base(p), p); err != nil {
		t.Fatal(err)
	}
	_, err := Resolve(context.Background(), p, Options{Offline: true, CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), p) || strings.Contains(err.Error(), "no such folder") {
		t.Fatalf("got %v, want an error naming the loop %s", err, p)
	}
}
