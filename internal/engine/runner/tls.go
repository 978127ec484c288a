package runner

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// serverName is the name in every runner certificate, and the one the engine verifies.
const serverName = "lava-runner"

// keyPair is one PEM certificate and its PEM private key.
type keyPair struct {
	Cert []byte `json:"cert"`
	Key  []byte `json:"key"`
}

// newKeyPair makes a self-signed ECDSA P-256 certificate for serverName, valid for a year,
// usable as a server (usage server) or a client (usage client) certificate. It is its own
// issuer: each side trusts exactly the other's certificate.
func newKeyPair(usage x509.ExtKeyUsage) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("runner: key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return keyPair{}, fmt.Errorf("runner: serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: serverName},
		DNSNames:              []string{serverName},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return keyPair{}, fmt.Errorf("runner: certificate: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return keyPair{}, fmt.Errorf("runner: key: %w", err)
	}
	return keyPair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}, nil
}

// mutualTLS is the TLS configuration of one side: own is its key pair, peer the only
// certificate it accepts from the other side. server picks the runner's side (client
// certificates required) over the engine's.
func mutualTLS(own keyPair, peer []byte, server bool) (*tls.Config, error) {
	cert, err := tls.X509KeyPair(own.Cert, own.Key)
	if err != nil {
		return nil, fmt.Errorf("runner: key pair: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(peer) {
		return nil, errors.New("runner: no peer certificate")
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	if server {
		cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, pool
		// gRPC (the engine's plugin client) requires HTTP/2 negotiated by ALPN.
		cfg.NextProtos = []string{"h2"}
	} else {
		cfg.RootCAs, cfg.ServerName = pool, serverName
	}
	return cfg, nil
}
