package readmodel

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
)

// ReceiptSchema is the Lava-Schema (bus.HeaderSchema) of receipt messages in LAVA_RECEIPTS.
const ReceiptSchema = "lava.v1.Receipt"

// Headers of a receipt message in LAVA_RECEIPTS, besides bus.HeaderSchema ([ReceiptSchema]),
// bus.HeaderContentType (binary protobuf) and Nats-Msg-Id (the receipt id attest derives from
// the attested event).
const (
	// HeaderEventID is the event_id of the attested event.
	HeaderEventID = "Lava-Event-Id"
	// HeaderPrevSeq is the stream sequence of the previous receipt of the same chain ("0" for
	// the first), so the recent tail can be walked backwards without reading the whole chain.
	HeaderPrevSeq = "Lava-Prev-Seq"
	// HeaderReceiptSequence is the receipt's chain sequence.
	HeaderReceiptSequence = "Lava-Receipt-Sequence"
	// HeaderPhasesSeq is the highest LAVA_PHASES stream sequence attested by this receipt and
	// the ones before it in its chain (a receipt of an anomaly carries its head's value on).
	// Receipts of phase events are appended in that stream's order (docs/design/0018-receipt-order-across-replicas.md):
	// every event of the resource up to this sequence has its receipt at or before this one.
	// Receipts written before the header existed have none; an append after such a head
	// cannot order (it appends as it comes) and starts the header.
	HeaderPhasesSeq = "Lava-Phases-Seq"
)

// ErrCorrupt reports a message on a receipt subject that is not a receipt ([DecodeReceipt]);
// readers skip it as [Foreign].
var ErrCorrupt = errors.New("readmodel: not a receipt")

// PhasesSeq is a receipt's [HeaderPhasesSeq]: OK is false when the receipt has none.
type PhasesSeq struct {
	Seq uint64
	OK  bool
}

// PhasesSeqOf reads [HeaderPhasesSeq] from a receipt message's headers; OK is false when it is
// absent or not a decimal uint64.
func PhasesSeqOf(h nats.Header) PhasesSeq {
	v := h.Get(HeaderPhasesSeq)
	if v == "" {
		return PhasesSeq{}
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return PhasesSeq{}
	}
	return PhasesSeq{Seq: n, OK: true}
}

// EncodeReceipt builds the message of receipt r on subject: bus.EncodeMessage (Lava-Schema,
// Content-Type, Nats-Msg-Id msgID) plus [HeaderEventID] eventID, [HeaderPrevSeq] prevSeq (the
// stream sequence of the previous receipt of the chain, 0 for the first),
// [HeaderReceiptSequence] and, when phases.OK, [HeaderPhasesSeq].
func EncodeReceipt(subject string, r *lavav1.Receipt, eventID, msgID string, prevSeq uint64, phases PhasesSeq) (*nats.Msg, error) {
	m, err := bus.EncodeMessage(subject, r, msgID)
	if err != nil {
		return nil, fmt.Errorf("readmodel: encode receipt: %w", err)
	}
	m.Header.Set(HeaderEventID, eventID)
	m.Header.Set(HeaderPrevSeq, strconv.FormatUint(prevSeq, 10))
	m.Header.Set(HeaderReceiptSequence, strconv.FormatUint(r.GetSequence(), 10))
	if phases.OK {
		m.Header.Set(HeaderPhasesSeq, strconv.FormatUint(phases.Seq, 10))
	}
	return m, nil
}

// DecodeReceipt decodes a receipt message body; a Lava-Schema other than [ReceiptSchema], or a
// body that is not a lava.v1.Receipt, is [ErrCorrupt].
func DecodeReceipt(h nats.Header, data []byte) (*lavav1.Receipt, error) {
	if schema := h.Get(bus.HeaderSchema); schema != "" && schema != ReceiptSchema {
		return nil, fmt.Errorf("%w: message of type %s", ErrCorrupt, schema)
	}
	r := &lavav1.Receipt{}
	if err := proto.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return r, nil
}
