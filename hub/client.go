package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrUnreachable is matched (errors.Is) by the errors of Resolve that come from failing to get
// an answer from the Hub: no network, a name that does not resolve, a refused connection, a
// Hub that stalls or misses its deadline, and server errors (HTTP 5xx, 429). With the revision
// in the cache, Resolve uses the cached snapshot instead (with a warning). Errors of the local
// disk (an unwritable or full cache) never match it.
var ErrUnreachable = errors.New("the Hugging Face Hub did not answer")

// unreachableError marks a failure to get an answer from the Hub (see ErrUnreachable).
type unreachableError struct{ err error }

func (e *unreachableError) Error() string        { return e.err.Error() }
func (e *unreachableError) Unwrap() error        { return e.err }
func (e *unreachableError) Is(target error) bool { return target == ErrUnreachable }

// serverTrouble reports whether an HTTP status says the Hub is down or busy rather than that
// the request is wrong: the cache may then stand in for it.
func serverTrouble(code int) bool {
	return code >= 500 || code == http.StatusTooManyRequests
}

// sameOrigin reports whether u has exactly the scheme, host and port of the endpoint: only
// there is the token sent.
func (h *repoClient) sameOrigin(u *url.URL) bool {
	e, err := url.Parse(h.opts.Endpoint)
	if err != nil {
		return false
	}
	return strings.EqualFold(u.Scheme, e.Scheme) && strings.EqualFold(u.Hostname(), e.Hostname()) && effectivePort(u) == effectivePort(e)
}

// effectivePort is u's port, or the scheme's default.
func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// client returns a copy of c that follows redirects, resolving Location as a URL reference
// against the request's URL (RFC 3986: "//host/path", "/path" and "../x" as well as absolute
// URLs), but drops the token unless the redirect stays on the endpoint's scheme, host and port
// (Go's own rule compares host names only, so a redirect to another port or scheme of the same
// host, or to a subdomain, would carry it). A redirect response for which answer reports true
// is returned as the answer itself instead of being followed (nil: every redirect is followed).
func (h *repoClient) client(c *http.Client, answer func(*http.Response) bool) *http.Client {
	cc := *c
	check := c.CheckRedirect
	cc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if answer != nil && req.Response != nil && answer(req.Response) {
			return http.ErrUseLastResponse
		}
		if !h.sameOrigin(req.URL) {
			req.Header.Del("Authorization")
		}
		if check != nil {
			return check(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &cc
}

func (h *repoClient) request(ctx context.Context, method, u string, hdr map[string]string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	req.Header.Set("User-Agent", "octlm-loader")
	if h.opts.Token != "" && h.sameOrigin(req.URL) {
		req.Header.Set("Authorization", "Bearer "+h.opts.Token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return req, nil
}

// maxRetries bounds how often send asks again after a 429 or 503 with a Retry-After.
const maxRetries = 3

// limit bounds one exchange with the Hub: a request, the redirects it follows and its whole
// answer, body included.
type limit struct {
	deadline time.Duration
	setting  string // what the deadline is and what sets it, named when it is missed
	minRate  int64  // for a download, bytes per second on average once RequestTimeout has passed; 0 for no check
}

// metadataLimit bounds a metadata request (the revision lookup, a HEAD on a resolve URL).
func (h *repoClient) metadataLimit() limit {
	return limit{deadline: h.opts.MetadataTimeout, setting: "the deadline of a metadata request, set by " + h.opts.metadataVar}
}

// send makes a request, asking again (at most maxRetries times) when the Hub answers 429 or 503
// with a Retry-After of at most MaxRetryWait. Each attempt has a watchdog on top of the client's
// own timeouts, so that even a caller's Client cannot wait forever: the response headers must
// arrive within ConnectTimeout + ResponseTimeout of the start, then body bytes at least every
// StallTimeout, and the whole answer, redirects and body included, within lim.deadline; with
// lim.minRate > 0, once RequestTimeout has passed the body must also have come at minRate bytes
// per second on average since then (a Hub trickling a byte at a time is cut off long before the
// deadline). A failure to get an answer matches ErrUnreachable. The returned response's Body
// must be closed.
func (h *repoClient) send(ctx context.Context, client *http.Client, method, u string, hdr map[string]string, lim limit) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := h.sendOnce(ctx, client, method, u, hdr, lim)
		if err != nil {
			if ctx.Err() != nil { // the caller gave up (an interrupt): not the Hub's failure
				return nil, err
			}
			return nil, &unreachableError{err}
		}
		if attempt == maxRetries || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
			return resp, nil
		}
		wait, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		if !ok || wait > h.opts.MaxRetryWait {
			return resp, nil
		}
		resp.Body.Close()
		h.warn("the Hub answered %s; asking again in %v", resp.Status, wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 || s > 1<<20 {
			return 0, false
		}
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

func (h *repoClient) sendOnce(ctx context.Context, client *http.Client, method, u string, hdr map[string]string, lim limit) (*http.Response, error) {
	headers := h.opts.ConnectTimeout + h.opts.ResponseTimeout
	ctx, cancelDeadline := context.WithTimeoutCause(ctx, lim.deadline, fmt.Errorf("no complete answer within %v (%s)", lim.deadline, lim.setting))
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watchdog{ctx: ctx, cancel: cancel, cancelDeadline: cancelDeadline}
	w.timer = time.AfterFunc(headers, func() { cancel(fmt.Errorf("no answer within %v", headers)) })
	req, err := h.request(ctx, method, u, hdr)
	if err != nil {
		w.stop()
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		w.stop()
		return nil, w.explain(err)
	}
	w.timer.Stop()
	w.timer = time.AfterFunc(h.opts.StallTimeout, func() { cancel(fmt.Errorf("no data for %v (%s)", h.opts.StallTimeout, EnvDownloadTimeout)) })
	resp.Body = &watchedBody{ReadCloser: resp.Body, w: w, stall: h.opts.StallTimeout,
		start: time.Now(), grace: h.opts.RequestTimeout, minRate: lim.minRate}
	return resp, nil
}

// watchdog cancels a request when one of its timers fires, with the reason as the context's
// cause.
type watchdog struct {
	ctx            context.Context
	timer          *time.Timer
	cancel         context.CancelCauseFunc
	cancelDeadline context.CancelFunc
}

func (w *watchdog) stop() { w.timer.Stop(); w.cancel(nil); w.cancelDeadline() }

// explain prefixes err with the reason the watchdog or the deadline cancelled the request.
func (w *watchdog) explain(err error) error {
	if w.ctx.Err() == nil {
		return err
	}
	cause := context.Cause(w.ctx)
	if cause == nil || errors.Is(cause, context.Canceled) || errors.Is(err, cause) { // the transport may return the cause itself
		return err
	}
	return fmt.Errorf("%v: %w", cause, err)
}

// watchedBody restarts the stall timer whenever bytes arrive, checks the average rate after
// the grace period, and remembers a failed read.
type watchedBody struct {
	io.ReadCloser
	w       *watchdog
	stall   time.Duration
	start   time.Time
	grace   time.Duration
	minRate int64 // bytes per second; 0 for no check
	got     int64
	readErr error // the first error other than io.EOF: the connection failed
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.timer.Reset(b.stall)
		b.got += int64(n)
		if late := time.Since(b.start) - b.grace; b.minRate > 0 && late > 0 && float64(b.got) < late.Seconds()*float64(b.minRate) && err == nil {
			b.w.cancel(fmt.Errorf("slower than %d bytes/s on average after %v (%s) (%d bytes in %v)", b.minRate, b.grace, EnvTimeout, b.got, time.Since(b.start).Round(time.Millisecond)))
			err = context.Canceled
		}
	}
	if err != nil && err != io.EOF {
		err = b.w.explain(err)
		if b.readErr == nil {
			b.readErr = err
		}
	}
	return n, err
}

func (b *watchedBody) Close() error {
	b.w.stop()
	return b.ReadCloser.Close()
}

// readFailed reports whether reading resp's body failed on the connection (as opposed to the
// body being malformed).
func readFailed(resp *http.Response) bool {
	b, ok := resp.Body.(*watchedBody)
	return ok && b.readErr != nil
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
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		if v := resp.Header.Get("Retry-After"); v != "" {
			hint = fmt.Sprintf(" (the Hub asks to retry after %.40q)", v)
		}
	}
	if e := resp.Header.Get("X-Error-Message"); e != "" {
		msg = e
	}
	err := fmt.Errorf("hub: %s: HTTP %s%s: %.200s", what, resp.Status, hint, msg)
	if serverTrouble(resp.StatusCode) {
		return &unreachableError{err}
	}
	return err
}
