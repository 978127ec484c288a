package httpserver_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/lava-operator/lava/internal/platform/httpserver"
	"github.com/lava-operator/lava/internal/platform/testutil/conntest"
)

// serve serves a handler answering "ok" with l on a loopback port until the test ends and
// returns the address.
func serve(t *testing.T, l httpserver.Limits) string {
	t.Helper()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	return conntest.Listen(t, func(ctx context.Context, ln net.Listener) error { return httpserver.Serve(ctx, ln, ok, l) })
}

// get asks addr for / from the loopback address from within d and fails the test unless it
// answers "ok".
func get(t *testing.T, addr, from string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := conntest.Serve(t, from, req, http.StatusOK); body != "ok" {
		t.Fatalf("a legitimate request from %s: %q", from, body)
	}
}

// TestServe_idleConnectionFlood is the file-descriptor attack (idle connections that send
// nothing): one address's connections beyond MaxConnsPerClient are closed at once and another
// address is served at once; connections from many addresses beyond MaxConns are not accepted
// (the process holds at most MaxConns), the idle ones are closed after ReadHeaderTimeout, and
// a legitimate request is served after that.
func TestServe_idleConnectionFlood(t *testing.T) {
	t.Run("one client", func(t *testing.T) {
		const perClient, attack = 8, 200
		addr := serve(t, httpserver.Limits{MaxConns: 64, MaxConnsPerClient: perClient})
		conns := conntest.Flood(t, addr, []string{"127.0.0.2"}, attack, perClient, func() { get(t, addr, "127.0.0.1", 5*time.Second) })
		if closed := conntest.Closed(conns, 2*time.Second); closed < attack-perClient {
			t.Errorf("%d connections beyond the per-client limit were closed, want %d", closed, attack-perClient)
		}
	})
	t.Run("many clients", func(t *testing.T) {
		const total = 32
		addr := serve(t, httpserver.Limits{MaxConns: total, MaxConnsPerClient: 16, ReadHeaderTimeout: time.Second})
		// 48 connections; the legitimate request waits for idle ones to time out
		conns := conntest.Flood(t, addr, []string{"127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"}, 12, total,
			func() { get(t, addr, "127.0.0.1", 10*time.Second) })
		if closed := conntest.Closed(conns, 5*time.Second); closed != len(conns) {
			t.Errorf("%d of %d idle connections were closed after the header timeout", closed, len(conns))
		}
	})
}

// TestLimits_withDefaults: a zero Limits is the Default* constants, and Register's flags
// default to the same values.
func TestLimits_withDefaults(t *testing.T) {
	want := httpserver.Limits{MaxConns: httpserver.DefaultMaxConns, MaxConnsPerClient: httpserver.DefaultMaxConnsPerClient,
		ReadHeaderTimeout: httpserver.DefaultReadHeaderTimeout, ReadTimeout: httpserver.DefaultReadTimeout,
		WriteTimeout: httpserver.DefaultWriteTimeout, IdleTimeout: httpserver.DefaultIdleTimeout, MaxHeaderBytes: httpserver.DefaultMaxHeaderBytes}
	if got := (httpserver.Limits{}).WithDefaults(); got != want {
		t.Errorf("zero Limits with defaults = %+v, want %+v", got, want)
	}
	var l httpserver.Limits
	fs := newFlagSet()
	l.Register(fs, "rpc-", "RPC")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if l != want {
		t.Errorf("flag defaults = %+v, want %+v", l, want)
	}
	if err := fs.Parse([]string{"--rpc-max-connections=7", "--rpc-read-timeout=3s"}); err != nil {
		t.Fatal(err)
	}
	if l.MaxConns != 7 || l.ReadTimeout != 3*time.Second {
		t.Errorf("after --rpc-max-connections=7 --rpc-read-timeout=3s: %+v", l)
	}
}

func newFlagSet() *pflag.FlagSet { return pflag.NewFlagSet("test", pflag.ContinueOnError) }

// TestListener_closeFreesClientBeforeSlot: with MaxConnsPerClient equal to MaxConns, a
// client whose connection closes is never refused its next one. Closing a held connection
// frees its client's count before its listener slot, so the connection accepted into the
// freed slot finds the count already lowered (the other order refused it now and then: a reset
// for a legitimate client behind its own idle connections).
func TestListener_closeFreesClientBeforeSlot(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := httpserver.Limits{MaxConns: 1, MaxConnsPerClient: 1}.Listener(inner)
	defer ln.Close()
	held, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	cur, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 3000
	for i := range rounds {
		next, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := next.Write([]byte{'x'}); err != nil {
			t.Fatal(err)
		}
		accepted := make(chan net.Conn, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}()
		time.Sleep(time.Millisecond) // Accept is waiting for the slot
		_ = cur.Close()
		// A refused connection is closed by the listener, which then waits for another.
		select {
		case cur = <-accepted:
		case <-time.After(2 * time.Second):
			var b [1]byte
			_, err := next.Read(b[:])
			t.Fatalf("round %d: the listener refused a connection of a client that held none (read: %v)", i, err)
		}
		if cur.RemoteAddr().String() != next.LocalAddr().String() {
			t.Fatalf("round %d: accepted %s, want %s", i, cur.RemoteAddr(), next.LocalAddr())
		}
		_ = next.Close()
		_ = held.Close()
		held = next
	}
	_ = cur.Close()
}
