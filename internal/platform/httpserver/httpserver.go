package httpserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/net/netutil"
)

// The default limits of every Lava HTTP server. Flags that set them ([Limits.Register]) take
// these as their defaults; a zero field of [Limits] means its default.
const (
	// DefaultMaxConns is the connections a listener holds open at once.
	DefaultMaxConns = 128
	// DefaultMaxConnsPerClient is the connections one remote IP address holds open at once.
	DefaultMaxConnsPerClient = 32
	// DefaultReadHeaderTimeout bounds reading a request's header, and the wait for the first
	// request on a new connection.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole request, header and body.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds a request from the end of its header to the end of the
	// response.
	DefaultWriteTimeout = time.Minute
	// DefaultIdleTimeout closes a keep-alive connection with no request for this long.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxHeaderBytes bounds a request's header (HTTP/1.1 request line and header
	// fields; the HTTP/2 header list).
	DefaultMaxHeaderBytes = 64 << 10
	// ShutdownTimeout is how long [Run] waits for in-flight requests after its context ends.
	ShutdownTimeout = 10 * time.Second
)

// HTTP/2 (cleartext, where a server enables it) settings of every server: the streams one
// connection may have open, and the request body bytes the server buffers for a connection
// and for a stream before its handler reads them.
const (
	http2MaxConcurrentStreams      = 64
	http2MaxReceiveBufferPerConn   = 256 << 10
	http2MaxReceiveBufferPerStream = 256 << 10
)

// Limits bounds an HTTP server: the connections it holds open, in total and per client (the
// remote IP address: behind a proxy, the proxy), and how long and how much it reads. A zero
// field takes its Default* value ([Limits.WithDefaults]).
type Limits struct {
	// MaxConns is the connections the listener holds open at once
	// (golang.org/x/net/netutil.LimitListener). Beyond it a new connection is not accepted:
	// it waits in the kernel's accept queue until another closes (an idle one closes after
	// ReadHeaderTimeout or IdleTimeout), so the process's file descriptors stay bounded.
	MaxConns int
	// MaxConnsPerClient is the connections one remote IP address holds open at once; a
	// connection beyond it is closed as soon as it is accepted.
	MaxConnsPerClient int
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are http.Server's.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes is http.Server's (bytes).
	MaxHeaderBytes int
}

// WithDefaults returns l with every zero (or negative) field set to its Default* value.
func (l Limits) WithDefaults() Limits {
	orInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	orDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	orInt(&l.MaxConns, DefaultMaxConns)
	orInt(&l.MaxConnsPerClient, DefaultMaxConnsPerClient)
	orInt(&l.MaxHeaderBytes, DefaultMaxHeaderBytes)
	orDur(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	orDur(&l.ReadTimeout, DefaultReadTimeout)
	orDur(&l.WriteTimeout, DefaultWriteTimeout)
	orDur(&l.IdleTimeout, DefaultIdleTimeout)
	return l
}

// Register defines the flags of l on fs, each named prefix + its name ("rpc-" gives
// --rpc-max-connections, --rpc-max-connections-per-client, --rpc-read-header-timeout,
// --rpc-read-timeout, --rpc-write-timeout, --rpc-idle-timeout, --rpc-max-header-bytes), with
// the Default* values; what names the server in the help texts ("RPC").
func (l *Limits) Register(fs *pflag.FlagSet, prefix, what string) {
	fs.IntVar(&l.MaxConns, prefix+"max-connections", DefaultMaxConns, what+" connections held open at once; more wait in the kernel's accept queue")
	fs.IntVar(&l.MaxConnsPerClient, prefix+"max-connections-per-client", DefaultMaxConnsPerClient, what+" connections one remote IP address holds open at once; more are closed")
	fs.DurationVar(&l.ReadHeaderTimeout, prefix+"read-header-timeout", DefaultReadHeaderTimeout, what+" time to read a request header (and to wait for a new connection's first request)")
	fs.DurationVar(&l.ReadTimeout, prefix+"read-timeout", DefaultReadTimeout, what+" time to read a whole request")
	fs.DurationVar(&l.WriteTimeout, prefix+"write-timeout", DefaultWriteTimeout, what+" time from the end of a request header to the end of the response")
	fs.DurationVar(&l.IdleTimeout, prefix+"idle-timeout", DefaultIdleTimeout, what+" time a keep-alive connection may stay idle")
	fs.IntVar(&l.MaxHeaderBytes, prefix+"max-header-bytes", DefaultMaxHeaderBytes, what+" request header size limit, in bytes")
}

// Listener returns ln bounded by l's MaxConns (netutil.LimitListener) and MaxConnsPerClient.
// Closing it closes ln.
func (l Limits) Listener(ln net.Listener) net.Listener {
	l = l.WithDefaults()
	return &perClientListener{Listener: netutil.LimitListener(ln, l.MaxConns), open: NewCounter(l.MaxConnsPerClient)}
}

// Server returns an http.Server for h with l's timeouts and header limit, and bounded HTTP/2
// streams and receive buffers for when HTTP/2 is enabled (64 streams per connection, 256 KiB
// of unread request body per connection and per stream). Serve it on [Limits.Listener] (as
// [Serve] does).
func (l Limits) Server(h http.Handler) *http.Server {
	l = l.WithDefaults()
	return &http.Server{Handler: h, ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout,
		WriteTimeout: l.WriteTimeout, IdleTimeout: l.IdleTimeout, MaxHeaderBytes: l.MaxHeaderBytes,
		HTTP2: &http.HTTP2Config{MaxConcurrentStreams: http2MaxConcurrentStreams,
			MaxReceiveBufferPerConnection: http2MaxReceiveBufferPerConn, MaxReceiveBufferPerStream: http2MaxReceiveBufferPerStream}}
}

// Serve serves h on ln with l ([Limits.Listener], [Limits.Server]) until ctx is done
// ([Run]).
func Serve(ctx context.Context, ln net.Listener, h http.Handler, l Limits) error {
	return Run(ctx, l.Listener(ln), l.Server(h))
}

// Run serves srv on ln until ctx is done, then shuts srv down, waiting at most
// [ShutdownTimeout] for in-flight requests. It returns nil after a clean shutdown; an error
// naming ln's address if serving or the shutdown failed.
func Run(ctx context.Context, ln net.Listener, srv *http.Server) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("httpserver: serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("httpserver: shutdown %s: %w", ln.Addr(), err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("httpserver: serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// ClientKey is the client an address ("host:port", as net.Conn.RemoteAddr and
// http.Request.RemoteAddr give it) stands for: its host; an address without a port is its
// own key.
func ClientKey(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// Counter counts what each key (a client, an identity) holds, up to a maximum per key. Safe
// for concurrent use.
type Counter struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

// NewCounter returns a Counter allowing limit per key (a limit below 1 allows 1).
func NewCounter(limit int) *Counter { return &Counter{max: limit, n: map[string]int{}} }

// Acquire counts one more for key and reports true, or reports false (and counts nothing)
// when key already holds the maximum.
func (c *Counter) Acquire(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key] >= max(c.max, 1) {
		return false
	}
	c.n[key]++
	return true
}

// Release counts one less for key (after a successful [Counter.Acquire]).
func (c *Counter) Release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key]--; c.n[key] <= 0 {
		delete(c.n, key)
	}
}

// perClientListener closes an accepted connection whose remote IP address already holds its
// maximum of open connections.
type perClientListener struct {
	net.Listener
	open *Counter
}

func (l *perClientListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := ClientKey(c.RemoteAddr().String())
		if !l.open.Acquire(key) {
			_ = c.Close() // refused: this client holds its maximum
			continue
		}
		return &countedConn{Conn: c, release: sync.OnceFunc(func() { l.open.Release(key) })}, nil
	}
}

// countedConn releases its client's count once, on the first Close, before the connection's
// listener slot: a connection accepted into the freed slot then never finds its client's count
// still holding the closed one.
type countedConn struct {
	net.Conn
	release func()
}

func (c *countedConn) Close() error {
	c.release()
	return c.Conn.Close()
}
