package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/octlm/octlm/internal/progress"
	"github.com/octlm/octlm/internal/sysinfo"
	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/units"
)

// Caps on the announced size of the files other than weights, checked before downloading:
// the tokenizer and the shard index have the limits their readers apply, every other file
// (config.json, generation_config.json, tokenizer_config.json) MaxSmallFileBytes.
const (
	MaxSmallFileBytes = 16 << 20
	maxTokenizerBytes = 256 << 20 // the tokenizer package's limit on tokenizer.json
)

// maxFileBytes is the largest size accepted for the file name of a repository; -1 for weights,
// bounded by the free disk space only.
func maxFileBytes(name string) int64 {
	switch base := path.Base(name); {
	case path.Ext(base) == ".safetensors":
		return -1
	case base == loader.IndexFileName:
		return loader.MaxIndexBytes
	case base == "tokenizer.json":
		return maxTokenizerBytes
	}
	return MaxSmallFileBytes
}

// ensureFile makes snapshots/<commit>/<name> exist, downloading its blob when missing.
func (h *repoClient) ensureFile(ctx context.Context, commit, name, snap string) error {
	link := filepath.Join(snap, filepath.FromSlash(name))
	if _, err := os.Stat(link); err == nil {
		return nil // checked, with the rest of the snapshot, by checkSnapshot
	}
	meta, err := h.head(ctx, commit, name)
	if err != nil {
		return err
	}
	if limit := maxFileBytes(name); limit >= 0 && meta.size > limit {
		return fmt.Errorf("hub: %s: %s: the Hub announces %d bytes, more than the %d allowed for this file: refused before downloading", h.repo, name, meta.size, limit)
	}
	blobs := filepath.Join(h.repoDir, "blobs")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	blob := filepath.Join(blobs, meta.etag)
	// Another process (octlm or Python's huggingface_hub, which locks the same file) may be
	// fetching this blob: take turns, then look again.
	lock := filepath.Join(h.opts.CacheDir, ".locks", filepath.Base(h.repoDir), meta.etag+".lock")
	unlock, err := lockFile(ctx, lock, func() { h.warn("waiting for another process downloading %s", name) })
	if err != nil {
		return err
	}
	defer unlock()
	ok, err := h.blobReady(blob, name, meta)
	if err != nil {
		return err
	}
	if !ok {
		if err := h.download(ctx, commit, name, meta, blob); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if err := checkFolderInside(h.repoDir, filepath.Dir(link)); err != nil { // a subfolder linked out
		return err
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

// blobReady reports whether blob already holds the file meta describes: a regular file (not a
// link) of its size and digest. Anything else in its place (a link, a FIFO, a file of the right
// size and the wrong content) is removed, with a warning, to be downloaded again.
func (h *repoClient) blobReady(blob, name string, meta fileMeta) (bool, error) {
	st, err := os.Lstat(blob)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("hub: %w", err)
	case !st.Mode().IsRegular():
		h.warn("warning: %s: not a regular file (%s): removed, %s is downloaded again", blob, st.Mode().Type(), name)
		return false, removeBad(blob)
	case st.Size() != meta.size:
		return false, nil // a download renames the right one over it
	}
	f, err := os.OpenFile(blob, os.O_RDONLY|oNoFollow|oNonBlock, 0)
	if err != nil {
		return false, fmt.Errorf("hub: %w", err)
	}
	defer f.Close()
	sum := newDigest(meta)
	var r io.Reader = f
	if h.opts.Progress != nil && meta.size >= 64<<20 {
		bar := progress.NewWriter(h.opts.Progress, "checking "+name, meta.size, 0)
		defer bar.Abandon()
		r = io.TeeReader(f, bar)
	}
	if _, err := io.Copy(sum, io.LimitReader(r, meta.size+1)); err != nil {
		return false, fmt.Errorf("hub: checking %s: %w", blob, err)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != meta.etag {
		h.warn("warning: %s: the cached blob has digest %s, not the Hub's ETag: removed, %s is downloaded again", blob, got, name)
		f.Close()
		return false, removeBad(blob)
	}
	return true, nil
}

// removeBad removes what stands where a blob or a partial file should be.
func removeBad(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("hub: %s is not a usable file and cannot be removed: %w", p, err)
	}
	return nil
}

// newDigest starts the digest an ETag is: SHA-256 of an LFS file, git's blob SHA-1 of others.
func newDigest(meta fileMeta) hash.Hash {
	if len(meta.etag) == 64 {
		return sha256.New()
	}
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", meta.size)
	return h
}

// openPart opens the partial file of a download without following a link: anything but a
// regular file in its place (a link, to /dev/zero or out of the cache; a FIFO; a device) is
// removed with a warning and a new file started.
func (h *repoClient) openPart(part string) (*os.File, error) {
	if st, err := os.Lstat(part); err == nil && !st.Mode().IsRegular() {
		h.warn("warning: %s: not a regular file (%s): discarded", part, st.Mode().Type())
		if err := removeBad(part); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE|oNoFollow|oNonBlock, 0o644)
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("hub: %w", err)
	}
	if !st.Mode().IsRegular() { // put there since the check above
		f.Close()
		return nil, fmt.Errorf("hub: %s: not a regular file (%s): refused", part, st.Mode().Type())
	}
	return f, nil
}

// download fetches the blob into <blob>.incomplete, resuming a partial file with a Range
// request, checks size and digest, and renames it into place. The space it still needs is
// checked against the free disk space first.
func (h *repoClient) download(ctx context.Context, commit, name string, meta fileMeta, blob string) error {
	part := blob + ".incomplete"
	var have int64
	if st, err := os.Lstat(part); err == nil && st.Mode().IsRegular() && st.Size() <= meta.size {
		have = st.Size()
	}
	if free := sysinfo.FreeDiskBytes(filepath.Dir(blob)); free >= 0 && meta.size-have > free {
		return fmt.Errorf("hub: %s: %s needs %s more on disk, %s is free in %s: refused before downloading",
			h.repo, name, units.Bytes(meta.size-have), units.Bytes(free), filepath.Dir(blob))
	}
	f, err := h.openPart(part)
	if err != nil {
		return err
	}
	defer f.Close()
	sum := newDigest(meta)
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	have = 0
	if st.Size() > meta.size {
		if err := restart(f, &have, &sum, meta); err != nil {
			return err
		}
	} else if have, err = io.Copy(sum, io.LimitReader(f, meta.size+1)); err != nil { // hash what an earlier run left
		return fmt.Errorf("hub: %w", err)
	}
	if have > meta.size {
		if err := restart(f, &have, &sum, meta); err != nil {
			return err
		}
	}
	if have < meta.size {
		hdr := map[string]string{"Accept-Encoding": "identity"}
		if have > 0 {
			hdr["Range"] = fmt.Sprintf("bytes=%d-", have)
		}
		deadline := h.opts.RequestTimeout + time.Duration(float64(meta.size-have)/float64(h.opts.MinDownloadRate)*float64(time.Second))
		lim := limit{deadline: deadline, minRate: h.opts.MinDownloadRate,
			setting: fmt.Sprintf("the download's deadline, %s plus 1 s per %d bytes to fetch", EnvTimeout, h.opts.MinDownloadRate)}
		resp, err := h.send(ctx, h.client(h.opts.Client, nil), http.MethodGet, h.resolveURL(commit, name), hdr, lim)
		if err != nil {
			return fmt.Errorf("hub: downloading %s: %w (run again to resume)", name, err)
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusPartialContent && have > 0:
		case resp.StatusCode == http.StatusOK:
			if err := restart(f, &have, &sum, meta); err != nil { // the server ignored the Range
				return err
			}
		case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
			if err := restart(f, &have, &sum, meta); err != nil {
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
			if readFailed(resp) && ctx.Err() == nil {
				err = &unreachableError{err}
			}
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
func restart(f *os.File, have *int64, sum *hash.Hash, meta fileMeta) error {
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	*have = 0
	*sum = newDigest(meta)
	return nil
}
