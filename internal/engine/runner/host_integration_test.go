//go:build integration

package runner

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/platform/credentials"
	"github.com/lava-operator/lava/internal/platform/testutil/proctest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
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

// TestHost_credentialsInRunner: a provider started in a runner gets the object's provider
// credentials (a variable of spec.providerEnvFrom, the AWS role and the token file in its
// private directory, mode 0600) and nothing of the host's environment; a renewed token is
// written into the same file.
func TestHost_credentialsInRunner(t *testing.T) {
	const canary = "host-own-canary-3f1a"
	t.Setenv("LAVA_TEST_HOST_CANARY", canary)
	mirror := tofutest.TestkitMirror(t, tofutest.Tofu(t))
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHost(Options{Exe: exe, Env: []string{"LAVA_RUNNER_TEST_CHILD=1"}, Mirror: mirror, UID: -1, Stderr: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	creds := &credentials.Provider{Identity: "ServiceAccount tenant/app", Token: "token-one", AWSRoleARN: "arn:aws:iam::1:role/app",
		Env: map[string]string{"CLOUD_REGION": "region-7"}}
	provider := filepath.Join(mirror, "registry.opentofu.org/example/testkit", tofutest.TestkitVersion, "linux_amd64",
		"terraform-provider-testkit_v"+tofutest.TestkitVersion)
	p, err := h.Start(t.Context(), "tenant", provider, creds)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = attached{p}.Kill(t.Context()) }()
	env, err := proctest.Environ(p.pid)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range env {
		if strings.Contains(v, canary) {
			t.Errorf("the host's %s reached the provider", k)
		}
	}
	if env["CLOUD_REGION"] != "region-7" || env["AWS_ROLE_ARN"] != creds.AWSRoleARN {
		t.Errorf("the provider's environment lacks the object's variables: %v", env)
	}
	token := env["AWS_WEB_IDENTITY_TOKEN_FILE"]
	if b, err := os.ReadFile(token); err != nil || string(b) != "token-one" {
		t.Fatalf("token file %s: %q, %v", token, b, err)
	}
	if st, err := os.Stat(token); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("token file %s: %v, %v; want mode 0600", token, st.Mode(), err)
	}
	renewed := *creds
	renewed.Token = "token-two"
	if err := p.Refresh(&renewed); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(token); err != nil || string(b) != "token-two" {
		t.Errorf("token file %s after the refresh: %q, %v", token, b, err)
	}
}
