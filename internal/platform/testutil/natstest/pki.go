package natstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a throw-away CA and the certificates it signed, made with crypto/x509 for one test
// (nothing is checked in), as PEM files in a temporary directory.
type PKI struct {
	// CAFile is the CA certificate; OtherCAFile a CA that signed nothing here.
	CAFile, OtherCAFile string
	// ServerCert and ServerKey are the server's (for 127.0.0.1).
	ServerCert, ServerKey string
	// ClientCert and ClientKey are a client's (client authentication).
	ClientCert, ClientKey string
	// Pool holds the CA.
	Pool *x509.CertPool
}

// NewPKI makes a PKI valid for an hour; a failure fails the test.
func NewPKI(tb testing.TB) *PKI {
	tb.Helper()
	dir := tb.TempDir()
	p := &PKI{Pool: x509.NewCertPool()}
	ca, caKey := selfSigned(tb, "lava test CA")
	p.Pool.AddCert(ca)
	p.CAFile = writePEM(tb, dir, "ca.pem", "CERTIFICATE", ca.Raw)
	other, _ := selfSigned(tb, "another CA")
	p.OtherCAFile = writePEM(tb, dir, "other-ca.pem", "CERTIFICATE", other.Raw)
	issue := func(name string, usage x509.ExtKeyUsage, ip bool) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		if ip {
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			tb.Fatal(err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			tb.Fatal(err)
		}
		return writePEM(tb, dir, name+".pem", "CERTIFICATE", der), writePEM(tb, dir, name+"-key.pem", "PRIVATE KEY", kder)
	}
	p.ServerCert, p.ServerKey = issue("nats", x509.ExtKeyUsageServerAuth, true)
	p.ClientCert, p.ClientKey = issue("client", x509.ExtKeyUsageClientAuth, false)
	return p
}

// ServerTLS is the server's TLS configuration; mutual requires and verifies client
// certificates signed by the CA.
func (p *PKI) ServerTLS(tb testing.TB, mutual bool) *tls.Config {
	tb.Helper()
	cert, err := tls.LoadX509KeyPair(p.ServerCert, p.ServerKey)
	if err != nil {
		tb.Fatal(err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if mutual {
		c.ClientCAs, c.ClientAuth = p.Pool, tls.RequireAndVerifyClientCert
	}
	return c
}

func selfSigned(tb testing.TB, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return c, key
}

func writePEM(tb testing.TB, dir, name, typ string, der []byte) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}
