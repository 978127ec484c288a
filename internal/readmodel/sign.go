package readmodel

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"lukechampine.com/blake3"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// Signature algorithms (Signature.algo, docs/dialect.md section 8.3).
const (
	// AlgoNone marks an unsigned receipt.
	AlgoNone = "none"
	// AlgoEd25519 marks an Ed25519 signature over the 32 raw content-hash bytes.
	AlgoEd25519 = "ed25519"
)

// KeyIDLen is the length of a key id: the first 16 lowercase hex digits of BLAKE3(public key).
const KeyIDLen = 16

// ErrInvalidKey reports a key that is not 64 hex digits (32 bytes).
var ErrInvalidKey = errors.New("readmodel: invalid key")

// Signer signs receipts with an Ed25519 key. The private key lives only inside its signing
// function, so no formatting of a Signer (%v, %#v, a field of a logged struct, a reflection
// dump) can show the secret: it shows the public key and key id. A nil *Signer signs nothing:
// every receipt gets algo "none".
type Signer struct {
	pub   ed25519.PublicKey
	keyID string
	sign  func(message []byte) []byte
}

// NewSigner returns a Signer for a 32-byte Ed25519 seed (docs/dialect.md section 8.3: the key is the seed).
func NewSigner(seed []byte) (*Signer, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: seed is %d bytes, want %d", ErrInvalidKey, len(seed), ed25519.SeedSize)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	sign := func(message []byte) []byte { return ed25519.Sign(priv, message) }
	return &Signer{pub: pub, keyID: KeyID(pub), sign: sign}, nil
}

// ParseSigner parses a seed written as 64 hex digits (surrounding whitespace ignored), the
// format of the signing-key file and of `lava receipts keygen`'s SECRET line.
func ParseSigner(seedHex string) (*Signer, error) {
	seed, err := ParseHash(seedHex)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	return NewSigner(seed)
}

// LoadSigner reads a signing-key file (64 hex digits, the Ed25519 seed; in a cluster mounted
// from a Kubernetes Secret). Errors never quote the file's content.
func LoadSigner(path string) (*Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("readmodel: read signing key: %w", err)
	}
	s, err := ParseSigner(string(b))
	if err != nil {
		return nil, fmt.Errorf("readmodel: signing key %s: %w", path, err)
	}
	return s, nil
}

// GenerateSigner returns a Signer with a new random seed read from r (crypto/rand.Reader when
// nil) and the seed itself, for `lava receipts keygen`.
func GenerateSigner(r io.Reader) (*Signer, []byte, error) {
	if r == nil {
		r = rand.Reader
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(r, seed); err != nil {
		return nil, nil, fmt.Errorf("readmodel: generate key: %w", err)
	}
	s, err := NewSigner(seed)
	return s, seed, err
}

// PublicKey returns the 32-byte public key; nil for a nil Signer.
func (s *Signer) PublicKey() ed25519.PublicKey {
	if s == nil {
		return nil
	}
	return s.pub
}

// KeyID returns the key id ([KeyID] of the public key); "" for a nil Signer.
func (s *Signer) KeyID() string {
	if s == nil {
		return ""
	}
	return s.keyID
}

// Sign returns the signature of a content hash: algo "none" for a nil Signer, otherwise
// Ed25519 over the 32 raw digest bytes with the public key and key id.
func (s *Signer) Sign(contentHash []byte) *lavav1.Signature {
	if s == nil {
		return &lavav1.Signature{Algo: AlgoNone}
	}
	return &lavav1.Signature{
		Algo:      AlgoEd25519,
		Sig:       s.sign(contentHash),
		PublicKey: append([]byte(nil), s.pub...),
		KeyId:     s.keyID,
	}
}

// KeyID returns the key id of an Ed25519 public key: the first 16 lowercase hex digits of its
// BLAKE3-256 digest.
func KeyID(pub []byte) string {
	sum := blake3.Sum256(pub)
	return Hex(sum[:])[:KeyIDLen]
}

// PublicKeyLabel starts the line of `lava receipts keygen` that holds the public key
// ("PUBLIC <64 hex digits>"), which [ParsePublicKey] accepts as it is.
const PublicKeyLabel = "PUBLIC"

// ParsePublicKey parses a public key written as 64 hex digits, alone or as `lava receipts
// keygen`'s line "PUBLIC <64 hex digits>" (surrounding whitespace ignored), so the output of
// `lava receipts keygen --secret-file FILE > attest.pub` is a public-key file as it is.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimSpace(strings.TrimPrefix(s, PublicKeyLabel+" "))
	b, err := ParseHash(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	return ed25519.PublicKey(b), nil
}

// LoadPublicKey reads a public-key file ([ParsePublicKey]'s formats).
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("readmodel: read public key: %w", err)
	}
	k, err := ParsePublicKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("readmodel: public key %s: %w", path, err)
	}
	return k, nil
}
