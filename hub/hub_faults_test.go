package hub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// cachedTiny fills a cache from hub and returns it with the snapshot folder.
func cachedTiny(t *testing.T, hub *fakeHub) (cache, snap string) {
	t.Helper()
	cache = t.TempDir()
	snap, err := Resolve(context.Background(), "Test/tiny-qwen3", hub.opts(cache))
	if err != nil {
		t.Fatal(err)
	}
	return cache, snap
}

// TestLocalErrorsAreNotTheNetwork: a cache that cannot be written (a file where a folder must
// be, the .locks folder a file) fails with the disk's error, which does not match
// ErrUnreachable (no offline hint), while a refused connection does.
func TestLocalErrorsAreNotTheNetwork(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	locksFile := t.TempDir()
	if err := os.WriteFile(filepath.Join(locksFile, ".locks"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	refused := httptest.NewServer(http.NotFoundHandler())
	refusedURL := refused.URL
	refused.Close()
	cases := []struct {
		name        string
		opts        Options
		unreachable bool
	}{
		{"cache is a file", hub.opts(file), false},
		{"cache below a file", hub.opts(filepath.Join(file, "hub")), false},
		{".locks is a file", hub.opts(locksFile), false},
		{"connection refused", Options{Endpoint: refusedURL, CacheDir: t.TempDir()}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Resolve(context.Background(), "Test/tiny-qwen3", c.opts)
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, ErrUnreachable); got != c.unreachable {
				t.Errorf("errors.Is(%v, ErrUnreachable) = %v, want %v", err, got, c.unreachable)
			}
			if !c.unreachable && !errors.Is(err, syscall.ENOTDIR) {
				t.Errorf("%v: want the disk's error (not a directory)", err)
			}
		})
	}
}

// TestUpToDateCacheNotRewritten: online, a cache that already holds the snapshot and its ref
// is read, not written (refs/main keeps its inode): a read-only shared cache works.
func TestUpToDateCacheNotRewritten(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	cache, snap := cachedTiny(t, hub)
	ref := filepath.Join(cache, tinyRepoDir, "refs", "main")
	before, err := os.Stat(ref)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := Resolve(context.Background(), "Test/tiny-qwen3", hub.opts(cache)); err != nil || d != snap {
		t.Fatalf("%s, %v", d, err)
	}
	after, err := os.Stat(ref)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Errorf("refs/main was rewritten though it held the commit")
	}
	// A ref that is wrong is put right.
	if err := os.WriteFile(ref, []byte(strings.Repeat("f", 40)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(context.Background(), "Test/tiny-qwen3", hub.opts(cache)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(ref); string(b) != testCommit {
		t.Errorf("refs/main = %q, want %s", b, testCommit)
	}
}

// failingHub answers the revision API with status (and Retry-After, if set) the first fail
// times, then as hub does; it counts the API requests.
func failingHub(t *testing.T, hub *fakeHub, status int, retryAfter string, fail int32) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			if calls.Add(1) <= fail {
				if retryAfter != "" {
					w.Header().Set("Retry-After", retryAfter)
				}
				http.Error(w, "busy", status)
				return
			}
		}
		hub.serve(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// TestServerErrors: with the revision cached, HTTP 500, 502, 503 and 429 fall back to the
// cached snapshot with a warning, as a refused connection does; without it they are errors
// that match ErrUnreachable. A 429 or 503 with a short Retry-After is asked again after it; a
// Retry-After past MaxRetryWait is not waited for.
func TestServerErrors(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	cache, snap := cachedTiny(t, hub)
	past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
	cases := []struct {
		name       string
		status     int
		retryAfter string
		fail       int32
		wantCalls  int32
		wantCached bool // served from the cache with a warning; else from the Hub after asking again
	}{
		{"500", http.StatusInternalServerError, "", 100, 1, true},
		{"502", http.StatusBadGateway, "", 100, 1, true},
		{"503", http.StatusServiceUnavailable, "", 100, 1, true},
		{"429, long Retry-After", http.StatusTooManyRequests, "3600", 100, 1, true},
		{"503, Retry-After 0", http.StatusServiceUnavailable, "0", 1, 2, false},
		{"429, Retry-After a date past", http.StatusTooManyRequests, past, 2, 3, false},
		{"503 for ever, Retry-After 0", http.StatusServiceUnavailable, "0", 100, maxRetries + 1, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, calls := failingHub(t, hub, c.status, c.retryAfter, c.fail)
			var progress bytes.Buffer
			opts := Options{Endpoint: srv.URL, CacheDir: cache, Progress: &progress}
			begin := time.Now()
			dir, err := Resolve(context.Background(), "Test/tiny-qwen3", opts)
			if took := time.Since(begin); took > 5*time.Second {
				t.Errorf("took %v", took)
			}
			if err != nil || dir != snap {
				t.Fatalf("got %s, %v; want %s", dir, err, snap)
			}
			if got := calls.Load(); got != c.wantCalls {
				t.Errorf("%d API requests, want %d", got, c.wantCalls)
			}
			if warned := strings.Contains(progress.String(), "using the cached snapshot"); warned != c.wantCached {
				t.Errorf("progress %q: cache fallback %v, want %v", progress.String(), warned, c.wantCached)
			}
			// Not cached: an error that says so and matches ErrUnreachable.
			if c.wantCached {
				_, err := Resolve(context.Background(), "Test/tiny-qwen3", Options{Endpoint: srv.URL, CacheDir: t.TempDir()})
				if err == nil || !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "HTTP") {
					t.Errorf("not cached: %v; want an HTTP error matching ErrUnreachable", err)
				}
			}
		})
	}
}

// TestTimeoutFromEnvironment: HF_HUB_ETAG_TIMEOUT sets the metadata deadline,
// HF_HUB_DOWNLOAD_TIMEOUT the download timeout (both seconds, as huggingface_hub reads them),
// OCTLM_HUB_TIMEOUT the download deadline and, unless HF_HUB_ETAG_TIMEOUT is set, the metadata
// deadline; a bad value is an error naming its variable.
func TestTimeoutFromEnvironment(t *testing.T) {
	type env map[string]string
	const s = time.Second
	for _, c := range []struct {
		env                      env
		metadata, stall, request time.Duration // all 0: an error naming the one variable of env
	}{
		{env{}, DefaultMetadataTimeout, DefaultStallTimeout, DefaultRequestTimeout},
		{env{EnvTimeout: "90s"}, 90 * s, DefaultStallTimeout, 90 * s},
		{env{EnvTimeout: "5m"}, 5 * time.Minute, DefaultStallTimeout, 5 * time.Minute},
		{env{EnvTimeout: "2.5"}, 2500 * time.Millisecond, DefaultStallTimeout, 2500 * time.Millisecond},
		{env{EnvMetadataTimeout: "3"}, 3 * s, DefaultStallTimeout, DefaultRequestTimeout},
		{env{EnvMetadataTimeout: "0.25", EnvTimeout: "90s"}, 250 * time.Millisecond, DefaultStallTimeout, 90 * s},
		{env{EnvDownloadTimeout: "120"}, DefaultMetadataTimeout, 120 * s, DefaultRequestTimeout},
		{env{EnvDownloadTimeout: " 7 ", EnvMetadataTimeout: "4", EnvTimeout: "1m30s"}, 4 * s, 7 * s, 90 * s},
		{env{EnvTimeout: "soon"}, 0, 0, 0},
		{env{EnvTimeout: "-1s"}, 0, 0, 0},
		{env{EnvTimeout: "0"}, 0, 0, 0},
		{env{EnvMetadataTimeout: "10s"}, 0, 0, 0}, // seconds only, as in Python
		{env{EnvMetadataTimeout: "0"}, 0, 0, 0},
		{env{EnvMetadataTimeout: "NaN"}, 0, 0, 0},
		{env{EnvMetadataTimeout: "1e300"}, 0, 0, 0},
		{env{EnvDownloadTimeout: "-5"}, 0, 0, 0},
		{env{EnvDownloadTimeout: "Inf"}, 0, 0, 0},
		{env{EnvDownloadTimeout: "1e-12"}, 0, 0, 0},
	} {
		clearHubEnv(t)
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		o, err := Options{}.withDefaults()
		if c.metadata == 0 {
			for k := range c.env {
				if err == nil || !strings.Contains(err.Error(), k) {
					t.Errorf("%v: %v, want an error naming %s", c.env, err, k)
				}
			}
			continue
		}
		if err != nil || o.MetadataTimeout != c.metadata || o.StallTimeout != c.stall || o.RequestTimeout != c.request {
			t.Errorf("%v: metadata %v, stall %v, request %v, %v; want %v, %v, %v", c.env, o.MetadataTimeout, o.StallTimeout, o.RequestTimeout, err, c.metadata, c.stall, c.request)
		}
	}
	// Options given beat the environment; a RequestTimeout given is also the metadata deadline.
	clearHubEnv(t)
	t.Setenv(EnvMetadataTimeout, "3")
	t.Setenv(EnvDownloadTimeout, "4")
	o, err := Options{MetadataTimeout: s, StallTimeout: 2 * s}.withDefaults()
	if err != nil || o.MetadataTimeout != s || o.StallTimeout != 2*s {
		t.Errorf("options given: metadata %v, stall %v, %v; want 1s, 2s", o.MetadataTimeout, o.StallTimeout, err)
	}
	clearHubEnv(t)
	if o, err := (Options{RequestTimeout: 5 * s}).withDefaults(); err != nil || o.MetadataTimeout != 5*s {
		t.Errorf("RequestTimeout given: metadata %v, %v; want 5s", o.MetadataTimeout, err)
	}
}

// TestCachedBlobChecked: a blob of the right size and the wrong content, found when its snapshot
// link is made again, is replaced by the Hub's, not linked.
func TestCachedBlobChecked(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	cache, snap := cachedTiny(t, hub)
	for _, name := range []string{"config.json", "model.safetensors"} {
		blob := filepath.Join(cache, tinyRepoDir, "blobs", etagOf(name, hub.files[name]))
		bad := bytes.Clone(hub.files[name])
		bad[len(bad)/2] ^= 1
		if err := os.WriteFile(blob, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(snap, name))
	}
	var progress bytes.Buffer
	opts := hub.opts(cache)
	opts.Progress = &progress
	if _, err := Resolve(context.Background(), "Test/tiny-qwen3", opts); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"config.json", "model.safetensors"} {
		if got, _ := os.ReadFile(filepath.Join(snap, name)); !bytes.Equal(got, hub.files[name]) {
			t.Errorf("%s: the corrupt cached blob was linked", name)
		}
	}
	if !strings.Contains(progress.String(), "digest") {
		t.Errorf("no warning about the corrupt blobs: %q", progress.String())
	}
}

// TestAnnouncedSizeChecked: a size the disk cannot hold, or a config.json of a gigabyte, is
// refused from the HEAD answer, before any download starts or a partial file is made.
func TestAnnouncedSizeChecked(t *testing.T) {
	clearHubEnv(t)
	for _, c := range []struct {
		name string
		size int64
		want string
	}{
		{"model.safetensors", 1 << 50, "free"},
		{"config.json", 1 << 30, "allowed"},
		{"model.safetensors.index.json", 1 << 30, "allowed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hub := tinyHub(t)
			hub.files[c.name] = []byte("{}")
			hub.sizes = map[string]int64{c.name: c.size}
			cache := t.TempDir()
			opts := hub.opts(cache)
			opts.Files = []string{c.name}
			_, err := Resolve(context.Background(), "Test/tiny-qwen3", opts)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.name) {
				t.Fatalf("%v; want %s refused (%q)", err, c.name, c.want)
			}
			if hub.gets != 0 {
				t.Errorf("%d downloads started", hub.gets)
			}
			blobs, _ := os.ReadDir(filepath.Join(cache, tinyRepoDir, "blobs"))
			for _, b := range blobs {
				t.Errorf("left in blobs: %s", b.Name())
			}
		})
	}
}

// TestNewCommitUnreachable: the Hub names a commit the cache lacks, then fails while its files
// are fetched: the snapshot the cache holds for the revision stands in, with a warning.
func TestNewCommitUnreachable(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	cache, snap := cachedTiny(t, hub)
	older := strings.Repeat("a", 40)
	oldSnap := filepath.Join(filepath.Dir(snap), older)
	if err := os.Rename(snap, oldSnap); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cache, tinyRepoDir, "refs", "main"), []byte(older), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/") {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		hub.serve(w, r)
	}))
	t.Cleanup(srv.Close)
	var progress bytes.Buffer
	dir, err := Resolve(context.Background(), "Test/tiny-qwen3", Options{Endpoint: srv.URL, CacheDir: cache, Progress: &progress})
	if err != nil || dir != oldSnap || !strings.Contains(progress.String(), "using the cached snapshot") {
		t.Errorf("got %s, %v (progress %q); want the cached %s with a warning", dir, err, progress.String(), oldSnap)
	}
	// The Hub failing while the cached snapshot itself is being completed: an error, not a
	// snapshot lacking files.
	if err := os.Rename(oldSnap, snap); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cache, tinyRepoDir, "refs", "main"), []byte(testCommit), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(snap, "config.json"))
	if _, err := Resolve(context.Background(), "Test/tiny-qwen3", Options{Endpoint: srv.URL, CacheDir: cache}); err == nil || !errors.Is(err, ErrUnreachable) {
		t.Errorf("incomplete snapshot: %v, want an error matching ErrUnreachable", err)
	}
}

// TestBadEndpoint: an HF_ENDPOINT that is no http(s) address is a usage error naming it, not a
// Hub that cannot be reached.
func TestBadEndpoint(t *testing.T) {
	clearHubEnv(t)
	for _, e := range []string{"huggingface.co", "ftp://example.org", "http://", "://x", "http://h/?q=1"} {
		_, err := Resolve(context.Background(), "Test/tiny-qwen3", Options{Endpoint: e, CacheDir: t.TempDir()})
		if err == nil || errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "HF_ENDPOINT") {
			t.Errorf("endpoint %q: %v; want a usage error naming HF_ENDPOINT", e, err)
		}
	}
}

// TestCancelledIsNotUnreachable: a cancelled Resolve (an interrupt) returns the cancellation,
// without falling back to the cache as if the Hub had failed.
func TestCancelledIsNotUnreachable(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	cache, _ := cachedTiny(t, hub)
	ctx, cancel := context.WithCancel(context.Background())
	arrived := make(chan struct{})
	var once atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if once.CompareAndSwap(false, true) {
			close(arrived)
		}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	go func() { <-arrived; cancel() }()
	var progress bytes.Buffer
	dir, err := Resolve(ctx, "Test/tiny-qwen3", Options{Endpoint: srv.URL, CacheDir: cache, Progress: &progress})
	if err == nil || errors.Is(err, ErrUnreachable) || !errors.Is(err, context.Canceled) {
		t.Errorf("got %q, %v (progress %q); want the cancellation", dir, err, progress.String())
	}
}

// TestTrickledDownload: a download trickled a byte at a time is cut off once RequestTimeout has
// passed and its average rate is below MinDownloadRate, long before the deadline its size
// allows; the bytes received stay for the next run to resume.
func TestTrickledDownload(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, "/cdn/") {
			hub.serve(w, r)
			return
		}
		b := hub.files["model.safetensors"]
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.WriteHeader(http.StatusOK)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := range b {
			w.Write(b[i : i+1])
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
		}
	}))
	t.Cleanup(srv.Close)
	hub.cdnURL = srv.URL
	cache := t.TempDir()
	opts := Options{Endpoint: srv.URL, CacheDir: cache, Files: []string{"model.safetensors"},
		StallTimeout: 10 * time.Second, RequestTimeout: 200 * time.Millisecond, MinDownloadRate: 1 << 10}
	begin := time.Now()
	_, err := resolveBounded(t, "Test/tiny-qwen3", opts)
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
	if err == nil || !strings.Contains(err.Error(), "slower than") || !errors.Is(err, ErrUnreachable) {
		t.Fatalf("%v; want the download cut off as too slow", err)
	}
	part := filepath.Join(cache, tinyRepoDir, "blobs", etagOf("model.safetensors", hub.files["model.safetensors"])+".incomplete")
	if st, err := os.Stat(part); err != nil || st.Size() == 0 {
		t.Errorf("partial file %v, %v: want the bytes received kept", st, err)
	}
}
