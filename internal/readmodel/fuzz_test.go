package readmodel_test

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/readmodel"
	"github.com/lava-operator/lava/internal/readmodel/receipttest"
)

// FuzzVerifyTamper corrupts the stored bytes of one receipt of a signed chain (as a tamperer
// with write access to the stream could) and checks that Verify, with the signer's key and
// signatures required, never panics and accepts the chain only when the corruption changed
// nothing that is attested: the canonical encoding, the content hash and the signature.
func FuzzVerifyTamper(f *testing.F) {
	s := receipttest.Signer(f)
	chain := buildChain(f, 3, s)
	f.Add(uint8(1), uint16(0), []byte{0xff})
	f.Add(uint8(2), uint16(10), []byte{0x00, 0x01})
	f.Add(uint8(0), uint16(40), []byte("x"))
	opts := readmodel.VerifyOptions{RequireSignatures: true, PublicKey: s.PublicKey()}
	f.Fuzz(func(t *testing.T, which uint8, at uint16, patch []byte) {
		i := int(which) % len(chain)
		orig, err := proto.Marshal(chain[i])
		if err != nil {
			t.Fatal(err)
		}
		b := append([]byte(nil), orig...)
		pos := int(at) % (len(b) + 1)
		b = append(b[:pos], append(append([]byte(nil), patch...), b[min(pos+len(patch), len(b)):]...)...)
		r := &lavav1.Receipt{}
		if err := proto.Unmarshal(b, r); err != nil {
			return // not a receipt: ReadChain reports it
		}
		tampered := clone(chain)
		tampered[i] = r
		res := readmodel.Verify(tampered, opts)
		for _, fl := range res.Failures {
			if fl.Index >= res.Length {
				t.Fatalf("failure index %d beyond length %d", fl.Index, res.Length)
			}
		}
		if !res.OK() {
			return
		}
		want, _ := readmodel.Canonical(chain[i])
		got, err := readmodel.Canonical(r)
		if err != nil || !bytes.Equal(got, want) || !bytes.Equal(r.GetContentHash(), chain[i].GetContentHash()) ||
			!sameSignature(r.GetSignature(), chain[i].GetSignature()) {
			t.Fatalf("tampered receipt %d verified:\ncanonical %s\nwant      %s", i, got, want)
		}
	})
}

// sameSignature compares the attested fields of two signatures (not unknown fields).
func sameSignature(a, b *lavav1.Signature) bool {
	return a.GetAlgo() == b.GetAlgo() && bytes.Equal(a.GetSig(), b.GetSig()) &&
		bytes.Equal(a.GetPublicKey(), b.GetPublicKey()) && a.GetKeyId() == b.GetKeyId()
}
