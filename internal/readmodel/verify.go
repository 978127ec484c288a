package readmodel

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"time"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// VerifyOptions says how strictly [Verify] checks signatures.
type VerifyOptions struct {
	// RequireSignatures makes an unsigned receipt (no signature, or algo "none") a failure.
	// Without it unsigned receipts pass, as upstream's verifiers let them (docs/dialect.md section 8.4), so a
	// stripped signature goes unnoticed.
	RequireSignatures bool
	// PublicKey, when set (32 bytes), is the only key signatures may be made with; a receipt
	// signed with another key fails with "signature scheme mismatch". When nil, each
	// receipt's embedded public key is used (which proves integrity, not authorship).
	PublicKey ed25519.PublicKey
}

// Failure is one violation found by [Verify].
type Failure struct {
	// Index is the receipt's position in the chain (the sequence it should have).
	Index uint64
	// Message is upstream's text, "receipt I: ..." (see [Verify]).
	Message string
}

// Error implements error.
func (f Failure) Error() string { return f.Message }

// Result is the outcome of [Verify].
type Result struct {
	// Failures in chain order; empty when the chain verifies.
	Failures []Failure
	// Length is the number of receipts checked.
	Length uint64
	// HeadHash is the content_hash stored in the last receipt; nil for an empty chain.
	HeadHash []byte
}

// OK reports whether the chain verified.
func (r Result) OK() bool { return len(r.Failures) == 0 }

// Verify checks a chain given in order, as upstream's verify_chain does (docs/dialect.md section 8.4). For
// each receipt I, in this order:
//
//  1. its sequence equals I: "receipt I: sequence expected I, got A";
//  2. its prev_hash equals the previous receipt's stored content_hash ([Genesis] for I = 0):
//     "receipt I: prev_hash expected E, got A" (hex);
//  3. its content_hash equals [ContentHash] recomputed from its fields: "receipt I:
//     content_hash expected E, got A" (E recomputed, A stored; "receipt I: content_hash:
//     unsupported encoding_version N" when it cannot be recomputed);
//  4. a signature other than "none" verifies over the stored content_hash: "receipt I:
//     signature: signature scheme mismatch: ..." when the algorithm is not ed25519 or the key is
//     not opts.PublicKey, "receipt I: signature: invalid signature: ..." for a bad key, key id,
//     length or signature; with opts.RequireSignatures an unsigned receipt fails with "receipt
//     I: signature: unsigned (algo none) but signatures are required";
//  5. its timestamp is set and not before the previous one: "receipt I: timestamp T regressed
//     below previous P" (RFC 3339, nanoseconds).
//
// Upstream stops at the first violation; Verify goes on and reports every one, so the first
// failure is upstream's. Each check compares against the stored fields of the previous
// receipt, so one tampered receipt yields its own failures rather than a cascade.
func Verify(chain []*lavav1.Receipt, opts VerifyOptions) Result {
	res := Result{Length: uint64(len(chain))}
	fail := func(i int, format string, args ...any) {
		res.Failures = append(res.Failures, Failure{
			Index:   uint64(i),
			Message: fmt.Sprintf("receipt %d: ", i) + fmt.Sprintf(format, args...),
		})
	}
	var prev *lavav1.Receipt
	for i, r := range chain {
		if r.GetSequence() != uint64(i) {
			fail(i, "sequence expected %d, got %d", i, r.GetSequence())
		}
		wantPrev := Genesis()
		if prev != nil {
			wantPrev = prev.GetContentHash()
		}
		if !bytes.Equal(r.GetPrevHash(), wantPrev) {
			fail(i, "prev_hash expected %s, got %s", Hex(wantPrev), Hex(r.GetPrevHash()))
		}
		if h, err := ContentHash(r); err != nil {
			fail(i, "content_hash: unsupported encoding_version %d", r.GetEncodingVersion())
		} else if !bytes.Equal(h, r.GetContentHash()) {
			fail(i, "content_hash expected %s, got %s", Hex(h), Hex(r.GetContentHash()))
		}
		if msg := checkSignature(r, opts); msg != "" {
			fail(i, "signature: %s", msg)
		}
		switch {
		case r.GetTimestamp() == nil:
			fail(i, "timestamp missing")
		case prev != nil && prev.GetTimestamp() != nil && r.GetTimestamp().AsTime().Before(prev.GetTimestamp().AsTime()):
			fail(i, "timestamp %s regressed below previous %s",
				r.GetTimestamp().AsTime().UTC().Format(time.RFC3339Nano), prev.GetTimestamp().AsTime().UTC().Format(time.RFC3339Nano))
		}
		prev = r
	}
	if prev != nil {
		res.HeadHash = prev.GetContentHash()
	}
	return res
}

// checkSignature returns "" when r's signature is acceptable, else the reason.
func checkSignature(r *lavav1.Receipt, opts VerifyOptions) string {
	sig := r.GetSignature()
	algo := sig.GetAlgo()
	if algo == "" {
		algo = AlgoNone
	}
	switch algo {
	case AlgoNone:
		if opts.RequireSignatures {
			return "unsigned (algo none) but signatures are required"
		}
		return ""
	case AlgoEd25519:
	default:
		return fmt.Sprintf("signature scheme mismatch: algo %q, verifier expects %q", algo, AlgoEd25519)
	}
	pub := sig.GetPublicKey()
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Sprintf("invalid signature: public key is %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	if opts.PublicKey != nil && !bytes.Equal(pub, opts.PublicKey) {
		return fmt.Sprintf("signature scheme mismatch: signed with key %s, verifier's key is %s", KeyID(pub), KeyID(opts.PublicKey))
	}
	if id := KeyID(pub); sig.GetKeyId() != id {
		return fmt.Sprintf("invalid signature: key_id %q does not match the public key (%s)", sig.GetKeyId(), id)
	}
	if len(sig.GetSig()) != ed25519.SignatureSize {
		return fmt.Sprintf("invalid signature: %d bytes, want %d", len(sig.GetSig()), ed25519.SignatureSize)
	}
	if !ed25519.Verify(ed25519.PublicKey(pub), r.GetContentHash(), sig.GetSig()) {
		return "invalid signature: verification failed"
	}
	return ""
}
