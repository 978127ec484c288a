package rpcauth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/gen/lava/v1/lavav1connect"
	"github.com/lava-operator/lava/internal/platform/httpserver"
	"github.com/lava-operator/lava/internal/platform/rpcauth"
	"github.com/lava-operator/lava/internal/platform/testutil/conntest"
	"github.com/lava-operator/lava/internal/service/synth"
)

// The attacks below run against the real RenderService behind the guard, with `lava up`'s
// static token (no API server); rpcauth_integration_test.go runs them with TokenReview.
const staticToken = "the-static-token"

// serveRender serves RenderService behind g on a loopback port until the test ends and
// returns its base URL.
func serveRender(t *testing.T, g rpcauth.Guard) string {
	t.Helper()
	if g.Verbs == nil {
		g.Verbs = map[string]string{lavav1connect.RenderServiceRenderProcedure: "create"}
	}
	mux := http.NewServeMux()
	mux.Handle(synth.NewRenderHandler(nil, g.HandlerOptions()...))
	return "http://" + conntest.Listen(t, func(ctx context.Context, ln net.Listener) error { return g.Serve(ctx, ln, mux) })
}

// renderMessage is a valid RenderRequest for namespace ns, marshalled.
func renderMessage(t *testing.T, ns string) []byte {
	t.Helper()
	b, err := proto.Marshal(&lavav1.RenderRequest{Source: &lavav1.RenderRequest_Name{Name: "aws-vpc-network"}, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rpc is one raw Render call: over the connect protocol (HTTP/1.1, application/proto) or
// gRPC (cleartext HTTP/2), from a loopback address, with a body the test controls.
type rpc struct {
	grpc  bool
	from  string // loopback source address; "" is 127.0.0.1
	token string // "" sends no Authorization header
	// body and length: the request body and its Content-Length (-1: unknown, chunked).
	body   io.Reader
	length int64
	// admitted, if set, makes the request wait for the server's 100 Continue before it sends
	// its body (Expect: 100-continue; the server sends it when connect first reads the body,
	// so after every check of the guard) and is called then.
	admitted func()
}

// transport is an HTTP/1.1 (or, with h2c, cleartext HTTP/2) transport whose connections come
// from the loopback address from.
func transport(from string, h2c bool) *http.Transport {
	tr := &http.Transport{DialContext: conntest.Dialer(from).DialContext}
	if h2c {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	return tr
}

// do sends r to base within ctx and returns the connect code of the answer (0: success) or
// the transport's error.
func (r rpc) do(ctx context.Context, t *testing.T, base string) (connect.Code, error) {
	from := r.from
	if from == "" {
		from = "127.0.0.1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+lavav1connect.RenderServiceRenderProcedure, r.body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = r.length
	req.Header.Set("Content-Type", "application/proto")
	if r.grpc {
		req.Header.Set("Content-Type", "application/grpc")
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	tr := transport(from, r.grpc)
	if r.admitted != nil {
		req.Header.Set("Expect", "100-continue")
		tr.ExpectContinueTimeout = time.Minute
		req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{Got100Continue: r.admitted}))
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, err
	}
	if r.grpc {
		status := resp.Trailer.Get("Grpc-Status")
		if status == "" {
			status = resp.Header.Get("Grpc-Status")
		}
		n, err := strconv.Atoi(status)
		if err != nil {
			return 0, fmt.Errorf("gRPC answer %d without a grpc-status: %q", resp.StatusCode, body)
		}
		return connect.Code(n), nil
	}
	if resp.StatusCode == http.StatusOK {
		return 0, nil
	}
	var e struct{ Code connect.Code }
	if err := json.Unmarshal(body, &e); err != nil {
		return 0, fmt.Errorf("connect answer %d: %q: %w", resp.StatusCode, body, err)
	}
	return e.Code, nil
}

// caller is who sends Render requests: from a loopback address, with a token, for a
// namespace.
type caller struct{ from, token, ns string }

// as is the caller from from with token, for namespace "team-a" (any namespace will do for
// the static token).
func as(from, token string) caller { return caller{from: from, token: token, ns: "team-a"} }

// render sends a complete, valid Render request to base.
func (c caller) render(ctx context.Context, t *testing.T, base string) (connect.Code, error) {
	msg := renderMessage(t, c.ns)
	return rpc{from: c.from, token: c.token, body: bytes.NewReader(msg), length: int64(len(msg))}.do(ctx, t, base)
}

// stall returns a body that sends nothing until ctx ends (then it fails, so that the client
// gives up its request).
func stall(ctx context.Context) io.Reader {
	r, w := io.Pipe()
	context.AfterFunc(ctx, func() { _ = w.CloseWithError(ctx.Err()) })
	return r
}

// TestGuard_refusesBeforeReadingTheBody: a request without a token, with a token the
// authenticator rejects, or declaring a body above the limit is answered at once, in its
// protocol, while its body has not been sent at all: the server reads no byte of it.
func TestGuard_refusesBeforeReadingTheBody(t *testing.T) {
	t.Parallel()
	base := serveRender(t, rpcauth.Guard{Authn: rpcauth.Static{Token: staticToken}, Authz: rpcauth.Static{Token: staticToken}})
	const limit = rpcauth.DefaultMaxRequestBytes
	tests := []struct {
		name string
		rpc  rpc
		want connect.Code
	}{
		{"connect, no token", rpc{length: limit}, connect.CodeUnauthenticated},
		{"connect, wrong token", rpc{token: "forged", length: limit}, connect.CodeUnauthenticated},
		{"connect, body unsized", rpc{token: "forged", length: -1}, connect.CodeUnauthenticated},
		{"gRPC, no token", rpc{grpc: true, length: limit + 5}, connect.CodeUnauthenticated},
		{"gRPC, wrong token", rpc{grpc: true, token: "forged", length: limit + 5}, connect.CodeUnauthenticated},
		{"connect, valid token, too large", rpc{token: staticToken, length: 2 * limit}, connect.CodeResourceExhausted},
		{"gRPC, valid token, too large", rpc{grpc: true, token: staticToken, length: limit + 6}, connect.CodeResourceExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			tt.rpc.body = stall(ctx)
			got, err := tt.rpc.do(ctx, t, base)
			if err != nil {
				t.Fatalf("no answer before the body was sent: %v", err)
			}
			if got != tt.want {
				t.Errorf("code %v, want %v", got, tt.want)
			}
		})
	}
}

// repeat is an endless reader of one byte.
type repeat byte

func (r repeat) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// anonymousFlood sends n concurrent 4 MiB requests (rpcauth.DefaultMaxRequestBytes, the
// limit: none is refused for its size) with token (none, or one the authenticator rejects),
// their bodies generated as they are sent, and returns the bytes the whole process allocated
// meanwhile (runtime.MemStats.TotalAlloc). Every answer must be Unauthenticated; a request
// the server cut off while it was still sending counts too (the server closes a connection
// whose body it did not read).
func anonymousFlood(t *testing.T, base, token string, n int) uint64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	codes := make([]connect.Code, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			r := rpc{token: token, body: io.LimitReader(repeat('x'), rpcauth.DefaultMaxRequestBytes), length: rpcauth.DefaultMaxRequestBytes}
			codes[i], errs[i] = r.do(ctx, t, base)
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	cut := 0
	for i := range n {
		switch {
		case errs[i] != nil && !errors.Is(errs[i], context.DeadlineExceeded):
			cut++
		case errs[i] != nil:
			t.Errorf("request %d: no answer: %v", i, errs[i])
		case codes[i] != connect.CodeUnauthenticated:
			t.Errorf("request %d: code %v, want unauthenticated", i, codes[i])
		}
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d anonymous 4 MiB requests: %d answered Unauthenticated, %d cut off; the process allocated %d KiB", n, n-cut, cut, alloc>>10)
	return alloc
}

// Flood figures: floodRequests anonymous 4 MiB requests at once may make the whole test
// process (server and clients) allocate at most floodAllocBound; a server that read the
// bodies would allocate at least floodRequests * 4 MiB (256 MiB).
const (
	floodRequests   = 64
	floodAllocBound = 32 << 20
)

// TestGuard_anonymousFlood bounds the memory of an anonymous flood: 64 anonymous 4 MiB requests
// at once (without a token and with a forged one) allocate under 32 MiB in the whole process,
// as the server refuses each before reading its body. The in-flight limits are raised so that
// authentication, not the concurrency limit, refuses them.
func TestGuard_anonymousFlood(t *testing.T) {
	g := rpcauth.Guard{Authn: rpcauth.Static{Token: staticToken}, Authz: rpcauth.Static{Token: staticToken},
		Limits: rpcauth.Limits{MaxInFlight: floodRequests, MaxInFlightPerClient: floodRequests,
			Server: httpserver.Limits{MaxConns: 2 * floodRequests, MaxConnsPerClient: 2 * floodRequests}}}
	base := serveRender(t, g)
	for _, token := range []string{"", "forged"} {
		if alloc := anonymousFlood(t, base, token, floodRequests); alloc > floodAllocBound {
			t.Errorf("token %q: %d anonymous 4 MiB requests made the process allocate %d MiB, want under %d MiB",
				token, floodRequests, alloc>>20, floodAllocBound>>20)
		}
	}
}

// held is a request the guard has admitted and whose body is held back: it keeps its
// in-flight slots until released, then completes as a valid render.
type held struct {
	w    *io.PipeWriter
	msg  []byte
	done chan error
}

// hold starts a Render by c and returns once the guard has admitted it (the server asked for
// its body); its body waits for release.
func (c caller) hold(t *testing.T, base string) *held {
	t.Helper()
	r, w := io.Pipe()
	t.Cleanup(func() { _ = w.Close() })
	h := &held{w: w, msg: renderMessage(t, c.ns), done: make(chan error, 1)}
	admitted := make(chan struct{})
	go func() {
		code, err := rpc{from: c.from, token: c.token, body: r, length: int64(len(h.msg)), admitted: func() { close(admitted) }}.do(t.Context(), t, base)
		if err == nil && code != 0 {
			err = fmt.Errorf("code %v", code)
		}
		h.done <- err
	}()
	select {
	case <-admitted:
	case err := <-h.done:
		t.Fatalf("a request to hold from %s was not admitted: %v", c.from, err)
	}
	return h
}

// release sends the held request's body; it must then render.
func (h *held) release(t *testing.T) {
	t.Helper()
	go func() {
		_, _ = h.w.Write(h.msg)
		_ = h.w.Close()
	}()
	if err := <-h.done; err != nil {
		t.Errorf("a held request, released: %v", err)
	}
}

// refused renders as c and fails the test unless the answer is want.
func (c caller) refused(t *testing.T, base string, want connect.Code) {
	t.Helper()
	if code, err := c.render(t.Context(), t, base); err != nil || code != want {
		t.Errorf("render from %s: code %v (%v), want %v", c.from, code, err, want)
	}
}

// served renders as c and fails the test unless it succeeds.
func (c caller) served(t *testing.T, base string) {
	t.Helper()
	if code, err := c.render(t.Context(), t, base); err != nil || code != 0 {
		t.Fatalf("render from %s: code %v, %v", c.from, code, err)
	}
}

// TestGuard_inFlightLimits: requests beyond the in-flight limit of an address, of a user or of
// the server are refused at once (ResourceExhausted, Unavailable), not queued; once the held
// requests complete, the same caller is served.
func TestGuard_inFlightLimits(t *testing.T) {
	t.Parallel()
	static := rpcauth.Static{Token: staticToken}
	t.Run("per client", func(t *testing.T) {
		base := serveRender(t, rpcauth.Guard{Authn: static, Authz: static, Limits: rpcauth.Limits{MaxInFlight: 8, MaxInFlightPerClient: 2}})
		attacker := as("127.0.0.2", staticToken)
		a, b := attacker.hold(t, base), attacker.hold(t, base)
		attacker.refused(t, base, connect.CodeResourceExhausted)
		// the same user from another address: its per-user limit
		as("127.0.0.3", staticToken).refused(t, base, connect.CodeResourceExhausted)
		// no token: refused as unauthenticated before any limit
		as("127.0.0.2", "").refused(t, base, connect.CodeUnauthenticated)
		a.release(t)
		b.release(t)
		attacker.served(t, base)
	})
	t.Run("server", func(t *testing.T) {
		base := serveRender(t, rpcauth.Guard{Authn: static, Authz: static, Limits: rpcauth.Limits{MaxInFlight: 2, MaxInFlightPerClient: 4}})
		a, b := as("127.0.0.2", staticToken).hold(t, base), as("127.0.0.3", staticToken).hold(t, base)
		other := as("127.0.0.4", staticToken)
		other.refused(t, base, connect.CodeUnavailable)
		a.release(t)
		b.release(t)
		other.served(t, base)
	})
}

// TestGuard_idleConnectionFlood: the RPC listener holds at most
// httpserver.DefaultMaxConnsPerClient idle connections of one address (the file-descriptor
// attack: the trial's 20,000 exhausted the descriptors), and renders for another address at
// once.
func TestGuard_idleConnectionFlood(t *testing.T) {
	t.Parallel()
	static := rpcauth.Static{Token: staticToken}
	base := serveRender(t, rpcauth.Guard{Authn: static, Authz: static})
	addr := base[len("http://"):]
	conntest.Flood(t, addr, []string{"127.0.0.2"}, 4*httpserver.DefaultMaxConnsPerClient, httpserver.DefaultMaxConnsPerClient,
		func() { as("127.0.0.1", staticToken).served(t, base) })
}

// TestGuard_interceptorFailsClosed: connect handlers built with HandlerOptions but served
// without the guard's middleware refuse every request, even one with the valid token.
func TestGuard_interceptorFailsClosed(t *testing.T) {
	t.Parallel()
	static := rpcauth.Static{Token: staticToken}
	g := rpcauth.Guard{Authn: static, Authz: static, Verbs: map[string]string{lavav1connect.RenderServiceRenderProcedure: "create"}}
	mux := http.NewServeMux()
	mux.Handle(synth.NewRenderHandler(nil, g.HandlerOptions()...))
	base := "http://" + conntest.Listen(t, func(ctx context.Context, ln net.Listener) error {
		return httpserver.Serve(ctx, ln, mux, httpserver.Limits{})
	})
	as("127.0.0.1", staticToken).refused(t, base, connect.CodeUnauthenticated)
}

// Without a way to authenticate callers (no Kubernetes access, no token file) New gives no
// guard but ErrNoAuthenticator, on which synth and attest leave their RPCs unserved; with a
// token file it authenticates by that token.
func TestNew_withoutAnAuthenticatorThereIsNoGuard(t *testing.T) {
	t.Parallel()
	g, err := rpcauth.New(nil, "", nil, rpcauth.Limits{})
	if !errors.Is(err, rpcauth.ErrNoAuthenticator) {
		t.Fatalf("New(nil, \"\"): err %v, want ErrNoAuthenticator", err)
	}
	if g.Authn != nil || g.Authz != nil {
		t.Fatalf("New(nil, \"\") returned a guard that authenticates: %+v", g)
	}
	if _, err := rpcauth.New(nil, filepath.Join(t.TempDir(), "missing"), nil, rpcauth.Limits{}); err == nil ||
		errors.Is(err, rpcauth.ErrNoAuthenticator) {
		t.Fatalf("New with a missing token file: err %v, want the file's error", err)
	}
}
