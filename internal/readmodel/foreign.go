package readmodel

import (
	"bytes"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// ForeignReason says why a message on a chain's subject is not part of the chain
// (docs/security.md, "Receipts").
type ForeignReason string

// Reasons of a [Foreign] message.
const (
	// ForeignNotAReceipt: another Lava-Schema, or a body that is not a lava.v1.Receipt.
	ForeignNotAReceipt ForeignReason = "not_a_receipt"
	// ForeignBadContentHash: the stored content_hash is not the one its fields hash to.
	ForeignBadContentHash ForeignReason = "bad_content_hash"
	// ForeignBadSignature: a signature that does not verify with the receipt's own key, or an
	// algorithm other than ed25519.
	ForeignBadSignature ForeignReason = "bad_signature"
	// ForeignDoesNotFollow: its sequence or prev_hash is not that of the chain's next receipt
	// (a forged link, or a replayed copy of an earlier receipt).
	ForeignDoesNotFollow ForeignReason = "does_not_follow"
)

// Foreign is a message on a chain's subject that readers skip: only attest appends receipts,
// and a message that is not the chain's next receipt was published by someone else.
type Foreign struct {
	// Namespace and Name of the chain's resource.
	Namespace, Name string
	// StreamSeq is the message's sequence in LAVA_RECEIPTS.
	StreamSeq uint64
	Reason    ForeignReason
	// Detail says what did not match (no message content beyond sequence numbers and hashes).
	Detail string
}

// String is "stream sequence N: reason: detail".
func (f Foreign) String() string {
	return fmt.Sprintf("stream sequence %d: %s: %s", f.StreamSeq, f.Reason, f.Detail)
}

// Member is one receipt of a chain with where it is stored ([ReadLinked]).
type Member struct {
	Receipt *lavav1.Receipt
	// StreamSeq is the receipt's sequence in LAVA_RECEIPTS.
	StreamSeq uint64
	// EventID is the attested event's event_id ([HeaderEventID]; "" without the header).
	EventID string
	// Stored is when LAVA_RECEIPTS stored the receipt.
	Stored time.Time
	// PhasesSeq is the receipt's [HeaderPhasesSeq] (OK false without one).
	PhasesSeq PhasesSeq
}

// linker builds a chain from the messages of its subject in stream order: a message joins
// the chain only when it decodes as a receipt, its content_hash recomputes, it is unsigned or
// its signature verifies with its own key (see [checkSignature]), and it follows the chain's head (sequence head+1,
// prev_hash head's content_hash; sequence 0 and [Genesis] for the first). With opts.PublicKey
// a receipt signed with that key that does not follow the head still joins (unless it repeats
// a receipt already in the chain): attest wrote it, and [Verify] reports the break (a removed
// receipt). Everything else is [Foreign].
type linker struct {
	ns, name string
	opts     VerifyOptions
	members  []Member
	foreign  []Foreign
	seen     map[string]bool
}

func newLinker(ns, name string, opts VerifyOptions) *linker {
	return &linker{ns: ns, name: name, opts: opts, seen: map[string]bool{}}
}

// add classifies one message.
func (l *linker) add(seq uint64, h nats.Header, data []byte, stored time.Time) {
	reason, detail := l.classify(h, data)
	if reason != "" {
		l.foreign = append(l.foreign, Foreign{Namespace: l.ns, Name: l.name, StreamSeq: seq, Reason: reason, Detail: detail})
		return
	}
	r, _ := DecodeReceipt(h, data)
	l.seen[string(r.GetContentHash())] = true
	l.members = append(l.members, Member{Receipt: r, StreamSeq: seq, EventID: h.Get(HeaderEventID), Stored: stored, PhasesSeq: PhasesSeqOf(h)})
}

func (l *linker) classify(h nats.Header, data []byte) (ForeignReason, string) {
	r, err := DecodeReceipt(h, data)
	if err != nil {
		return ForeignNotAReceipt, err.Error()
	}
	// Any valid signature (or none) may join: a receipt signed with another key than the pinned
	// one, or unsigned, is attest's under another key or configuration, and Verify reports it.
	if reason, detail := Standalone(r, VerifyOptions{}); reason != "" {
		return reason, detail
	}
	var head *lavav1.Receipt
	if n := len(l.members); n > 0 {
		head = l.members[n-1].Receipt
	}
	wantSeq, wantPrev := uint64(0), Genesis()
	if head != nil {
		wantSeq, wantPrev = head.GetSequence()+1, head.GetContentHash()
	}
	if r.GetSequence() == wantSeq && bytes.Equal(r.GetPrevHash(), wantPrev) {
		return "", ""
	}
	pinned := VerifyOptions{RequireSignatures: true, PublicKey: l.opts.PublicKey}
	if l.opts.PublicKey != nil && checkSignature(r, pinned) == "" && !l.seen[string(r.GetContentHash())] {
		return "", "" // signed with the pinned key: attest's, out of place; Verify reports it
	}
	return ForeignDoesNotFollow, fmt.Sprintf("sequence %d prev_hash %s, the chain's next is sequence %d prev_hash %s",
		r.GetSequence(), Hex(r.GetPrevHash()), wantSeq, Hex(wantPrev))
}

// Standalone checks what a receipt proves by itself: that its content_hash recomputes
// ([ContentHash]) and that its signature is acceptable under opts (as [Verify] checks it). It
// returns "" and "" when both hold, else [ForeignBadContentHash] or [ForeignBadSignature] and
// what did not match (hashes and key ids only).
func Standalone(r *lavav1.Receipt, opts VerifyOptions) (ForeignReason, string) {
	if h, err := ContentHash(r); err != nil || !bytes.Equal(h, r.GetContentHash()) {
		return ForeignBadContentHash, fmt.Sprintf("content_hash %s does not match the receipt", Hex(r.GetContentHash()))
	}
	if msg := checkSignature(r, opts); msg != "" {
		return ForeignBadSignature, msg
	}
	return "", ""
}
