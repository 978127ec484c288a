package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/natsauth"
	"github.com/lava-operator/lava/internal/up"
)

// defaultNATSURL is the --nats-url default when neither $LAVA_NATS_URL nor
// <state-dir>/nats.url gives one.
const defaultNATSURL = "nats://127.0.0.1:4222"

// natsURLHelp is how every NATS-using command finds its server (in `lava --help` too).
const natsURLHelp = `--nats-url, else $LAVA_NATS_URL, else the URL lava up
wrote to <state-dir>/nats.url (--state-dir, default .lava) when that file exists, else
` + defaultNATSURL

// natsFlags are the connection flags of every command that reads NATS (receipts, state).
type natsFlags struct {
	url, creds, stateDir string
	nkey, identity       string
	ca, cert, key        string
	// wait and onWait are bus.ConnectOptions' Wait and OnWait (a command that waits for its
	// server, nats bootstrap, sets them).
	wait   time.Duration
	onWait func(error)
	// notUp marks a command that never reads what lava up serves (nats bootstrap: lava up
	// bootstraps its own server): a server it cannot reach is reported without the hint
	// about lava up.
	notUp bool
}

func (f *natsFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.url, "nats-url", "", "NATS server `URL` (default $LAVA_NATS_URL, else the one in <state-dir>/nats.url, else "+defaultNATSURL+")")
	fs.StringVar(&f.creds, "nats-creds", os.Getenv(bus.EnvNATSCreds), "NATS credentials `FILE` (default from $LAVA_NATS_CREDS)")
	fs.StringVar(&f.stateDir, "state-dir", ".lava", "lava up's state `DIR`, whose nats.url gives the NATS URL when --nats-url and $LAVA_NATS_URL are not set")
	fs.StringVar(&f.nkey, "nats-nkey", os.Getenv(bus.EnvNATSNKey), "NATS nkey seed `FILE` (default from $LAVA_NATS_NKEY, else <state-dir>/"+
		up.DirNATSCredentials+"/<identity>.nk when it exists)")
	fs.StringVar(&f.identity, "nats-identity", bus.IdentityBootstrap, "bus `IDENTITY` the seed belongs to (its reply inbox; docs/security.md)")
	fs.StringVar(&f.ca, "nats-ca", os.Getenv(bus.EnvNATSCA), "PEM CA `FILE` of the NATS server's certificate; set, TLS is required (default from $LAVA_NATS_CA)")
	fs.StringVar(&f.cert, "nats-cert", os.Getenv(bus.EnvNATSCert), "PEM client certificate `FILE` for mutual TLS (default from $LAVA_NATS_CERT)")
	fs.StringVar(&f.key, "nats-key", os.Getenv(bus.EnvNATSKey), "PEM key `FILE` of --nats-cert (default from $LAVA_NATS_KEY)")
}

// options are the bus.Connect options of the flags: the nkey seed is --nats-nkey, else lava
// up's seed of --nats-identity in the state directory when it exists.
func (f *natsFlags) options(url string) bus.ConnectOptions {
	nkey := f.nkey
	if nkey == "" {
		p := filepath.Join(f.stateDir, up.DirNATSCredentials, natsauth.SeedFileName(f.identity))
		if _, err := os.Stat(p); err == nil {
			nkey = p
		}
	}
	return bus.ConnectOptions{URL: url, CredsFile: f.creds, NKeyFile: nkey, Identity: f.identity, Name: "lava-cli",
		NoReconnect: true, CAFile: f.ca, CertFile: f.cert, KeyFile: f.key, Wait: f.wait, OnWait: f.onWait}
}

// resolveURL is the server URL and where it came from: --nats-url, $LAVA_NATS_URL,
// <state-dir>/nats.url or the default.
func (f *natsFlags) resolveURL() (url, from string) {
	if f.url != "" {
		return f.url, "--nats-url"
	}
	if u := os.Getenv(bus.EnvNATSURL); u != "" {
		return u, "$LAVA_NATS_URL"
	}
	p := filepath.Join(f.stateDir, up.FileNATSURL)
	if b, err := os.ReadFile(p); err == nil {
		if u := strings.TrimSpace(string(b)); u != "" {
			return u, p
		}
	}
	return defaultNATSURL, "the default"
}

// connect opens a connection (bus.Connect, the one connect path of every Lava process; no
// reconnection, a command reports a lost server) and a JetStream context; close the
// connection when done. A server that cannot be reached is an [unavailableError].
func (f *natsFlags) connect() (*nats.Conn, jetstream.JetStream, error) {
	url, from := f.resolveURL()
	nc, js, err := bus.Connect(f.options(url))
	if err != nil && f.notUp {
		return nil, nil, unavailable(fmt.Errorf("no NATS server at %s (URL from %s): %w", url, from, err))
	}
	if err != nil {
		return nil, nil, unavailable(fmt.Errorf("no NATS server at %s (URL from %s): %w; is `lava up` running? "+
			"`lava up` serves receipts and state only while it runs; otherwise give --nats-url", url, from, err))
	}
	return nc, js, nil
}

// unavailableError marks a failure to reach a server the command needs (exit code 3): neither
// the user's input nor the command line is wrong.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

// unavailable wraps err as a server-unavailable failure (exit code 3).
func unavailable(err error) error { return &unavailableError{err: err} }

// isUnavailable reports whether err is an [unavailableError].
func isUnavailable(err error) bool {
	var u *unavailableError
	return errors.As(err, &u)
}
