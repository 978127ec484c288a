package attest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/types/known/timestamppb"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
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

// ExtensionForeignReceipt is the extension kind of the Custom anomaly reporting a foreign message
// on a receipt chain's subject: lava.anomaly.critical.foreign_receipt ([bus.ForeignReceiptAnomalySubject]).
const ExtensionForeignReceipt = "foreign_receipt"

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

// member is one receipt of a chain with where it is stored.
type member struct {
	r       *lavav1.Receipt
	seq     uint64
	eventID string
	stored  time.Time
	// phases is the receipt's [HeaderPhasesSeq]; ok false without one.
	phases phasesSeq
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
	members  []member
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
	r, _ := decodeReceipt(h, data)
	l.seen[string(r.GetContentHash())] = true
	l.members = append(l.members, member{r: r, seq: seq, eventID: h.Get(HeaderEventID), stored: stored, phases: phasesSeqOf(h)})
}

func (l *linker) classify(h nats.Header, data []byte) (ForeignReason, string) {
	r, err := decodeReceipt(h, data)
	if err != nil {
		return ForeignNotAReceipt, err.Error()
	}
	// Any valid signature (or none) may join: a receipt signed with another key than the pinned
	// one, or unsigned, is attest's under another key or configuration, and Verify reports it.
	if reason, detail := standalone(r, VerifyOptions{}); reason != "" {
		return reason, detail
	}
	var head *lavav1.Receipt
	if n := len(l.members); n > 0 {
		head = l.members[n-1].r
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

// standalone checks what a receipt proves by itself: its content hash and its signature.
func standalone(r *lavav1.Receipt, opts VerifyOptions) (ForeignReason, string) {
	if h, err := ContentHash(r); err != nil || !bytes.Equal(h, r.GetContentHash()) {
		return ForeignBadContentHash, fmt.Sprintf("content_hash %s does not match the receipt", Hex(r.GetContentHash()))
	}
	if msg := checkSignature(r, opts); msg != "" {
		return ForeignBadSignature, msg
	}
	return "", ""
}

// ForeignAnomaly is the AnomalyDetected reporting a foreign message f on a receipt chain: kind
// Custom, extension kind [ExtensionForeignReceipt], severity critical, source the chain's
// resource, metadata subject, stream_seq and reason. The message body is never copied. The event
// id comes from the stream sequence (trigger "foreign:LAVA_RECEIPTS:<seq>"), so every report of
// the same message (the next append, a ReceiptService read, another replica) is stored once
// within the stream's duplicate window, and the fingerprint groups a chain's reports per reason.
func ForeignAnomaly(f Foreign, now time.Time) *lavav1.AnomalyDetected {
	res := &lavav1.ResourceRef{Namespace: f.Namespace, Name: f.Name}
	subject := bus.ReceiptSubject(f.Namespace, f.Name)
	seq := strconv.FormatUint(f.StreamSeq, 10)
	trigger := "foreign:" + bus.StreamReceipts + ":" + seq
	an := &lavav1.AnomalyDetected{
		Kind:          lavav1.AnomalyKind_ANOMALY_KIND_CUSTOM,
		ExtensionKind: ExtensionForeignReceipt,
		Severity:      lavav1.Severity_SEVERITY_CRITICAL,
		Source:        res,
		Message: pipeline.Sanitize(fmt.Sprintf("a message on %s that attest did not append was skipped (%s): %s",
			subject, f.Reason, f.Detail)),
		Metadata: map[string]string{
			"subject": subject, "stream": bus.StreamReceipts, "stream_seq": seq, "reason": string(f.Reason),
		},
		Fingerprint: pipeline.Fingerprint(lavav1.AnomalyKind_ANOMALY_KIND_CUSTOM, ExtensionForeignReceipt,
			f.Namespace+"/"+f.Name, lavav1.Severity_SEVERITY_CRITICAL, string(f.Reason)),
		Count:     1,
		FirstSeen: timestamppb.New(now.UTC()),
		LastSeen:  timestamppb.New(now.UTC()),
	}
	id := eventid.ID("", 0, eventid.Type(an), trigger)
	an.Envelope = &lavav1.Envelope{
		EventId: id, OccurredAt: timestamppb.New(now.UTC()), Source: bus.ServiceAttest, Resource: res,
		CorrelationId: id, Trigger: trigger,
	}
	return an
}

// ForeignReporter returns a callback that publishes each foreign message as [ForeignAnomaly] on
// lava.anomaly.critical.foreign_receipt and logs it on log (nil: discarded). A publish failure
// is logged; the message stays skipped either way.
func ForeignReporter(pub *bus.Publisher, log *slog.Logger) func(context.Context, Foreign) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(ctx context.Context, f Foreign) {
		log.Warn("attest: foreign message on a receipt chain skipped", "namespace", f.Namespace, "name", f.Name,
			"stream_seq", f.StreamSeq, "reason", string(f.Reason), "detail", f.Detail)
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
		defer cancel()
		if _, err := pub.PublishEvent(pctx, ForeignAnomaly(f, time.Now())); err != nil {
			log.Warn("attest: report foreign receipt message", "stream_seq", f.StreamSeq, "error", err)
		}
	}
}

// publishTimeout bounds one report's publish.
const publishTimeout = 5 * time.Second
