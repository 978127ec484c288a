package readmodel

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gowebpki/jcs"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"
	"lukechampine.com/blake3"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// Receipt kinds (Receipt.kind, docs/dialect.md section 8.1).
const (
	// KindOutcome is a receipt of a phase outcome (a PhaseChanged or a TickReported); its
	// payload is an OutcomePayload.
	KindOutcome = "lava.outcome"
	// KindAnomaly is a receipt of an anomaly (an AnomalyDetected); its payload is an
	// AnomalyPayload.
	KindAnomaly = "lava.anomaly"
)

// EncodingV1 is the first (and current) version of the canonical encoding; receipts carry it
// in encoding_version and in the "v" member of the encoded object.
const EncodingV1 uint32 = 1

// HashSize is the size of a content hash in bytes (BLAKE3-256).
const HashSize = 32

// ErrUnsupportedEncoding reports a receipt whose encoding_version this package cannot encode.
var ErrUnsupportedEncoding = errors.New("readmodel: unsupported encoding_version")

// Genesis is the prev_hash of the first receipt of every chain: 32 zero bytes. It returns a
// new slice each time.
func Genesis() []byte { return make([]byte, HashSize) }

// Hex formats a hash as lowercase hex (64 digits for a 32-byte hash; "" for none).
func Hex(h []byte) string { return hex.EncodeToString(h) }

// ParseHash parses 64 hex digits (either case, surrounding whitespace ignored) into a 32-byte
// hash or key.
func ParseHash(s string) ([]byte, error) {
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("readmodel: parse hex: %w", err)
	}
	if len(b) != HashSize {
		return nil, fmt.Errorf("readmodel: parse hex: %d bytes, want %d", len(b), HashSize)
	}
	return b, nil
}

// timestampLayout is RFC 3339 in UTC with exactly nine fractional digits.
const timestampLayout = "2006-01-02T15:04:05.000000000Z"

// FormatTimestamp formats t as the canonical encoding does: RFC 3339, UTC, always nine
// fractional digits ("2026-11-30T00:15:31.120000000Z").
func FormatTimestamp(t time.Time) string { return t.UTC().Format(timestampLayout) }

// Canonical returns the canonical encoding of r that its content hash is computed over, for
// r.encoding_version (only [EncodingV1] exists). Everything but content_hash and signature is
// encoded; the signature signs the hash, so it cannot be part of it.
//
// Version 1 (docs/design/0002-receipt-encoding.md) is the RFC 8785 (JCS) serialization of one
// JSON object:
//
//	{"v": 1, "sequence": "<uint64 decimal>", "timestamp": "<RFC 3339 UTC, 9 fraction digits>",
//	 "kind": "lava.outcome"|"lava.anomaly", "prevHash": "<64 lowercase hex>", "payload": P}
//
// P is {"outcome": O}, {"anomaly": A}, or {} when no payload is set. Every member of O and A is
// always present (empty strings, empty arrays, empty objects and null for unset messages are
// written, never omitted); 64-bit integers are decimal strings and 32-bit integers JSON
// numbers; enums are their full proto names ("PHASE_APPLIED"), or the decimal number as a
// string for a value the schema does not name; bytes are lowercase hex; timestamps are as
// above, or null when unset; maps are JSON objects (JCS sorts their keys).
//
//	O = {"resource": R, "generation": "<n>", "sourceDigest", "terraformJsonDigest", "planId",
//	     "phase", "reason", "changeSummary": null|{"add","change","destroy"},
//	     "diagnostics": [..], "eventId"}
//	A = {"anomaly": D|null, "action": "<RemediationAction>", "anomalyHash": "<hex>"}
//	D = {"envelope": E|null, "kind", "extensionKind", "severity", "source": R, "cluster",
//	     "message", "metadata": {..}, "fingerprint", "count": "<n>", "firstSeen", "lastSeen",
//	     "action", "labels": {..}}
//	E = {"eventId", "occurredAt", "source", "resource": R, "generation": "<n>",
//	     "correlationId", "trigger"}
//	R = null | {"namespace", "name", "uid"}
//
// Strings are valid UTF-8 in every receipt that went through protobuf (the binary encoding
// rejects anything else). Errors: [ErrUnsupportedEncoding].
func Canonical(r *lavav1.Receipt) ([]byte, error) {
	if v := r.GetEncodingVersion(); v != EncodingV1 {
		return nil, fmt.Errorf("%w %d", ErrUnsupportedEncoding, v)
	}
	obj := map[string]any{
		"v":         EncodingV1,
		"sequence":  strconv.FormatUint(r.GetSequence(), 10),
		"timestamp": timestamp(r.GetTimestamp()),
		"kind":      r.GetKind(),
		"prevHash":  Hex(r.GetPrevHash()),
		"payload":   payloadObject(r.GetPayload()),
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("readmodel: canonical encoding: %w", err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("readmodel: canonical encoding: %w", err)
	}
	return out, nil
}

// ContentHash returns BLAKE3-256 of [Canonical](r): the value r.content_hash must have.
func ContentHash(r *lavav1.Receipt) ([]byte, error) {
	enc, err := Canonical(r)
	if err != nil {
		return nil, err
	}
	sum := blake3.Sum256(enc)
	return sum[:], nil
}

// AnomalyHash returns the anomaly_hash of an AnomalyPayload: BLAKE3-256 of the anomaly's
// deterministic binary protobuf encoding (proto.MarshalOptions{Deterministic: true}).
func AnomalyHash(a *lavav1.AnomalyDetected) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("readmodel: anomaly hash: %w", err)
	}
	sum := blake3.Sum256(b)
	return sum[:], nil
}

func timestamp(ts *timestamppb.Timestamp) any {
	if ts == nil {
		return nil
	}
	return FormatTimestamp(ts.AsTime())
}

func enumName(e protoreflect.Enum) string {
	n := e.Number()
	if v := e.Descriptor().Values().ByNumber(n); v != nil {
		return string(v.Name())
	}
	return strconv.FormatInt(int64(n), 10)
}

func resourceObject(r *lavav1.ResourceRef) any {
	if r == nil {
		return nil
	}
	return map[string]any{"namespace": r.GetNamespace(), "name": r.GetName(), "uid": r.GetUid()}
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func payloadObject(p *lavav1.ReceiptPayload) map[string]any {
	switch k := p.GetKind().(type) {
	case *lavav1.ReceiptPayload_Outcome:
		return map[string]any{"outcome": outcomeObject(k.Outcome)}
	case *lavav1.ReceiptPayload_Anomaly:
		return map[string]any{"anomaly": anomalyPayloadObject(k.Anomaly)}
	}
	return map[string]any{}
}

func outcomeObject(o *lavav1.OutcomePayload) map[string]any {
	var summary any
	if cs := o.GetChangeSummary(); cs != nil {
		summary = map[string]any{"add": cs.GetAdd(), "change": cs.GetChange(), "destroy": cs.GetDestroy()}
	}
	diags := o.GetDiagnostics()
	if diags == nil {
		diags = []string{}
	}
	return map[string]any{
		"resource":            resourceObject(o.GetResource()),
		"generation":          strconv.FormatInt(o.GetGeneration(), 10),
		"sourceDigest":        o.GetSourceDigest(),
		"terraformJsonDigest": o.GetTerraformJsonDigest(),
		"planId":              o.GetPlanId(),
		"phase":               enumName(o.GetPhase()),
		"reason":              o.GetReason(),
		"changeSummary":       summary,
		"diagnostics":         diags,
		"eventId":             o.GetEventId(),
	}
}

func anomalyPayloadObject(a *lavav1.AnomalyPayload) map[string]any {
	var d any
	if an := a.GetAnomaly(); an != nil {
		d = anomalyObject(an)
	}
	return map[string]any{
		"anomaly":     d,
		"action":      enumName(a.GetAction()),
		"anomalyHash": Hex(a.GetAnomalyHash()),
	}
}

func anomalyObject(a *lavav1.AnomalyDetected) map[string]any {
	var env any
	if e := a.GetEnvelope(); e != nil {
		env = map[string]any{
			"eventId":       e.GetEventId(),
			"occurredAt":    timestamp(e.GetOccurredAt()),
			"source":        e.GetSource(),
			"resource":      resourceObject(e.GetResource()),
			"generation":    strconv.FormatInt(e.GetGeneration(), 10),
			"correlationId": e.GetCorrelationId(),
			"trigger":       e.GetTrigger(),
		}
	}
	return map[string]any{
		"envelope":      env,
		"kind":          enumName(a.GetKind()),
		"extensionKind": a.GetExtensionKind(),
		"severity":      enumName(a.GetSeverity()),
		"source":        resourceObject(a.GetSource()),
		"cluster":       a.GetCluster(),
		"message":       a.GetMessage(),
		"metadata":      stringMap(a.GetMetadata()),
		"fingerprint":   a.GetFingerprint(),
		"count":         strconv.FormatInt(a.GetCount(), 10),
		"firstSeen":     timestamp(a.GetFirstSeen()),
		"lastSeen":      timestamp(a.GetLastSeen()),
		"action":        enumName(a.GetAction()),
		"labels":        stringMap(a.GetLabels()),
	}
}
