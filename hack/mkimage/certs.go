package main

import (
	"bytes"
	"encoding/pem"
	"fmt"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// caBundlePath is where the images hold their CA certificates: the first file Go's crypto/x509
// (and so every Lava service, OpenTofu and each provider) reads on Linux, and the file of
// Debian's ca-certificates.
const caBundlePath = "/etc/ssl/certs/ca-certificates.crt"

// caBundle returns the CA certificates of the images as PEM: the roots of Mozilla's NSS trust
// store as golang.org/x/crypto/x509roots/fallback ships them, at the version go.mod pins, so
// every machine builds the same file. A root NSS trusts only for certificates issued before a
// date (a "distrust after" constraint) is left out: a PEM file cannot carry the constraint,
// and without it the root would be trusted for everything.
func caBundle() ([]byte, int, error) {
	var b bytes.Buffer
	n := 0
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		if err := pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, 0, fmt.Errorf("encode a CA certificate: %w", err)
		}
		n++
	}
	if n == 0 {
		return nil, 0, fmt.Errorf("the CA bundle of golang.org/x/crypto/x509roots/fallback has no unconstrained root")
	}
	return b.Bytes(), n, nil
}
