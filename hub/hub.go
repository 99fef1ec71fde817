package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/octlm/octlm/internal/fileio"
	"github.com/octlm/octlm/internal/progress"
	"github.com/octlm/octlm/loader"
)

// DefaultFiles are the file patterns (path.Match against the repository path) Resolve
// downloads: what a checkpoint needs, not the README or the duplicate vocab.json/merges.txt.
var DefaultFiles = []string{
	"config.json", "generation_config.json", "*.safetensors", loader.IndexFileName,
	"tokenizer.json", "tokenizer_config.json",
}

// Options configures Resolve. Zero values take the environment's settings, like Python's
// huggingface_hub: HF_ENDPOINT, HF_HUB_CACHE / HF_HOME, HF_TOKEN (or the token file written by
// `huggingface-cli login`) and HF_HUB_OFFLINE.
type Options struct {
	Endpoint string       // default $HF_ENDPOINT, else https://huggingface.co
	CacheDir string       // default CacheDir()
	Token    string       // default $HF_TOKEN, else the token file
	Offline  bool         // never touch the network; also set by HF_HUB_OFFLINE=1
	Files    []string     // patterns of files to fetch; default DefaultFiles
	Progress io.Writer    // download and hashing progress; nil for silence
	Client   *http.Client // default: a client with ConnectTimeout and ResponseTimeout

	// ConnectTimeout bounds connecting to the Hub (TCP and TLS); default 10 s.
	ConnectTimeout time.Duration
	// ResponseTimeout bounds the wait for a response's headers once the request is sent;
	// default 30 s. A Hub that accepts connections but never answers is then treated like an
	// unreachable one (the cached snapshot is used when there is one).
	ResponseTimeout time.Duration
	// StallTimeout bounds a wait for the next bytes of a response body; default 60 s.
	StallTimeout time.Duration
}

// Default Hub client timeouts (see Options).
const (
	DefaultConnectTimeout  = 10 * time.Second
	DefaultResponseTimeout = 30 * time.Second
	DefaultStallTimeout    = 60 * time.Second
)

// CacheDir is the Hugging Face cache folder shared with Python: $HF_HUB_CACHE, else
// $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub.
func CacheDir() string {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("HUGGINGFACE_HUB_CACHE"); d != "" {
		return d
	}
	return filepath.Join(hfHome(), "hub")
}

func hfHome() string {
	if d := os.Getenv("HF_HOME"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "."
	}
	return filepath.Join(home, ".cache", "huggingface")
}

func envTrue(name string) bool {
	switch strings.ToUpper(os.Getenv(name)) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}

func (o Options) withDefaults() Options {
	if o.Endpoint == "" {
		o.Endpoint = os.Getenv("HF_ENDPOINT")
	}
	if o.Endpoint == "" {
		o.Endpoint = "https://huggingface.co"
	}
	o.Endpoint = strings.TrimRight(o.Endpoint, "/")
	if o.CacheDir == "" {
		o.CacheDir = CacheDir()
	}
	if o.Token == "" {
		o.Token = os.Getenv("HF_TOKEN")
	}
	if o.Token == "" {
		p := os.Getenv("HF_TOKEN_PATH")
		if p == "" {
			p = filepath.Join(hfHome(), "token")
		}
		if b, err := fileio.ReadFile(p, 64<<10); err == nil {
			o.Token = strings.TrimSpace(string(b))
		}
	}
	if envTrue("HF_HUB_OFFLINE") {
		o.Offline = true
	}
	if o.Files == nil {
		o.Files = DefaultFiles
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.ResponseTimeout <= 0 {
		o.ResponseTimeout = DefaultResponseTimeout
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	if o.Client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = (&net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
		t.TLSHandshakeTimeout = o.ConnectTimeout
		t.ResponseHeaderTimeout = o.ResponseTimeout
		o.Client = &http.Client{Transport: t}
	}
	return o
}

var (
	repoIDPattern   = regexp.MustCompile(`^[A-Za-z0-9][\w.-]*/[\w.-]+$`)
	revisionPattern = regexp.MustCompile(`^[\w.-]+(/[\w.-]+)*$`)
	commitPattern   = regexp.MustCompile(`^[0-9a-f]{40}$`)
	etagPattern     = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`) // git SHA-1 or LFS SHA-256
)

// ParseRepoRef splits "Org/Name[@revision]" (revision defaults to "main") and validates both
// parts the way the Hub does: no "..", no "--" at the edges, at most 96 characters.
func ParseRepoRef(s string) (repo, revision string, err error) {
	repo, revision, found := strings.Cut(s, "@")
	if !found {
		revision = "main"
	}
	if !repoIDPattern.MatchString(repo) || len(repo) > 96 || strings.Contains(repo, "..") || strings.Contains(repo, "--") ||
		strings.HasSuffix(repo, ".") || strings.HasSuffix(repo, "-") {
		return "", "", fmt.Errorf("hub: %q is not a Hub repository id (want Org/Name[@revision])", s)
	}
	if !revisionPattern.MatchString(revision) || strings.Contains(revision, "..") {
		return "", "", fmt.Errorf("hub: %q: invalid revision %q", s, revision)
	}
	return repo, revision, nil
}

// RepoCacheDir is the cache folder of a model repository: models--Org--Name.
func RepoCacheDir(cacheDir, repo string) string {
	return filepath.Join(cacheDir, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

// Resolve turns a local folder or a Hub reference into a checkpoint folder. An existing folder
// is returned as is. "Org/Name[@revision]" is resolved in the Hugging Face cache
// (models--Org--Name/snapshots/<commit>/, shared with Python): with Offline (or HF_HUB_OFFLINE=1)
// only the cache is consulted; otherwise the revision is looked up on the Hub, and missing
// files are downloaded into blobs/ (resuming <etag>.incomplete partial files), checked against
// their ETag (SHA-256 for LFS files, git blob SHA-1 for the others) and linked into the
// snapshot. If the Hub cannot be reached but the cache holds the revision, the cached snapshot
// is used and a warning is written to Progress. A name that is no folder but reads as a local
// path (it starts with ".", "/" or "~", or the folder it would sit in exists) is refused as a
// missing folder without asking the Hub; a leading "~/" is the home folder.
func Resolve(ctx context.Context, nameOrDir string, opts Options) (string, error) {
	nameOrDir = expandHome(nameOrDir)
	st, err := os.Stat(nameOrDir)
	switch {
	case err == nil && !st.IsDir():
		return "", fmt.Errorf("hub: %s: not a folder", nameOrDir)
	case err == nil:
		return nameOrDir, nil
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
		// A symlink loop or a folder that cannot be read: say so, with the path.
		return "", fmt.Errorf("hub: %w", err)
	}
	if looksLocal(nameOrDir) {
		return "", fmt.Errorf("hub: %s: no such folder (a local path, so the Hub was not asked; a Hub name is Org/Name)", nameOrDir)
	}
	repo, rev, err := ParseRepoRef(nameOrDir)
	if err != nil {
		if strings.ContainsAny(nameOrDir, `/\`) && !strings.Contains(nameOrDir, "@") {
			return "", fmt.Errorf("hub: %s: no such folder, and %w", nameOrDir, err)
		}
		return "", err
	}
	opts = opts.withDefaults()
	repoDir := RepoCacheDir(opts.CacheDir, repo)
	if opts.Offline {
		dir, err := cachedSnapshot(repoDir, rev)
		if err != nil {
			return "", fmt.Errorf("hub: %s@%s is not in the cache %s and offline mode is on (HF_HUB_OFFLINE): %w", repo, rev, opts.CacheDir, err)
		}
		return dir, nil
	}
	h := &repoClient{opts: opts, repo: repo, repoDir: repoDir}
	commit, files, err := h.revisionInfo(ctx, rev)
	if err != nil {
		var netErr *netError
		if errors.As(err, &netErr) {
			if dir, cerr := cachedSnapshot(repoDir, rev); cerr == nil {
				if opts.Progress != nil {
					fmt.Fprintf(opts.Progress, "warning: %v; using the cached snapshot %s\n", err, dir)
				}
				return dir, nil
			}
		}
		return "", err
	}
	snap := filepath.Join(repoDir, "snapshots", commit)
	for _, name := range files {
		if err := h.ensureFile(ctx, commit, name, snap); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(snap, 0o755); err != nil {
		return "", fmt.Errorf("hub: %w", err)
	}
	if rev != commit {
		ref := filepath.Join(repoDir, "refs", filepath.FromSlash(rev))
		if err := os.MkdirAll(filepath.Dir(ref), 0o755); err != nil {
			return "", fmt.Errorf("hub: %w", err)
		}
		if err := fileio.WriteFile(ref, []byte(commit)); err != nil {
			return "", fmt.Errorf("hub: %w", err)
		}
	}
	return snap, nil
}

// cachedSnapshot finds the snapshot of rev (a commit, or a ref recorded in refs/).
func cachedSnapshot(repoDir, rev string) (string, error) {
	commit := rev
	if !commitPattern.MatchString(rev) {
		b, err := fileio.ReadFile(filepath.Join(repoDir, "refs", filepath.FromSlash(rev)), 4<<10)
		if err != nil {
			return "", err
		}
		commit = strings.TrimSpace(string(b))
		if !commitPattern.MatchString(commit) {
			return "", fmt.Errorf("refs/%s holds %.60q, not a commit", rev, commit)
		}
	}
	snap := filepath.Join(repoDir, "snapshots", commit)
	st, err := os.Stat(snap)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s: not a folder", snap)
	}
	return snap, nil
}

type repoClient struct {
	opts    Options
	repo    string
	repoDir string
}

// netError marks a failure to reach the Hub at all (as opposed to an HTTP error status).
type netError struct{ err error }

func (e *netError) Error() string { return e.err.Error() }
func (e *netError) Unwrap() error { return e.err }

func (h *repoClient) request(ctx context.Context, method, u string, hdr map[string]string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	req.Header.Set("User-Agent", "octlm-loader")
	if h.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+h.opts.Token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return req, nil
}

// send makes a request with a watchdog on top of the client's own timeouts, so that even a
// caller's Client cannot wait forever: the response headers must arrive within
// ConnectTimeout + ResponseTimeout of the start, then body bytes at least every StallTimeout.
// The returned response's Body must be closed.
func (h *repoClient) send(ctx context.Context, client *http.Client, method, u string, hdr map[string]string) (*http.Response, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &watchdog{cancel: cancel}
	headers := h.opts.ConnectTimeout + h.opts.ResponseTimeout
	w.timer = time.AfterFunc(headers, w.fire)
	req, err := h.request(ctx, method, u, hdr)
	if err != nil {
		w.stop()
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		w.stop()
		if w.fired.Load() {
			return nil, fmt.Errorf("no answer within %v: %w", headers, err)
		}
		return nil, err
	}
	w.timer.Reset(h.opts.StallTimeout)
	resp.Body = &watchedBody{ReadCloser: resp.Body, w: w, stall: h.opts.StallTimeout}
	return resp, nil
}

// watchdog cancels a request when its timer fires.
type watchdog struct {
	timer  *time.Timer
	cancel context.CancelFunc
	fired  atomic.Bool
}

func (w *watchdog) fire() { w.fired.Store(true); w.cancel() }

func (w *watchdog) stop() { w.timer.Stop(); w.cancel() }

// watchedBody restarts the watchdog whenever bytes arrive.
type watchedBody struct {
	io.ReadCloser
	w     *watchdog
	stall time.Duration
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.timer.Reset(b.stall)
	}
	if err != nil && err != io.EOF && b.w.fired.Load() {
		err = fmt.Errorf("no data for %v: %w", b.stall, err)
	}
	return n, err
}

func (b *watchedBody) Close() error {
	b.w.stop()
	return b.ReadCloser.Close()
}

func statusError(resp *http.Response, what string) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	msg := strings.TrimSpace(string(body))
	hint := ""
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		hint = " (gated or private repository: set HF_TOKEN to a token with access)"
	case http.StatusNotFound:
		hint = " (no such repository, revision or file)"
	}
	if e := resp.Header.Get("X-Error-Message"); e != "" {
		msg = e
	}
	return fmt.Errorf("hub: %s: HTTP %s%s: %.200s", what, resp.Status, hint, msg)
}

// revisionInfo asks the Hub API for the commit of rev and the files it holds, filtered by the
// patterns of the options.
func (h *repoClient) revisionInfo(ctx context.Context, rev string) (string, []string, error) {
	u := h.opts.Endpoint + "/api/models/" + h.repo + "/revision/" + url.PathEscape(rev)
	resp, err := h.send(ctx, h.opts.Client, http.MethodGet, u, nil)
	if err != nil {
		return "", nil, &netError{fmt.Errorf("hub: %s@%s: %w", h.repo, rev, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", nil, statusError(resp, h.repo+"@"+rev)
	}
	var info struct {
		SHA      string `json:"sha"`
		Siblings []struct {
			RFilename string `json:"rfilename"`
		} `json:"siblings"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&info); err != nil {
		err = fmt.Errorf("hub: %s@%s: reading the Hub's answer: %w", h.repo, rev, err)
		if resp.Body.(*watchedBody).w.fired.Load() {
			return "", nil, &netError{err} // a stalled Hub is an unreachable one
		}
		return "", nil, err
	}
	if !commitPattern.MatchString(info.SHA) {
		return "", nil, fmt.Errorf("hub: %s@%s: the Hub answered commit %.60q", h.repo, rev, info.SHA)
	}
	var files []string
	for _, s := range info.Siblings {
		if !loader.ValidManifestName(s.RFilename) {
			return "", nil, fmt.Errorf("hub: %s@%s: the Hub lists the unsafe file name %.100q", h.repo, rev, s.RFilename)
		}
		for _, p := range h.opts.Files {
			if ok, _ := path.Match(p, s.RFilename); ok {
				files = append(files, s.RFilename)
				break
			}
		}
	}
	if len(files) == 0 {
		return "", nil, fmt.Errorf("hub: %s@%s: no file matches %v", h.repo, rev, h.opts.Files)
	}
	return info.SHA, files, nil
}

// fileMeta is what a HEAD on a resolve URL tells: the blob's ETag, size and commit.
type fileMeta struct {
	etag   string
	size   int64
	commit string
}

func (h *repoClient) resolveURL(commit, name string) string {
	return h.opts.Endpoint + "/" + h.repo + "/resolve/" + commit + "/" + (&url.URL{Path: name}).EscapedPath()
}

// head fetches file metadata without following redirects to the CDN (the Hub puts the LFS
// ETag and size on the redirect itself, as X-Linked-Etag and X-Linked-Size).
func (h *repoClient) head(ctx context.Context, commit, name string) (fileMeta, error) {
	client := *h.opts.Client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	u := h.resolveURL(commit, name)
	for range 5 {
		resp, err := h.send(ctx, &client, http.MethodHead, u, map[string]string{"Accept-Encoding": "identity"})
		if err != nil {
			return fileMeta{}, fmt.Errorf("hub: %s: %s: %w", h.repo, name, err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode >= 300 && resp.StatusCode < 400 && resp.Header.Get("X-Linked-Etag") == "" && strings.HasPrefix(loc, "/") {
			u = h.opts.Endpoint + loc // relative redirect: a renamed repository
			continue
		}
		if resp.StatusCode >= 400 {
			return fileMeta{}, statusError(resp, h.repo+": "+name)
		}
		m := fileMeta{commit: resp.Header.Get("X-Repo-Commit")}
		m.etag = resp.Header.Get("X-Linked-Etag")
		if m.etag == "" {
			m.etag = resp.Header.Get("ETag")
		}
		m.etag = strings.Trim(strings.TrimPrefix(m.etag, "W/"), `"`)
		sizeText := resp.Header.Get("X-Linked-Size")
		if sizeText == "" {
			sizeText = resp.Header.Get("Content-Length")
		}
		m.size, err = strconv.ParseInt(sizeText, 10, 64)
		if err != nil || m.size < 0 {
			return fileMeta{}, fmt.Errorf("hub: %s: %s: the Hub gave no usable size (%q)", h.repo, name, sizeText)
		}
		if !etagPattern.MatchString(m.etag) {
			return fileMeta{}, fmt.Errorf("hub: %s: %s: the Hub gave no usable ETag (%.80q)", h.repo, name, m.etag)
		}
		if m.commit != commit {
			return fileMeta{}, fmt.Errorf("hub: %s: %s: the Hub answered for commit %q, asked %s", h.repo, name, m.commit, commit)
		}
		return m, nil
	}
	return fileMeta{}, fmt.Errorf("hub: %s: %s: too many redirects", h.repo, name)
}

// ensureFile makes snapshots/<commit>/<name> exist, downloading its blob when missing.
func (h *repoClient) ensureFile(ctx context.Context, commit, name, snap string) error {
	link := filepath.Join(snap, filepath.FromSlash(name))
	if _, err := os.Stat(link); err == nil {
		return nil
	}
	meta, err := h.head(ctx, commit, name)
	if err != nil {
		return err
	}
	blobs := filepath.Join(h.repoDir, "blobs")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	blob := filepath.Join(blobs, meta.etag)
	if st, err := os.Stat(blob); err != nil || st.Size() != meta.size {
		// Another process (octlm or Python's huggingface_hub, which locks the same file) may
		// be fetching this blob: take turns, then look again.
		lock := filepath.Join(h.opts.CacheDir, ".locks", filepath.Base(h.repoDir), meta.etag+".lock")
		unlock, err := lockFile(ctx, lock, func() {
			if h.opts.Progress != nil {
				fmt.Fprintf(h.opts.Progress, "waiting for another process downloading %s\n", name)
			}
		})
		if err != nil {
			return err
		}
		defer unlock()
		if st, err := os.Stat(blob); err != nil || st.Size() != meta.size {
			if err := h.download(ctx, commit, name, meta, blob); err != nil {
				return err
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	rel, err := filepath.Rel(filepath.Dir(link), blob)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	// Link under a name of this process's own, then rename over the snapshot's name: two
	// processes linking the same file both succeed, and a dangling link from an interrupted
	// run is replaced.
	tmp := fmt.Sprintf("%s.%d.%d.link", link, os.Getpid(), linkSeq.Add(1))
	if err := os.Symlink(rel, tmp); err != nil {
		return fmt.Errorf("hub: linking %s into the snapshot: %w", name, err)
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("hub: linking %s into the snapshot: %w", name, err)
	}
	return nil
}

// linkSeq tells apart the temporary link names of concurrent calls in one process.
var linkSeq atomic.Int64

// download fetches the blob into <blob>.incomplete, resuming a partial file with a Range
// request, checks size and digest, and renames it into place.
func (h *repoClient) download(ctx context.Context, commit, name string, meta fileMeta, blob string) error {
	part := blob + ".incomplete"
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	defer f.Close()
	var sum hash.Hash
	lfs := len(meta.etag) == 64
	if lfs {
		sum = sha256.New()
	} else {
		sum = sha1.New()
		fmt.Fprintf(sum, "blob %d\x00", meta.size)
	}
	have, err := io.Copy(sum, f) // hash what an earlier run left
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if have > meta.size {
		if err := restart(f, &have, &sum, lfs, meta.size); err != nil {
			return err
		}
	}
	if have < meta.size {
		hdr := map[string]string{"Accept-Encoding": "identity"}
		if have > 0 {
			hdr["Range"] = fmt.Sprintf("bytes=%d-", have)
		}
		resp, err := h.send(ctx, h.opts.Client, http.MethodGet, h.resolveURL(commit, name), hdr)
		if err != nil {
			return fmt.Errorf("hub: downloading %s: %w (run again to resume)", name, err)
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusPartialContent && have > 0:
		case resp.StatusCode == http.StatusOK:
			if err := restart(f, &have, &sum, lfs, meta.size); err != nil { // the server ignored the Range
				return err
			}
		case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
			if err := restart(f, &have, &sum, lfs, meta.size); err != nil {
				return err
			}
			return fmt.Errorf("hub: downloading %s: the server refused to resume; run again", name)
		default:
			return statusError(resp, h.repo+": "+name)
		}
		var w io.Writer = io.MultiWriter(f, sum)
		var bar *progress.Writer
		if h.opts.Progress != nil {
			bar = progress.NewWriter(h.opts.Progress, name, meta.size, have)
			w = io.MultiWriter(w, bar)
		}
		n, err := io.CopyBuffer(w, io.LimitReader(resp.Body, meta.size-have+1), make([]byte, 1<<20))
		have += n
		if bar != nil {
			if err != nil || have != meta.size {
				bar.Abandon()
			} else {
				bar.Finish()
			}
		}
		if err != nil {
			return fmt.Errorf("hub: downloading %s: %w after %d of %d bytes (run again to resume)", name, err, have, meta.size)
		}
	}
	if have != meta.size {
		return fmt.Errorf("hub: downloading %s: got %d bytes, the Hub announced %d (run again to resume)", name, have, meta.size)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != meta.etag {
		f.Close()
		os.Remove(part)
		return &loader.FormatError{Path: part, Rule: loader.RuleManifestHash, Detail: fmt.Sprintf("downloaded %s has digest %s, the Hub's ETag is %s; the partial file was removed", name, got, meta.etag)}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if err := os.Rename(part, blob); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	return nil
}

// restart empties a partial file and resets its running digest.
func restart(f *os.File, have *int64, sum *hash.Hash, lfs bool, size int64) error {
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	*have = 0
	if lfs {
		*sum = sha256.New()
	} else {
		*sum = sha1.New()
		fmt.Fprintf(*sum, "blob %d\x00", size)
	}
	return nil
}
