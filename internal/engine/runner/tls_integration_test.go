//go:build integration

package runner

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
)

// TestRunner_refusesOtherClients is the loopback neighbour's attack on a runner of
// docs/security.md, "Provider runners": a client with no certificate, or with a certificate
// of its own that the runner was not given, gets no connection to the runner (so it starts no
// provider), while the engine's own certificate does.
func TestRunner_refusesOtherClients(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHost(Options{Exe: exe, Env: []string{"LAVA_RUNNER_TEST_CHILD=1"}, Mirror: t.TempDir(), UID: -1, Stderr: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	c, err := h.runner(hostKey("tenant", nil))
	if err != nil {
		t.Fatal(err)
	}
	other, err := newKeyPair(x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	otherCert, err := tls.X509KeyPair(other.Cert, other.Key)
	if err != nil {
		t.Fatal(err)
	}
	noCert := c.tls.Clone()
	noCert.Certificates = nil
	wrongCert := c.tls.Clone()
	wrongCert.Certificates = []tls.Certificate{otherCert}
	for name, cfg := range map[string]*tls.Config{"no certificate": noCert, "another certificate": wrongCert} {
		conn, err := tls.Dial("tcp", c.addr, cfg)
		if err == nil {
			// TLS 1.3: the client's handshake ends before the server checked its certificate;
			// the server's refusal arrives with the first read.
			_, err = conn.Write([]byte("{\"exe\":\"x\"}\n"))
			if err == nil {
				_, err = bufio.NewReader(conn).ReadString('\n')
			}
			conn.Close()
		}
		if err == nil {
			t.Errorf("%s: the runner answered", name)
		}
	}
	conn, err := tls.Dial("tcp", c.addr, c.tls)
	if err != nil {
		t.Fatalf("the engine's certificate: %v", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("{\"exe\":\"x\"}\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
		t.Errorf("the engine's certificate: no answer: %v", err)
	} else {
		t.Logf("the runner answered the engine: %s", line)
	}
}
