package readmodel

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
)

// FuzzLinkChain puts one arbitrary message (with the receipt schema header, or the one the
// input names) among the three messages of a genuine signed chain, at any place, and reads
// the subject the way every reader does (DecodeReceipt and the linker of ReadChain and
// attest's own append). Nothing panics; every genuine receipt stays in the chain; when the
// chain then verifies with the signing key pinned and signatures required, it is exactly the
// genuine chain, and the arbitrary message was either a copy of a genuine receipt or reported
// as foreign.
func FuzzLinkChain(f *testing.F) {
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = byte(i + 1)
	}
	signer, err := NewSigner(seed)
	if err != nil {
		f.Fatal(err)
	}
	t0 := time.Unix(1700000000, 0)
	var (
		genuine []*lavav1.Receipt
		msgs    []*nats.Msg
		head    *lavav1.Receipt
	)
	subject := bus.ReceiptSubject("infra", "vpc")
	for i, ph := range []lavav1.Phase{lavav1.Phase_PHASE_PENDING, lavav1.Phase_PHASE_SYNTHESIZED, lavav1.Phase_PHASE_APPLIED} {
		pc := &lavav1.PhaseChanged{Envelope: &lavav1.Envelope{EventId: fmt.Sprintf("%064x", i+1), Source: "watcher",
			Resource: &lavav1.ResourceRef{Namespace: "infra", Name: "vpc", Uid: "u"}, Generation: 1}, To: ph}
		r, err := NewReceipt(head, KindOutcome, OutcomeFromPhaseChanged(pc), t0.Add(time.Duration(i)*time.Millisecond), signer)
		if err != nil {
			f.Fatal(err)
		}
		m, err := EncodeReceipt(subject, r, pc.GetEnvelope().GetEventId(), fmt.Sprintf("m%d", i), uint64(i), PhasesSeq{Seq: uint64(i + 1), OK: true})
		if err != nil {
			f.Fatal(err)
		}
		genuine, msgs, head = append(genuine, r), append(msgs, m), r
	}
	unsigned, err := NewReceipt(genuine[0], KindOutcome, genuine[1].GetPayload(), t0, nil)
	if err != nil {
		f.Fatal(err)
	}
	ub, err := proto.Marshal(unsigned)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(1), "", ub)
	f.Add(uint8(0), "", msgs[0].Data)
	f.Add(uint8(3), "lava.v1.PhaseChanged", msgs[2].Data)
	f.Add(uint8(2), "", []byte{0x0a, 0x01})
	opts := VerifyOptions{RequireSignatures: true, PublicKey: signer.PublicKey()}
	f.Fuzz(func(t *testing.T, pos uint8, schema string, data []byte) {
		at := int(pos) % (len(msgs) + 1)
		h := nats.Header{}
		h.Set(bus.HeaderSchema, ReceiptSchema)
		if schema != "" {
			h.Set(bus.HeaderSchema, schema)
		}
		l := newLinker("infra", "vpc", opts)
		seq := uint64(0)
		add := func(h nats.Header, d []byte) {
			seq++
			l.add(seq, h, d, t0)
		}
		for i, m := range msgs {
			if i == at {
				add(h, data)
			}
			add(m.Header, m.Data)
		}
		if at == len(msgs) {
			add(h, data)
		}
		var chain []*lavav1.Receipt
		for _, m := range l.members {
			chain = append(chain, m.Receipt)
		}
		for _, g := range genuine {
			found := false
			for _, r := range chain {
				found = found || bytes.Equal(r.GetContentHash(), g.GetContentHash())
			}
			if !found {
				t.Fatalf("genuine receipt %d is not in the chain read (foreign: %v)", g.GetSequence(), l.foreign)
			}
		}
		if len(l.members)+len(l.foreign) != len(msgs)+1 {
			t.Fatalf("%d members and %d foreign messages of %d", len(l.members), len(l.foreign), len(msgs)+1)
		}
		if !Verify(chain, opts).OK() {
			return
		}
		if len(chain) != len(genuine) {
			t.Fatalf("a chain of %d receipts verified, the genuine one has %d", len(chain), len(genuine))
		}
		for i, r := range chain {
			if !bytes.Equal(r.GetContentHash(), genuine[i].GetContentHash()) {
				t.Fatalf("receipt %d of the verified chain is not the genuine one", i)
			}
		}
	})
}
