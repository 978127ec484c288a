// Package conntest attacks a server's listener with idle connections on loopback and counts
// the connections the server holds, for the connection-limit tests of every Lava listener
// (internal/platform/httpserver and its users).
//
// [Listen] runs a server on a loopback port for the test's lifetime. Clients dial from a
// loopback address of their choice (127.0.0.2, 127.0.0.3, ...: Linux routes all of
// 127.0.0.0/8 to lo; [Dialer], [Client], [Serve]), so one test can play an attacker and a
// legitimate client with different addresses. [Flood] is the attack: [Idle] connections, a
// legitimate request, and a bound on what the server holds ([Held], read from the kernel's
// socket table /proc/net/tcp, so it needs Linux; elsewhere it fails the test).
package conntest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Dialer returns a dialer whose connections come from the loopback address from
// ("127.0.0.2").
func Dialer(from string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
}

// Client returns an HTTP/1.1 client whose connections come from from.
func Client(from string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: Dialer(from).DialContext}}
}

// Listen runs serve on a new loopback listener until the test ends (serve's context is then
// cancelled, and it must return nil) and returns the listener's address ("127.0.0.1:PORT").
func Listen(t testing.TB, serve func(context.Context, net.Listener) error) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("conntest: serve %s: %v", ln.Addr(), err)
		}
	})
	return ln.Addr().String()
}

// Serve sends req from the loopback address from and fails the test unless the answer has
// status want; it returns the body (at most 1 MiB).
func Serve(t testing.TB, from string, req *http.Request, want int) string {
	t.Helper()
	c := Client(from)
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("conntest: %s %s from %s: %v", req.Method, req.URL, from, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != want {
		t.Fatalf("conntest: %s %s from %s: %d %q (%v), want %d", req.Method, req.URL, from, resp.StatusCode, b, err, want)
	}
	return string(b)
}

// Idle opens n TCP connections to addr ("127.0.0.1:PORT") from from and sends nothing on
// them; they are closed when the test ends. The kernel completes a handshake before the
// server accepts, so a connection dialed is not yet one the server holds ([Held]).
func Idle(t testing.TB, addr, from string, n int) []net.Conn {
	t.Helper()
	d := Dialer(from)
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for range n {
		c, err := d.DialContext(t.Context(), "tcp", addr)
		if err != nil {
			t.Fatalf("conntest: dial %s from %s (after %d connections): %v", addr, from, len(conns), err)
		}
		conns = append(conns, c)
	}
	return conns
}

// Closed reports how many of conns the server has closed within d: each is read (all at
// once) until d passes, and an end of file or a reset counts; a connection still open then
// does not.
func Closed(conns []net.Conn, d time.Duration) int {
	deadline := time.Now().Add(d)
	var n atomic.Int64
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(deadline)
			var b [1]byte
			_, err := c.Read(b[:])
			if ne, ok := err.(net.Error); err != nil && !(ok && ne.Timeout()) {
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return int(n.Load())
}

// Held returns how many TCP connections to addr's port from the addresses from (all of them
// when none is given) this process holds accepted and open: established sockets in
// /proc/net/tcp whose local port is addr's and that have an inode (a connection still in the
// kernel's accept queue has none, nor has one the server closed).
func Held(t testing.TB, addr string, from ...string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("conntest: %v", err)
	}
	want := map[string]bool{}
	for _, f := range from {
		want[hexIPv4(t, f)] = true
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Fatalf("conntest: the socket table (Linux only): %v", err)
	}
	defer f.Close()
	p, _ := strconv.Atoi(port)
	localPort := fmt.Sprintf(":%04X", p)
	n := 0
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || !strings.HasSuffix(fields[1], localPort) || fields[3] != "01" || fields[9] == "0" {
			continue
		}
		remIP, _, _ := strings.Cut(fields[2], ":")
		if len(want) == 0 || want[remIP] {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("conntest: read the socket table: %v", err)
	}
	return n
}

// hexIPv4 is ip as /proc/net/tcp prints it (4 bytes, little-endian, upper-case hex).
func hexIPv4(t testing.TB, ip string) string {
	v4 := net.ParseIP(ip).To4()
	if v4 == nil {
		t.Fatalf("conntest: %q is not an IPv4 address", ip)
	}
	return fmt.Sprintf("%02X%02X%02X%02X", v4[3], v4[2], v4[1], v4[0])
}

// Flood is the idle-connection attack on the server at addr: perAddr idle connections from
// each address of attackers ([Idle]), then legit (a request that must succeed; the kernel
// queues its connection behind every attacking one, so the server has accepted all of those
// it will by the time legit is served), then a check that the server holds at most maxHeld
// of the attacking connections ([Held]). It returns the attacking connections.
func Flood(t testing.TB, addr string, attackers []string, perAddr, maxHeld int, legit func()) []net.Conn {
	t.Helper()
	var conns []net.Conn
	for _, a := range attackers {
		conns = append(conns, Idle(t, addr, a, perAddr)...)
	}
	start := time.Now()
	legit()
	t.Logf("conntest: %d idle connections from %v; the legitimate request was served after %v",
		len(conns), attackers, time.Since(start).Round(time.Millisecond))
	if held := Held(t, addr, attackers...); held > maxHeld {
		t.Errorf("conntest: the server holds %d idle attacking connections, want at most %d", held, maxHeld)
	}
	return conns
}
