package hub

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octlm/octlm/loader"
)

const testCommit = "0123456789abcdef0123456789abcdef01234567"

// fakeHub serves a folder the way huggingface.co does: the revision API, resolve URLs with
// X-Repo-Commit and ETag headers, LFS files (*.safetensors) as redirects to a CDN path carrying
// X-Linked-Etag / X-Linked-Size, and Range requests on the CDN.
type fakeHub struct {
	t       *testing.T
	repo    string
	files   map[string][]byte
	token   string // required bearer token, if set
	srv     *httptest.Server
	mu      sync.Mutex
	ranges  []string         // Range headers seen on downloads
	gets    int              // download GETs
	cutAt   int              // if > 0, the next download is cut after this many bytes
	corrupt bool             // serve LFS content with one byte flipped
	cdnURL  string           // where LFS files are redirected to; default the hub's own /cdn/
	sizes   map[string]int64 // sizes announced on HEAD instead of the true ones
	apiGets int              // revision API requests
}

func newFakeHub(t *testing.T, repo, dir string, names ...string) *fakeHub {
	h := &fakeHub{t: t, repo: repo, files: map[string][]byte{}}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		h.files[n] = b
	}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func isLFS(name string) bool { return strings.HasSuffix(name, ".safetensors") }

func etagOf(name string, b []byte) string {
	if isLFS(name) {
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func (h *fakeHub) serve(w http.ResponseWriter, r *http.Request) {
	if h.token != "" && r.Header.Get("Authorization") != "Bearer "+h.token && !strings.HasPrefix(r.URL.Path, "/cdn/") {
		w.Header().Set("X-Error-Message", "Access to model "+h.repo+" is restricted.")
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	api := "/api/models/" + h.repo + "/revision/"
	resolve := "/" + h.repo + "/resolve/"
	switch {
	case strings.HasPrefix(r.URL.Path, api):
		h.mu.Lock()
		h.apiGets++
		h.mu.Unlock()
		rev := strings.TrimPrefix(r.URL.Path, api)
		if rev != "main" && rev != testCommit {
			http.Error(w, "Revision Not Found", http.StatusNotFound)
			return
		}
		var sib []map[string]string
		for n := range h.files {
			sib = append(sib, map[string]string{"rfilename": n})
		}
		json.NewEncoder(w).Encode(map[string]any{"id": h.repo, "sha": testCommit, "siblings": sib, "private": false})
	case strings.HasPrefix(r.URL.Path, resolve):
		rev, name, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, resolve), "/")
		b, ok := h.files[name]
		if !ok || (rev != "main" && rev != testCommit) {
			http.Error(w, "Entry not found", http.StatusNotFound)
			return
		}
		etag := etagOf(name, b)
		w.Header().Set("X-Repo-Commit", testCommit)
		size, announced := h.sizes[name]
		if !announced {
			size = int64(len(b))
		}
		if isLFS(name) {
			w.Header().Set("X-Linked-Etag", `"`+etag+`"`)
			w.Header().Set("X-Linked-Size", fmt.Sprint(size))
			w.Header().Set("ETag", `"`+etagOf("x.json", b)+`"`) // the git pointer's etag; must be ignored
			cdn := h.cdnURL
			if cdn == "" {
				cdn = h.srv.URL
			}
			http.Redirect(w, r, cdn+"/cdn/"+etag+"?name="+url.QueryEscape(name), http.StatusFound)
			return
		}
		w.Header().Set("ETag", `"`+etag+`"`)
		if announced && r.Method == http.MethodHead {
			w.Header().Set("Content-Length", fmt.Sprint(size))
			w.WriteHeader(http.StatusOK)
			return
		}
		h.send(w, r, name, b)
	case strings.HasPrefix(r.URL.Path, "/cdn/"):
		name := r.URL.Query().Get("name")
		b := h.files[name]
		if h.corrupt {
			b = bytes.Clone(b)
			b[len(b)/2] ^= 1
		}
		h.send(w, r, name, b)
	default:
		http.NotFound(w, r)
	}
}

func (h *fakeHub) send(w http.ResponseWriter, r *http.Request, name string, b []byte) {
	if r.Method == http.MethodGet {
		h.mu.Lock()
		h.gets++
		h.ranges = append(h.ranges, r.Header.Get("Range"))
		cut := h.cutAt
		h.cutAt = 0
		h.mu.Unlock()
		if cut > 0 {
			w.Header().Set("Content-Length", fmt.Sprint(len(b)))
			w.WriteHeader(http.StatusOK)
			w.Write(b[:cut])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the connection drops mid-file
		}
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}

func (h *fakeHub) opts(cache string) Options {
	return Options{Endpoint: h.srv.URL, CacheDir: cache, Token: h.token}
}

// clearHubEnv keeps the developer's environment out of the tests.
func clearHubEnv(t *testing.T) {
	for _, k := range []string{"HF_HUB_OFFLINE", "HF_TOKEN", "HF_ENDPOINT", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN_PATH",
		EnvMetadataTimeout, EnvDownloadTimeout, EnvTimeout} {
		t.Setenv(k, "")
	}
	t.Setenv("HF_HOME", t.TempDir())
}

// fixture is the path of a folder under the repository's testdata.
func fixture(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join("..", "testdata", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return p
}

func tinyHub(t *testing.T) *fakeHub {
	return newFakeHub(t, "Test/tiny-qwen3", fixture(t, "tiny-qwen3"), "config.json", "model.safetensors", "cases.json")
}

func TestResolveDownloads(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	cache := t.TempDir()
	var progress bytes.Buffer
	opts := hub.opts(cache)
	opts.Progress = &progress
	dir, err := Resolve(context.Background(), "Test/tiny-qwen3", opts)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(cache, "models--Test--tiny-qwen3", "snapshots", testCommit)
	if dir != want {
		t.Fatalf("snapshot %s, want %s", dir, want)
	}
	for name, b := range hub.files {
		p := filepath.Join(dir, name)
		if name == "cases.json" { // not a checkpoint file: not fetched
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s was downloaded", name)
			}
			continue
		}
		target, err := os.Readlink(p)
		if err != nil || target != filepath.Join("..", "..", "blobs", etagOf(name, b)) {
			t.Errorf("%s: link %q (%v), want ../../blobs/<etag>", name, target, err)
		}
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s: content differs (%v)", name, err)
		}
	}
	ref, err := os.ReadFile(filepath.Join(cache, "models--Test--tiny-qwen3", "refs", "main"))
	if err != nil || string(ref) != testCommit {
		t.Errorf("refs/main = %q (%v)", ref, err)
	}
	if !strings.Contains(progress.String(), "model.safetensors") {
		t.Errorf("no progress for model.safetensors in %q", progress.String())
	}
	c, err := loader.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if hub.gets != 2 {
		t.Errorf("%d downloads, want 2", hub.gets)
	}

	// Everything cached: no download, same folder, also by commit.
	for _, ref := range []string{"Test/tiny-qwen3", "Test/tiny-qwen3@main", "Test/tiny-qwen3@" + testCommit} {
		if d, err := Resolve(context.Background(), ref, hub.opts(cache)); err != nil || d != want {
			t.Errorf("Resolve(%s) = %s, %v", ref, d, err)
		}
	}
	if hub.gets != 2 {
		t.Errorf("cached files downloaded again (%d GETs)", hub.gets)
	}

	// Offline, by option and by environment, with the server gone.
	hub.srv.Close()
	if d, err := Resolve(context.Background(), "Test/tiny-qwen3", Options{CacheDir: cache, Offline: true}); err != nil || d != want {
		t.Errorf("offline: %s, %v", d, err)
	}
	t.Setenv("HF_HUB_OFFLINE", "1")
	t.Setenv("HF_HUB_CACHE", cache)
	if d, err := Resolve(context.Background(), "Test/tiny-qwen3", Options{}); err != nil || d != want {
		t.Errorf("HF_HUB_OFFLINE=1: %s, %v", d, err)
	}
	if _, err := Resolve(context.Background(), "Test/other", Options{}); err == nil || !strings.Contains(err.Error(), "offline") {
		t.Errorf("offline miss: %v", err)
	}
	t.Setenv("HF_HUB_OFFLINE", "")
	// Online but unreachable: the cached snapshot, with a warning.
	progress.Reset()
	opts.Progress = &progress
	if d, err := Resolve(context.Background(), "Test/tiny-qwen3", opts); err != nil || d != want || !strings.Contains(progress.String(), "warning") {
		t.Errorf("unreachable Hub: %s, %v, progress %q", d, err, progress.String())
	}
	if _, err := Resolve(context.Background(), "Test/other", opts); err == nil {
		t.Errorf("unreachable Hub and empty cache: no error")
	}
}

func TestResolveResumes(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	cache := t.TempDir()
	hub.cutAt = 100_000
	// Only the model, so the first download is the one that gets cut.
	opts := hub.opts(cache)
	opts.Files = []string{"model.safetensors"}
	if _, err := Resolve(context.Background(), "Test/tiny-qwen3", opts); err == nil || !strings.Contains(err.Error(), "resume") {
		t.Fatalf("cut download: %v", err)
	}
	etag := etagOf("model.safetensors", hub.files["model.safetensors"])
	part := filepath.Join(cache, "models--Test--tiny-qwen3", "blobs", etag+".incomplete")
	st, err := os.Stat(part)
	if err != nil || st.Size() == 0 || st.Size() > 100_000 {
		t.Fatalf("partial file: %v %v", st, err)
	}
	dir, err := Resolve(context.Background(), "Test/tiny-qwen3", opts)
	if err != nil {
		t.Fatal(err)
	}
	if last := hub.ranges[len(hub.ranges)-1]; last != fmt.Sprintf("bytes=%d-", st.Size()) {
		t.Errorf("resume sent Range %q, want bytes=%d-", last, st.Size())
	}
	got, _ := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	if !bytes.Equal(got, hub.files["model.safetensors"]) {
		t.Errorf("resumed file differs")
	}
	if _, err := os.Stat(part); err == nil {
		t.Errorf("partial file left behind")
	}
}

func TestResolveRejectsCorruptDownload(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	hub.corrupt = true
	cache := t.TempDir()
	_, err := Resolve(context.Background(), "Test/tiny-qwen3", hub.opts(cache))
	if err == nil || !strings.Contains(err.Error(), "digest") || !strings.Contains(err.Error(), "model.safetensors") {
		t.Fatalf("corrupt download: %v", err)
	}
	blobs, _ := os.ReadDir(filepath.Join(cache, "models--Test--tiny-qwen3", "blobs"))
	for _, b := range blobs {
		if strings.HasPrefix(b.Name(), etagOf("model.safetensors", hub.files["model.safetensors"])) {
			t.Errorf("corrupt blob kept: %s", b.Name())
		}
	}
}

func TestResolveToken(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	hub.token = "hf_secret"
	opts := hub.opts(t.TempDir())
	opts.Token = ""
	if _, err := Resolve(context.Background(), "Test/tiny-qwen3", opts); err == nil || !strings.Contains(err.Error(), "HF_TOKEN") {
		t.Fatalf("no token: %v", err)
	}
	t.Setenv("HF_TOKEN", "hf_secret")
	if _, err := Resolve(context.Background(), "Test/tiny-qwen3", opts); err != nil {
		t.Fatalf("HF_TOKEN: %v", err)
	}
	// The token file written by `huggingface-cli login`.
	t.Setenv("HF_TOKEN", "")
	home := t.TempDir()
	t.Setenv("HF_HOME", home)
	if err := os.WriteFile(filepath.Join(home, "token"), []byte("hf_secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts.CacheDir = t.TempDir()
	if _, err := Resolve(context.Background(), "Test/tiny-qwen3", opts); err != nil {
		t.Fatalf("token file: %v", err)
	}
}

func TestResolveErrors(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	opts := hub.opts(t.TempDir())
	for _, ref := range []string{"Test/missing", "Test/tiny-qwen3@nobranch", "./no/such/folder", "not a repo", "a/b/c", "Org/../x"} {
		if d, err := Resolve(context.Background(), ref, opts); err == nil {
			t.Errorf("Resolve(%q) = %s, want an error", ref, d)
		}
	}
	local := fixture(t, "tiny-qwen3")
	if d, err := Resolve(context.Background(), local, opts); err != nil || d != local {
		t.Errorf("local folder: %s %v", d, err)
	}
	if _, err := Resolve(context.Background(), filepath.Join(local, "config.json"), opts); err == nil {
		t.Errorf("a file was accepted as a checkpoint folder")
	}
}

func TestParseRepoRef(t *testing.T) {
	tests := []struct{ in, repo, rev string }{
		{"Qwen/Qwen3-0.6B", "Qwen/Qwen3-0.6B", "main"},
		{"Qwen/Qwen3-0.6B@" + testCommit, "Qwen/Qwen3-0.6B", testCommit},
		{"Org/name_x.y@v1.0", "Org/name_x.y", "v1.0"},
		{"Org/Name@refs/pr/1", "Org/Name", "refs/pr/1"},
		{"Qwen3-0.6B", "", ""},
		{"Org/../x", "", ""},
		{"Org/a--b", "", ""},
		{"Org/Name@", "", ""},
		{"Org/Name@../x", "", ""},
		{"/abs/path", "", ""},
		{"Org/Name/extra", "", ""},
	}
	for _, tc := range tests {
		repo, rev, err := ParseRepoRef(tc.in)
		if tc.repo == "" {
			if err == nil {
				t.Errorf("ParseRepoRef(%q) accepted: %s %s", tc.in, repo, rev)
			}
			continue
		}
		if err != nil || repo != tc.repo || rev != tc.rev {
			t.Errorf("ParseRepoRef(%q) = %q %q %v", tc.in, repo, rev, err)
		}
	}
}

func TestCacheDir(t *testing.T) {
	clearHubEnv(t)
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	t.Setenv("HF_HOME", "")
	if got := CacheDir(); got != filepath.Join("/xdg", "huggingface", "hub") {
		t.Errorf("XDG: %s", got)
	}
	t.Setenv("HF_HOME", "/hfhome")
	if got := CacheDir(); got != filepath.Join("/hfhome", "hub") {
		t.Errorf("HF_HOME: %s", got)
	}
	t.Setenv("HF_HUB_CACHE", "/hubcache")
	if got := CacheDir(); got != "/hubcache" {
		t.Errorf("HF_HUB_CACHE: %s", got)
	}
}

// TestSnapshotRepoReadsTheCacheLayout: loader.SnapshotRepo (which picks the shipped manifest of
// a cached snapshot) reads back the repository and commit of the layout this package writes.
func TestSnapshotRepoReadsTheCacheLayout(t *testing.T) {
	for _, repo := range []string{"Qwen/Qwen3-0.6B", "Org/a.b-c_d"} {
		snap := filepath.Join(RepoCacheDir("/cache", repo), "snapshots", testCommit)
		if gotRepo, gotCommit := loader.SnapshotRepo(snap); gotRepo != repo || gotCommit != testCommit {
			t.Errorf("SnapshotRepo(%s) = %q, %q; want %q, %q", snap, gotRepo, gotCommit, repo, testCommit)
		}
	}
}
