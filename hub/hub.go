package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"syscall"
	"time"

	"github.com/octlm/octlm/internal/fileio"
	"github.com/octlm/octlm/internal/termsafe"
	"github.com/octlm/octlm/loader"
)

// DefaultFiles returns the file patterns (path.Match against the repository path) Resolve
// downloads: what a checkpoint needs, not the README or the duplicate vocab.json/merges.txt.
func DefaultFiles() []string {
	return []string{
		"config.json", "generation_config.json", "*.safetensors", loader.IndexFileName,
		"tokenizer.json", "tokenizer_config.json",
	}
}

// Options configures Resolve. Zero values take the environment's settings, like Python's
// huggingface_hub: HF_ENDPOINT, HF_HUB_CACHE / HF_HOME, HF_TOKEN (or the token file written by
// `huggingface-cli login`), HF_HUB_OFFLINE, HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT; and
// octlm's own OCTLM_HUB_TIMEOUT.
type Options struct {
	Endpoint string       // default $HF_ENDPOINT, else https://huggingface.co
	CacheDir string       // default CacheDir()
	Token    string       // default $HF_TOKEN, else the token file; sent to the endpoint's origin only
	Offline  bool         // never touch the network; also set by HF_HUB_OFFLINE=1
	Files    []string     // patterns of files to fetch; default DefaultFiles()
	Progress io.Writer    // download and hashing progress, warnings; nil for silence
	Client   *http.Client // default: a client with ConnectTimeout and ResponseTimeout

	// ConnectTimeout bounds connecting to the Hub (TCP and TLS); default 10 s.
	ConnectTimeout time.Duration
	// ResponseTimeout bounds the wait for a response's headers once the request is sent;
	// default 30 s. A Hub that accepts connections but never answers is then treated like an
	// unreachable one (the cached snapshot is used when there is one).
	ResponseTimeout time.Duration
	// MetadataTimeout is the deadline of one metadata request (the revision lookup, the HEAD
	// that reads a file's ETag and size), from sending it to the last byte of its answer, the
	// redirects it follows and its body included: a Hub that trickles its answer is cut off
	// then, and the cached snapshot used when there is one. Default $HF_HUB_ETAG_TIMEOUT
	// (seconds, as huggingface_hub reads it), else RequestTimeout when that is given (as an
	// option or by $OCTLM_HUB_TIMEOUT), else 10 s.
	MetadataTimeout time.Duration
	// StallTimeout bounds a wait for the next bytes of a response body, in practice a
	// download's (huggingface_hub's download timeout): default $HF_HUB_DOWNLOAD_TIMEOUT
	// (seconds), else 60 s.
	StallTimeout time.Duration
	// RequestTimeout bounds a download, so that a Hub trickling a byte now and then cannot hold
	// a run forever: default $OCTLM_HUB_TIMEOUT (a Go duration such as 90s or 5m, or seconds),
	// else 1 minute. A download gets RequestTimeout plus one second for every MinDownloadRate
	// bytes it has to fetch, and is cut off (to be resumed by the next run) when, RequestTimeout
	// after it began, it has not averaged MinDownloadRate since. When given, it is also the
	// metadata deadline unless MetadataTimeout or $HF_HUB_ETAG_TIMEOUT is set.
	RequestTimeout time.Duration
	// MinDownloadRate is the slowest download (bytes per second) accepted; default 32 KiB/s.
	MinDownloadRate int64
	// MaxRetryWait is the longest Retry-After (HTTP 429, 503) that is waited for before asking
	// again, up to 3 times; a longer one is not waited for. Default 10 s.
	MaxRetryWait time.Duration

	metadataVar string // the variable to name when the metadata deadline is missed
}

// Default Hub client timeouts (see Options).
const (
	DefaultConnectTimeout  = 10 * time.Second
	DefaultResponseTimeout = 30 * time.Second
	DefaultMetadataTimeout = 10 * time.Second
	DefaultStallTimeout    = 60 * time.Second
	DefaultRequestTimeout  = time.Minute
	DefaultMinDownloadRate = 32 << 10
	DefaultMaxRetryWait    = 10 * time.Second
)

// The variables that set the Hub client's timeouts: huggingface_hub's names for the metadata
// deadline (Options.MetadataTimeout) and the download timeout (Options.StallTimeout), both in
// seconds, and octlm's own for the download deadline (Options.RequestTimeout).
const (
	EnvMetadataTimeout = "HF_HUB_ETAG_TIMEOUT"
	EnvDownloadTimeout = "HF_HUB_DOWNLOAD_TIMEOUT"
	EnvTimeout         = "OCTLM_HUB_TIMEOUT"
)

// maxTimeoutSeconds bounds a timeout read from the environment (about 31 years): beyond it the
// value is a mistake, and it would overflow a time.Duration.
const maxTimeoutSeconds = 1e9

// envTimeout reads the variable name as a positive number of seconds (fractions allowed) or,
// with goDuration, also as a Go duration such as 90s or 5m. ok is false when it is unset or
// empty; a value that is neither is an error naming the variable.
func envTimeout(name string, goDuration bool) (d time.Duration, ok bool, err error) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return 0, false, nil
	}
	if n, perr := strconv.ParseFloat(v, 64); perr == nil {
		if d = time.Duration(n * float64(time.Second)); n > 0 && n <= maxTimeoutSeconds && d > 0 {
			return d, true, nil
		}
	} else if goDuration {
		if d, derr := time.ParseDuration(v); derr == nil && d > 0 {
			return d, true, nil
		}
	}
	want := "a positive number of seconds such as 10 or 2.5"
	if goDuration {
		want = "a positive duration such as 90s or 5m, or a number of seconds"
	}
	return 0, false, fmt.Errorf("hub: %s=%.40q: want %s", name, v, want)
}

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

func (o Options) withDefaults() (Options, error) {
	if o.Endpoint == "" {
		o.Endpoint = os.Getenv("HF_ENDPOINT")
	}
	if o.Endpoint == "" {
		o.Endpoint = "https://huggingface.co"
	}
	o.Endpoint = strings.TrimRight(o.Endpoint, "/")
	if u, err := url.Parse(o.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return o, fmt.Errorf("hub: the endpoint %.100q (HF_ENDPOINT) is not an http(s)://host[:port] address", o.Endpoint)
	}
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
		o.Files = DefaultFiles()
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.ResponseTimeout <= 0 {
		o.ResponseTimeout = DefaultResponseTimeout
	}
	if o.StallTimeout <= 0 {
		d, ok, err := envTimeout(EnvDownloadTimeout, false)
		if err != nil {
			return o, err
		}
		o.StallTimeout = DefaultStallTimeout
		if ok {
			o.StallTimeout = d
		}
	}
	requestGiven := o.RequestTimeout > 0
	if !requestGiven {
		d, ok, err := envTimeout(EnvTimeout, true)
		if err != nil {
			return o, err
		}
		o.RequestTimeout, requestGiven = DefaultRequestTimeout, ok
		if ok {
			o.RequestTimeout = d
		}
	}
	if o.MetadataTimeout <= 0 {
		d, ok, err := envTimeout(EnvMetadataTimeout, false)
		switch {
		case err != nil:
			return o, err
		case ok:
			o.MetadataTimeout = d
		case requestGiven:
			o.MetadataTimeout = o.RequestTimeout // OCTLM_HUB_TIMEOUT bounded every request before HF_HUB_ETAG_TIMEOUT was read
			o.metadataVar = EnvTimeout + ", " + EnvMetadataTimeout + " being unset"
		default:
			o.MetadataTimeout = DefaultMetadataTimeout
		}
	}
	if o.metadataVar == "" {
		o.metadataVar = EnvMetadataTimeout + " in seconds"
	}
	if o.MinDownloadRate <= 0 {
		o.MinDownloadRate = DefaultMinDownloadRate
	}
	if o.MaxRetryWait <= 0 {
		o.MaxRetryWait = DefaultMaxRetryWait
	}
	if o.Client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = (&net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
		t.TLSHandshakeTimeout = o.ConnectTimeout
		t.ResponseHeaderTimeout = o.ResponseTimeout
		o.Client = &http.Client{Transport: t}
	}
	return o, nil
}

var (
	repoIDPattern   = regexp.MustCompile(`^[A-Za-z0-9][\w.-]*/[\w.-]+$`)
	revisionPattern = regexp.MustCompile(`^[\w.-]+(/[\w.-]+)*$`)
	commitPattern   = regexp.MustCompile(`^[0-9a-f]{40}$`)
	etagPattern     = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`) // git SHA-1 or LFS SHA-256
)

// ParseRepoRef splits "Org/Name[@revision]" (revision defaults to "main") and validates both
// parts the way the Hub does: no "..", no "--" at the edges, at most 96 characters for the
// repository; a revision is a commit, a branch or tag name, or refs/pr/N, with git's rules for
// ref names: no empty, "." or ".." part, no part that starts or ends with a dot or ends with
// ".lock".
func ParseRepoRef(s string) (repo, revision string, err error) {
	repo, revision, found := strings.Cut(s, "@")
	if !found {
		revision = "main"
	}
	if !repoIDPattern.MatchString(repo) || len(repo) > 96 || strings.Contains(repo, "..") || strings.Contains(repo, "--") ||
		strings.HasSuffix(repo, ".") || strings.HasSuffix(repo, "-") {
		return "", "", fmt.Errorf("hub: %q is not a Hub repository id (want Org/Name[@revision])", s)
	}
	if !validRevision(revision) {
		return "", "", fmt.Errorf("hub: %q: invalid revision %q (a commit, a branch or tag name, or refs/pr/N)", s, revision)
	}
	return repo, revision, nil
}

// validRevision applies git's rules for ref names to rev (see ParseRepoRef).
func validRevision(rev string) bool {
	if len(rev) > 255 || !revisionPattern.MatchString(rev) || strings.Contains(rev, "..") {
		return false
	}
	for _, part := range strings.Split(rev, "/") {
		if part == "" || strings.HasPrefix(part, ".") || strings.HasSuffix(part, ".") || strings.HasSuffix(part, ".lock") {
			return false
		}
	}
	return true
}

// RepoCacheDir is the cache folder of a model repository: models--Org--Name.
func RepoCacheDir(cacheDir, repo string) string {
	return filepath.Join(cacheDir, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

// Resolve turns a local folder or a Hub reference into a checkpoint folder. An existing folder
// is returned as is (a folder of the cache's layout is checked like a cached snapshot).
// "Org/Name[@revision]" is resolved in the Hugging Face cache (models--Org--Name/snapshots/<commit>/,
// shared with Python): with Offline (or HF_HUB_OFFLINE=1) only the cache is consulted; otherwise
// the revision is looked up on the Hub, and missing files are downloaded into blobs/ (resuming
// <etag>.incomplete partial files), checked against their ETag (SHA-256 for LFS files, git blob
// SHA-1 for the others) and linked into the snapshot. If the Hub cannot be reached, or answers
// with a server error, but the cache holds the revision, the cached snapshot is used and a
// warning is written to Progress.
//
// The cache is not trusted further than it must be: no file is written through a symbolic link
// (a partial or complete blob that is a link, a FIFO or a device is discarded), a blob already
// there is checked against its ETag before it is linked, every file of a snapshot must resolve
// inside the repository's cache folder, and what already holds the right content (refs/<rev>)
// is not rewritten, so that a read-only shared cache that holds the snapshot works online.
// Before a download, the announced size is checked against the free disk space and, for files
// other than weights, against a cap (see maxFileBytes).
// A name that is no folder but reads as a local path (it starts with ".", "/" or "~", or the
// folder it would sit in exists) is refused as a missing folder without asking the Hub; a leading
// "~/" is the home folder.
func Resolve(ctx context.Context, nameOrDir string, opts Options) (string, error) {
	nameOrDir = expandHome(nameOrDir)
	st, err := os.Stat(nameOrDir)
	switch {
	case err == nil && !st.IsDir():
		return "", fmt.Errorf("hub: %s: not a folder", nameOrDir)
	case err == nil:
		// A folder of the cache's layout, named as such or through a link, is checked like a
		// cached snapshot.
		real, err := realPath(nameOrDir)
		if err != nil {
			return "", fmt.Errorf("hub: %w", err)
		}
		for _, d := range []string{nameOrDir, real} {
			if repoDir, ok := snapshotRepo(d); ok {
				if err := checkSnapshot(repoDir, d); err != nil {
					return "", err
				}
			}
		}
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
	opts, err = opts.withDefaults()
	if err != nil {
		return "", err
	}
	repoDir := RepoCacheDir(opts.CacheDir, repo)
	if opts.Offline {
		dir, err := cachedSnapshot(repoDir, rev)
		if err != nil {
			return "", fmt.Errorf("hub: %s@%s is not in the cache %s and offline mode is on (HF_HUB_OFFLINE): %w", repo, rev, opts.CacheDir, err)
		}
		return dir, checkSnapshot(repoDir, dir)
	}
	h := &repoClient{opts: opts, repo: repo, repoDir: repoDir}
	dir, err := h.resolveOnline(ctx, rev)
	if errors.Is(err, ErrUnreachable) {
		// The Hub is down, stalls or fails: what the cache holds for rev stands in for it.
		if cached, cerr := cachedSnapshot(repoDir, rev); cerr == nil && cached != dir {
			if err := checkSnapshot(repoDir, cached); err != nil {
				return "", err
			}
			h.warn("warning: %v; using the cached snapshot %s", err, cached)
			return cached, nil
		}
	}
	if err != nil {
		return "", err
	}
	return dir, nil
}

// resolveOnline asks the Hub for the commit of rev and brings its snapshot into the cache. On
// an error it returns the snapshot it was filling, if it got that far.
func (h *repoClient) resolveOnline(ctx context.Context, rev string) (string, error) {
	repoDir := h.repoDir
	commit, files, err := h.revisionInfo(ctx, rev)
	if err != nil {
		return "", err
	}
	snap := filepath.Join(repoDir, "snapshots", commit)
	for _, d := range []string{filepath.Join(repoDir, "blobs"), snap, filepath.Join(repoDir, "refs")} {
		if err := checkFolderInside(repoDir, d); err != nil {
			return "", err
		}
	}
	for _, name := range files {
		if err := h.ensureFile(ctx, commit, name, snap); err != nil {
			return snap, err // which snapshot failed: not one for the cache to stand in for
		}
	}
	if err := os.MkdirAll(snap, 0o755); err != nil {
		return "", fmt.Errorf("hub: %w", err)
	}
	if rev != commit {
		if err := writeRef(repoDir, rev, commit); err != nil {
			return "", err
		}
	}
	return snap, checkSnapshot(repoDir, snap)
}

// warn writes a line to Progress, escaped: it may quote the Hub's answers and file names.
func (h *repoClient) warn(format string, args ...any) {
	if h.opts.Progress != nil {
		fmt.Fprintln(h.opts.Progress, termsafe.Text(fmt.Sprintf(format, args...)))
	}
}

// refPath is the file of refs/ that records the commit of the branch or tag rev, refused when it
// would not be a file inside refs/ (ParseRepoRef already refuses such names).
func refPath(repoDir, rev string) (string, error) {
	refs := filepath.Join(repoDir, "refs")
	p := filepath.Join(refs, filepath.FromSlash(rev))
	rel, err := filepath.Rel(refs, p)
	if !validRevision(rev) || err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("hub: invalid revision %q", rev)
	}
	return p, nil
}

// writeRef records that rev is commit in refs/, unless it already says so: a read-only cache
// that is up to date stays usable.
func writeRef(repoDir, rev, commit string) error {
	ref, err := refPath(repoDir, rev)
	if err != nil {
		return err
	}
	if b, err := fileio.ReadFile(ref, 4<<10); err == nil && strings.TrimSpace(string(b)) == commit {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(ref), 0o755); err != nil {
		return fmt.Errorf("hub: recording %s@%s: %w", filepath.Base(repoDir), rev, err)
	}
	if err := fileio.WriteFile(ref, []byte(commit)); err != nil {
		return fmt.Errorf("hub: recording %s@%s: %w", filepath.Base(repoDir), rev, err)
	}
	return nil
}

// cachedSnapshot finds the snapshot of rev (a commit, or a ref recorded in refs/).
func cachedSnapshot(repoDir, rev string) (string, error) {
	commit := rev
	if !commitPattern.MatchString(rev) {
		ref, err := refPath(repoDir, rev)
		if err != nil {
			return "", err
		}
		b, err := fileio.ReadFile(ref, 4<<10)
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

// snapshotRepo reports whether dir has the cache's layout, models--Org--Name/snapshots/<commit>,
// and returns the repository's folder.
func snapshotRepo(dir string) (string, bool) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	snaps := filepath.Dir(abs)
	repo := filepath.Dir(snaps)
	return repo, filepath.Base(snaps) == "snapshots" && strings.HasPrefix(filepath.Base(repo), "models--")
}

// checkSnapshot refuses a snapshot that reaches outside the cache: the snapshot folder must
// resolve inside the repository's folder, and every file in it (config.json and the tokenizer
// as well as the weights) into the repository's blobs folder or the snapshot itself. A link
// whose target is missing is let be: the file counts as missing.
func checkSnapshot(repoDir, snap string) error {
	realRepo, err := realPath(repoDir)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	realSnap, err := realPath(snap)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if !inside(realSnap, realRepo) {
		return fmt.Errorf("hub: the snapshot %s resolves to %s, outside its repository's cache folder %s: refused", snap, realSnap, realRepo)
	}
	roots := []string{realSnap}
	if b, err := realPath(filepath.Join(repoDir, "blobs")); err == nil {
		roots = append(roots, b)
	}
	return filepath.WalkDir(snap, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("hub: %w", err)
		}
		if d.IsDir() {
			return nil
		}
		real, err := realPath(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("hub: %w", err)
		}
		for _, r := range roots {
			if inside(real, r) {
				return nil
			}
		}
		return fmt.Errorf("hub: %s resolves to %s, outside the cache's blobs folder: refused (remove the link; a run online downloads the file again)", p, real)
	})
}

// checkFolderInside refuses a folder of the repository's cache (blobs, refs, a snapshot) that
// resolves outside it, before anything is written there; a missing folder is fine.
func checkFolderInside(repoDir, dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	realRepo, err := realPath(repoDir)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	real, err := realPath(dir)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if !inside(real, realRepo) {
		return fmt.Errorf("hub: %s resolves to %s, outside its repository's cache folder %s: refused", dir, real, realRepo)
	}
	return nil
}

// realPath is the absolute path of p with every symbolic link resolved.
func realPath(p string) (string, error) {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	return filepath.Abs(r)
}

// inside reports whether the absolute path p is root or lies below it.
func inside(p, root string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

type repoClient struct {
	opts    Options
	repo    string
	repoDir string
}

// revisionInfo asks the Hub API for the commit of rev and the files it holds, filtered by the
// patterns of the options.
func (h *repoClient) revisionInfo(ctx context.Context, rev string) (string, []string, error) {
	u := h.opts.Endpoint + "/api/models/" + h.repo + "/revision/" + url.PathEscape(rev)
	resp, err := h.send(ctx, h.client(h.opts.Client, nil), http.MethodGet, u, nil, h.metadataLimit())
	if err != nil {
		return "", nil, fmt.Errorf("hub: %s@%s: %w", h.repo, rev, err)
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
		if readFailed(resp) && ctx.Err() == nil {
			return "", nil, &unreachableError{err} // a stalled Hub is an unreachable one
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

// head fetches file metadata. It follows redirects (a renamed repository, wherever Location
// points) except the LFS one to the CDN: the Hub puts the LFS ETag and size on that redirect
// itself, as X-Linked-Etag and X-Linked-Size. The redirects followed are part of the one
// request, within its metadata deadline.
func (h *repoClient) head(ctx context.Context, commit, name string) (fileMeta, error) {
	client := h.client(h.opts.Client, func(r *http.Response) bool { return r.Header.Get("X-Linked-Etag") != "" })
	resp, err := h.send(ctx, client, http.MethodHead, h.resolveURL(commit, name), map[string]string{"Accept-Encoding": "identity"}, h.metadataLimit())
	if err != nil {
		return fileMeta{}, fmt.Errorf("hub: %s: %s: %w", h.repo, name, err)
	}
	resp.Body.Close()
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
		return fileMeta{}, fmt.Errorf("hub: %s: %s: the Hub gave no usable size (%.40q)", h.repo, name, sizeText)
	}
	if !etagPattern.MatchString(m.etag) {
		return fileMeta{}, fmt.Errorf("hub: %s: %s: the Hub gave no usable ETag (%.80q)", h.repo, name, m.etag)
	}
	if m.commit != commit {
		return fileMeta{}, fmt.Errorf("hub: %s: %s: the Hub answered for commit %.60q, asked %s", h.repo, name, m.commit, commit)
	}
	return m, nil
}
