package bus

import (
	"cmp"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Environment variables every service reads its NATS connection from (docs/install.md).
const (
	// EnvNATSURL is the server URL(s), comma-separated ("nats://nats:4222").
	EnvNATSURL = "LAVA_NATS_URL"
	// EnvNATSCreds is an optional NATS credentials file (JWT and nkey seed).
	EnvNATSCreds = "LAVA_NATS_CREDS"
	// EnvNATSNKey is an optional nkey user seed file (natsauth.GenerateDir writes them; the
	// chart mounts one Secret per service).
	EnvNATSNKey = "LAVA_NATS_NKEY"
	// EnvNATSCA is an optional PEM file of the CA that signed the server's certificate; set, the
	// connection requires TLS.
	EnvNATSCA = "LAVA_NATS_CA"
	// EnvNATSCert and EnvNATSKey are an optional client certificate and its key (PEM) for
	// mutual TLS.
	EnvNATSCert = "LAVA_NATS_CERT"
	EnvNATSKey  = "LAVA_NATS_KEY"
)

// ConnectOptions configures [Connect]: how every Lava process (the services through
// svc.Common, `lava up`, the lava CLI) reaches NATS. New ways to authenticate or secure the
// connection are fields here, so every process gets them at once.
type ConnectOptions struct {
	// URL is one or more comma-separated server URLs. Required.
	URL string
	// CredsFile, if set, is a NATS credentials file.
	CredsFile string
	// Name is the connection name the server shows (the service and pod, for example).
	Name string
	// Identity, if set, is the bus identity the connection acts as (a service name,
	// IdentitySubscriber or IdentityBootstrap): its replies use [InboxPrefix](Identity), the
	// only inbox [Topology.Permissions] lets it read.
	Identity string
	// NKeyFile, if set, is an nkey user seed file; the server challenges the connection to
	// sign with it.
	NKeyFile string
	// CAFile, if set, is the PEM CA the server's certificate must chain to; TLS is then
	// required. CertFile and KeyFile, if set (both), are the client's certificate and key for
	// mutual TLS.
	CAFile, CertFile, KeyFile string
	// NoReconnect fails the connection's operations once it is lost instead of reconnecting
	// (a command-line client that should report the lost server, not wait for it).
	NoReconnect bool
	// Wait, if positive, is how long the first connection waits for a server that does not
	// answer yet (refused, unreachable, not yet listening: a pod whose first connections a
	// NetworkPolicy controller refuses until it has seen its address, servers still
	// starting): nats.go's RetryOnFailedConnect tries again at the reconnect pace, and after
	// Wait the error names the last failure. NoReconnect does not apply then (the retries are
	// reconnects). Zero: the first connection fails at once.
	Wait time.Duration
	// OnWait, if set with Wait, is called once when the first attempt failed and the
	// connection waits, with that attempt's error (a command line tells its user).
	OnWait func(error)
}

// Connect opens a connection that reconnects forever (every second, jittered) after it was
// first established (unless NoReconnect), and a JetStream context on it. It fails if the
// first connection cannot be made (within Wait, when set), so a service that starts without
// its broker exits and is restarted. Errors: "bus: no NATS URL ...", "bus: connect to URL: ..." (wrapping nats.go's),
// "bus: jetstream: ...".
func Connect(opts ConnectOptions) (*nats.Conn, jetstream.JetStream, error) {
	if opts.URL == "" {
		return nil, nil, errors.New("bus: no NATS URL (set " + EnvNATSURL + ")")
	}
	nopts := []nats.Option{
		nats.Name(opts.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
	}
	var connected chan struct{}
	var attempts *failedAttempts
	switch {
	case opts.Wait > 0:
		connected = make(chan struct{})
		attempts = &failedAttempts{first: make(chan struct{})}
		var once sync.Once
		nopts = append(nopts, nats.RetryOnFailedConnect(true),
			nats.ConnectHandler(func(*nats.Conn) { once.Do(func() { close(connected) }) }),
			nats.ReconnectErrHandler(func(_ *nats.Conn, err error) { attempts.record(err) }))
	case opts.NoReconnect:
		nopts = append(nopts, nats.NoReconnect())
	}
	if opts.CredsFile != "" {
		nopts = append(nopts, nats.UserCredentials(opts.CredsFile))
	}
	if opts.Identity != "" {
		nopts = append(nopts, nats.CustomInboxPrefix(InboxPrefix(opts.Identity)))
	}
	if opts.NKeyFile != "" {
		o, err := nats.NkeyOptionFromSeed(opts.NKeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("bus: nkey seed %s: %w", opts.NKeyFile, err)
		}
		nopts = append(nopts, o)
	}
	if opts.CAFile != "" {
		nopts = append(nopts, nats.RootCAs(opts.CAFile))
	}
	if (opts.CertFile == "") != (opts.KeyFile == "") {
		return nil, nil, errors.New("bus: a client certificate needs both a certificate and a key file")
	}
	if opts.CertFile != "" {
		nopts = append(nopts, nats.ClientCert(opts.CertFile, opts.KeyFile))
	}
	nc, err := nats.Connect(opts.URL, nopts...)
	if err != nil {
		return nil, nil, fmt.Errorf("bus: connect to %s: %w", opts.URL, err)
	}
	if connected != nil && !nc.IsConnected() {
		timer := time.NewTimer(opts.Wait)
		defer timer.Stop()
		first := attempts.first
	wait:
		for {
			select {
			case <-connected:
				break wait
			case <-first:
				first = nil
				if opts.OnWait != nil {
					opts.OnWait(attempts.last(nc))
				}
			case <-timer.C:
				last := attempts.last(nc)
				nc.Close()
				return nil, nil, fmt.Errorf("bus: connect to %s: no server answered within %s: %w", opts.URL, opts.Wait, last)
			}
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("bus: jetstream: %w", err)
	}
	return nc, js, nil
}

// failedAttempts records the failed attempts of a first connection that waits for its server
// (ConnectOptions.Wait): nats.go reports each one, with the dial, TLS or authorization error,
// to its reconnect error handler, while the connection itself only knows that no server
// answered (nats.ErrNoServers).
type failedAttempts struct {
	// first is closed at the first failed attempt.
	first chan struct{}

	mu  sync.Mutex
	err error
}

func (a *failedAttempts) record(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		close(a.first)
	}
	a.err = cmp.Or(err, nats.ErrNoServers)
}

// last is the error of the last failed attempt, else nc's, else nats.ErrNoServers. nats.go
// reports a refused first attempt as nats.ErrNoServers, and every later one with its error.
func (a *failedAttempts) last(nc *nats.Conn) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return cmp.Or(a.err, nc.LastError(), nats.ErrNoServers)
}
