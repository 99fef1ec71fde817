package hub

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// trickle writes one byte every 20 ms until write fails or done is closed: a Hub that never
// stalls long enough for a stall timeout, and never finishes.
func trickle(write func([]byte) error, done <-chan struct{}) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if write([]byte(" ")) != nil {
			return
		}
		select {
		case <-done:
			return
		case <-tick.C:
		}
	}
}

// trickleHub answers as hub does, except that it trickles the body of the revision API (api),
// or the headers of a HEAD on a resolve URL (head); with redirect, that HEAD is first
// redirected to the same URL with ?moved=1.
func trickleHub(t *testing.T, hub *fakeHub, api, head, redirect bool) *httptest.Server {
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case api && strings.HasPrefix(r.URL.Path, "/api/"):
			w.WriteHeader(http.StatusOK)
			trickle(func(b []byte) error {
				_, err := w.Write(b)
				w.(http.Flusher).Flush()
				return err
			}, mergeDone(done, r.Context().Done()))
		case head && r.Method == http.MethodHead && redirect && r.URL.Query().Get("moved") == "":
			http.Redirect(w, r, r.URL.Path+"?moved=1", http.StatusTemporaryRedirect)
		case head && r.Method == http.MethodHead:
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			if _, err := conn.Write([]byte("HTTP/1.1 200 OK\r\nX-Repo-Commit: " + testCommit + "\r\nX-Pad: ")); err != nil {
				return
			}
			trickle(func(b []byte) error { _, err := conn.Write(b); return err }, done)
		default:
			hub.serve(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // runs first: the trickling handlers end, then the server closes
	return srv
}

// mergeDone is closed when a or b is.
func mergeDone(a, b <-chan struct{}) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		select {
		case <-a:
		case <-b:
		}
		close(c)
	}()
	return c
}

// TestMetadataDeadline: a Hub that trickles its answer to a metadata request (the revision
// API's body, a HEAD's headers, after a redirect or not) a byte at a time, never stalling, is
// cut off at the metadata deadline (HF_HUB_ETAG_TIMEOUT, Options.MetadataTimeout, or
// OCTLM_HUB_TIMEOUT when HF_HUB_ETAG_TIMEOUT is unset); with the revision cached, the cached
// snapshot is used with a warning; without, the error names the deadline and the variable and
// matches ErrUnreachable.
func TestMetadataDeadline(t *testing.T) {
	clearHubEnv(t)
	hub := tinyHub(t)
	cache, snap := cachedTiny(t, hub)
	cases := []struct {
		name                string
		env                 string // the variable set to 0.2 s, if any
		option              bool   // MetadataTimeout: 200 ms
		api, head, redirect bool   // what trickles (see trickleHub)
		cached              bool
	}{
		{name: "API trickled, cached, " + EnvMetadataTimeout, env: EnvMetadataTimeout, api: true, cached: true},
		{name: "API trickled, cached, option", option: true, api: true, cached: true},
		{name: "API trickled, cached, " + EnvTimeout, env: EnvTimeout, api: true, cached: true},
		{name: "API trickled, not cached", env: EnvMetadataTimeout, api: true},
		{name: "HEAD trickled, not cached", env: EnvMetadataTimeout, head: true},
		{name: "HEAD redirected then trickled, not cached", env: EnvMetadataTimeout, head: true, redirect: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv(c.env, "0.2")
			}
			srv := trickleHub(t, hub, c.api, c.head, c.redirect)
			var progress bytes.Buffer
			opts := Options{Endpoint: srv.URL, CacheDir: t.TempDir(), Progress: &progress}
			if c.cached {
				opts.CacheDir = cache
			}
			if c.option {
				opts.MetadataTimeout = 200 * time.Millisecond
			}
			begin := time.Now()
			dir, err := resolveBounded(t, "Test/tiny-qwen3", opts)
			if took := time.Since(begin); took > 5*time.Second {
				t.Errorf("took %v with a metadata deadline of 0.2 s", took)
			}
			text := progress.String()
			if c.cached {
				if err != nil || dir != snap || !strings.Contains(text, "using the cached snapshot") {
					t.Fatalf("got %q, %v (progress %q); want the cached %s with a warning", dir, err, text, snap)
				}
			} else {
				if err == nil || !errors.Is(err, ErrUnreachable) {
					t.Fatalf("got %q, %v; want an error matching ErrUnreachable", dir, err)
				}
				text = err.Error()
			}
			named := EnvMetadataTimeout
			if c.env == EnvTimeout {
				named = EnvTimeout + ", " + EnvMetadataTimeout + " being unset"
			}
			for _, want := range []string{"no complete answer within 200ms", "deadline of a metadata request, set by " + named} {
				if !strings.Contains(text, want) {
					t.Errorf("%q lacks %q", text, want)
				}
			}
		})
	}
}

// dualListener serves TLS and plain HTTP on one port, told apart by the first byte a client
// sends (a TLS handshake record starts with 0x16): a redirect can then change the scheme only.
type dualListener struct {
	net.Listener
	tls *tls.Config
}

func (l dualListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	first, err := r.Peek(1)
	pc := &peekedConn{Conn: c, r: r}
	if err == nil && first[0] == 0x16 {
		return tls.Server(pc, l.tls), nil
	}
	return pc, nil
}

// peekedConn is a connection whose first bytes were read ahead into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// TestRedirects: a HEAD or GET on a resolve URL redirected with Location a protocol-relative
// reference ("//host:port/path"), an absolute path, a relative path ("../x", "x") or an
// absolute URL is resolved against the request's URL (RFC 3986) and followed. Within the
// endpoint's scheme, host and port the token goes along (the endpoint refuses requests without
// it); to another host, port or scheme it never does (the other server records the
// Authorization headers it received).
func TestRedirects(t *testing.T) {
	clearHubEnv(t)
	guarded := tinyHub(t) // the endpoint's files: the token is required
	guarded.token = "hf_secret"
	open := tinyHub(t) // the same files elsewhere, no token required
	const resolve = "/Test/tiny-qwen3/resolve/"

	var mu sync.Mutex
	var received []string          // "METHOD path: Authorization" of each request reaching another origin
	redirected := map[string]int{} // redirects given by the endpoint, by method
	other := func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received = append(received, r.Method+" "+r.URL.Path+": "+r.Header.Get("Authorization"))
		mu.Unlock()
		open.serve(w, r)
	}
	var location func(r *http.Request) string
	var status int
	endpointHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.TLS != nil: // the endpoint's host and port, but https
			other(w, r)
		case strings.HasPrefix(r.URL.Path, resolve) && r.URL.Query().Get("moved") == "":
			mu.Lock()
			redirected[r.Method]++
			loc, code := location(r), status
			mu.Unlock()
			w.Header().Set("Location", loc)
			w.WriteHeader(code)
		default:
			guarded.serve(w, r)
		}
	})
	// The certificate of a TLS test server, served by the endpoint's dual listener.
	certSrv := httptest.NewTLSServer(http.NotFoundHandler())
	certSrv.Close()
	endpoint := httptest.NewUnstartedServer(endpointHandler)
	endpoint.Listener = dualListener{Listener: endpoint.Listener, tls: certSrv.TLS}
	endpoint.Start()
	t.Cleanup(endpoint.Close)
	elsewhere := httptest.NewServer(http.HandlerFunc(other)) // 127.0.0.1, another port
	t.Cleanup(elsewhere.Close)
	endpointHost := strings.TrimPrefix(endpoint.URL, "http://")
	elsewhereHost := strings.TrimPrefix(elsewhere.URL, "http://")
	_, elsewherePort, _ := net.SplitHostPort(elsewhereHost)

	// A client that trusts the certificate and reaches the host other.test on 127.0.0.1.
	pool := x509.NewCertPool()
	pool.AddCert(certSrv.Certificate())
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: pool}
	dial := (&net.Dialer{Timeout: 5 * time.Second}).DialContext
	transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil && host == "other.test" {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		return dial(ctx, network, addr)
	}
	t.Cleanup(transport.CloseIdleConnections)
	client := &http.Client{Transport: transport}

	moved := func(p string) string { return p + "?moved=1" }
	cases := []struct {
		name     string
		status   int
		location func(r *http.Request) string
		cdn      string // where open sends LFS downloads: the other origin of the case
		leaves   bool   // the redirect leaves the endpoint's origin
	}{
		{"protocol-relative, same origin", http.StatusMovedPermanently, func(r *http.Request) string { return "//" + endpointHost + moved(r.URL.Path) }, "", false},
		{"absolute path", http.StatusFound, func(r *http.Request) string { return moved(r.URL.Path) }, "", false},
		{"relative, ../", http.StatusTemporaryRedirect, func(r *http.Request) string { return "../" + moved(strings.TrimPrefix(r.URL.Path, resolve)) }, "", false},
		{"relative, same folder", http.StatusPermanentRedirect, func(r *http.Request) string { return moved(path.Base(r.URL.Path)) }, "", false},
		{"absolute URL, same origin", http.StatusTemporaryRedirect, func(r *http.Request) string { return endpoint.URL + moved(r.URL.Path) }, "", false},
		{"protocol-relative, another host", http.StatusFound, func(r *http.Request) string { return "//other.test:" + elsewherePort + moved(r.URL.Path) }, elsewhere.URL, true},
		{"protocol-relative, another port", http.StatusFound, func(r *http.Request) string { return "//" + elsewhereHost + moved(r.URL.Path) }, elsewhere.URL, true},
		{"absolute URL, another port", http.StatusTemporaryRedirect, func(r *http.Request) string { return elsewhere.URL + moved(r.URL.Path) }, elsewhere.URL, true},
		{"absolute URL, another scheme", http.StatusTemporaryRedirect, func(r *http.Request) string { return "https://" + endpointHost + moved(r.URL.Path) }, "https://" + endpointHost, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			received, redirected = nil, map[string]int{}
			location, status, open.cdnURL = c.location, c.status, c.cdn
			mu.Unlock()
			cache := t.TempDir()
			dir, err := resolveBounded(t, "Test/tiny-qwen3", Options{Endpoint: endpoint.URL, CacheDir: cache, Token: guarded.token, Client: client})
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"config.json", "model.safetensors"} {
				if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, guarded.files[name]) {
					t.Errorf("%s: %d bytes, %v; want the Hub's %d", name, len(got), err, len(guarded.files[name]))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if redirected[http.MethodHead] == 0 || redirected[http.MethodGet] == 0 {
				t.Errorf("redirects given: %v; want HEAD and GET both redirected", redirected)
			}
			if c.leaves != (len(received) > 0) {
				t.Errorf("requests reaching another origin: %q; want some: %v", received, c.leaves)
			}
			for _, r := range received {
				if !strings.HasSuffix(r, ": ") {
					t.Errorf("the token reached another origin: %q", r)
				}
			}
		})
	}
}
