package natstest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// EnvServerBin names the environment variable holding the nats-server binary's path (set by
// the Makefile; built by `make tools-nats`).
const EnvServerBin = "LAVA_NATS_SERVER_BIN"

// startTimeout bounds how long a server may take to accept connections.
const startTimeout = 20 * time.Second

// Server is an in-process nats-server with JetStream, and one client connection to it.
type Server struct {
	srv  *server.Server
	conn *nats.Conn
	js   jetstream.JetStream
}

// RunJetStream starts an in-process nats-server with JetStream on a random loopback port, its
// store in tb.TempDir(), connects to it, and registers a cleanup that closes the connection and
// shuts the server down. A failure to start fails the test.
func RunJetStream(tb testing.TB) *Server {
	tb.Helper()
	s, err := StartJetStream(tb.TempDir())
	if err != nil {
		tb.Fatalf("natstest: %v", err)
	}
	tb.Cleanup(s.Shutdown)
	return s
}

// StartJetStream is [RunJetStream] for programs without a testing.TB (benchmark mains): it
// starts the server with its store in storeDir and connects. The caller calls Shutdown.
func StartJetStream(storeDir string) (*Server, error) { return Start(storeDir, Config{}) }

// Config is what [Run] and [Start] add to the plain server of [RunJetStream]: authorization
// (nkey users), TLS and a max_payload.
type Config struct {
	// Nkeys are the server's nkey users (natsauth.Users); set, an anonymous client is refused.
	Nkeys []*server.NkeyUser
	// TLS, if set, makes the server require TLS (with client certificates when its ClientAuth
	// asks for them).
	TLS *tls.Config
	// Client are the options of the server's own connection ([Server.Conn]): with Nkeys, the
	// credentials it connects with (the bootstrap identity's, say); with TLS, its CA.
	Client []nats.Option
	// MaxPayload, if set, is the server's max_payload in bytes (nats-server's default: 1 MiB).
	MaxPayload int32
}

// Run is [RunJetStream] with authorization and TLS from cfg.
func Run(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	s, err := Start(tb.TempDir(), cfg)
	if err != nil {
		tb.Fatalf("natstest: %v", err)
	}
	tb.Cleanup(s.Shutdown)
	return s
}

// Start is [Run] for programs without a testing.TB; the caller calls Shutdown.
func Start(storeDir string, cfg Config) (*Server, error) {
	opts := &server.Options{
		ServerName: "lava-test",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   storeDir,
		NoLog:      true,
		NoSigs:     true,
		Nkeys:      cfg.Nkeys,
		MaxPayload: cfg.MaxPayload,
	}
	if cfg.TLS != nil {
		opts.TLSConfig = cfg.TLS
		opts.TLS = true
		opts.TLSVerify = cfg.TLS.ClientAuth == tls.RequireAndVerifyClientCert
		opts.TLSTimeout = 5
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("new nats-server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(startTimeout) {
		srv.Shutdown()
		return nil, errors.New("nats-server not ready for connections")
	}
	nc, err := nats.Connect(srv.ClientURL(), append([]nats.Option{nats.Name("natstest")}, cfg.Client...)...)
	if err != nil {
		srv.Shutdown()
		return nil, fmt.Errorf("connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		srv.Shutdown()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &Server{srv: srv, conn: nc, js: js}, nil
}

// URL is the client URL (nats://127.0.0.1:PORT).
func (s *Server) URL() string { return s.srv.ClientURL() }

// Conn is the connection opened by RunJetStream.
func (s *Server) Conn() *nats.Conn { return s.conn }

// JetStream is a JetStream context on [Server.Conn].
func (s *Server) JetStream() jetstream.JetStream { return s.js }

// Connect opens another connection (a second "replica"), closed at the end of the test.
func (s *Server) Connect(tb testing.TB) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	return connect(tb, s.URL())
}

// DialInProcess opens a connection that talks to the server through memory instead of TCP
// (as `lava up` may run every service next to its embedded server), and a JetStream context
// on it. The caller closes the connection.
func (s *Server) DialInProcess() (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect("", nats.InProcessServer(s.srv), nats.Name("natstest-inprocess"))
	if err != nil {
		return nil, nil, fmt.Errorf("in-process connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}

// Shutdown closes the connection and stops the server. Safe to call twice.
func (s *Server) Shutdown() {
	s.conn.Close()
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}

func connect(tb testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		tb.Fatalf("natstest: connect %s: %v", url, err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}

// ObjectStoreBytes returns how many bytes the object store bucket of js holds now (its
// stream's size: content and metadata messages), failing the test when it cannot be read.
func ObjectStoreBytes(tb testing.TB, js jetstream.JetStream, bucket string) uint64 {
	tb.Helper()
	obs, err := js.ObjectStore(tb.Context(), bucket)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := obs.Status(tb.Context())
	if err != nil {
		tb.Fatal(err)
	}
	return st.Size()
}
