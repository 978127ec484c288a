package eventid

import (
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"
	"lukechampine.com/blake3"
)

// Domain is the first field of the encoding hashed by [ID]. It versions the encoding: a
// different encoding must use a different domain, so ids of two encodings never collide.
const Domain = "lava.event_id.v1"

// Size is the length of an id in bytes before hex encoding; [ID] returns 2*Size hex digits.
const Size = 32

// ID returns the event_id of an event: 64 lowercase hex digits of the BLAKE3-256 digest of
// Encode(uid, generation, eventType, trigger).
//
// uid is the resource's metadata.uid, generation its metadata.generation, eventType the
// fully-qualified protobuf message name of the event (see [Type], e.g. "lava.v1.Synthesized"),
// and trigger what caused the event (see the *Trigger functions). The result is a contract:
// services in different processes and versions compute the same id for the same fact.
func ID(uid string, generation int64, eventType, trigger string) string {
	sum := blake3.Sum256(Encode(uid, generation, eventType, trigger))
	return hex.EncodeToString(sum[:])
}

// Encode returns the byte string [ID] hashes. It is five fields in this order:
//
//	Domain, uid, generation, eventType, trigger
//
// each written as an 8-byte big-endian unsigned length followed by that many bytes. Strings are
// their UTF-8 bytes, unchanged; generation is 8 bytes, big-endian two's complement. Because
// every field carries its length, no two distinct inputs encode to the same bytes
// ("ab"+"c" and "a"+"bc" differ).
func Encode(uid string, generation int64, eventType, trigger string) []byte {
	n := 5*8 + len(Domain) + len(uid) + 8 + len(eventType) + len(trigger)
	b := make([]byte, 0, n)
	b = appendField(b, []byte(Domain))
	b = appendField(b, []byte(uid))
	var g [8]byte
	binary.BigEndian.PutUint64(g[:], uint64(generation))
	b = appendField(b, g[:])
	b = appendField(b, []byte(eventType))
	b = appendField(b, []byte(trigger))
	return b
}

func appendField(b, v []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(v)))
	return append(b, v...)
}

// Type returns the event type of m for [ID]: its fully-qualified protobuf message name
// ("lava.v1.Synthesized").
func Type(m proto.Message) string {
	return string(m.ProtoReflect().Descriptor().FullName())
}

// GenerationTrigger is the trigger of an event caused by a new metadata.generation:
// "generation:<n>" (n in decimal).
func GenerationTrigger(generation int64) string {
	return "generation:" + strconv.FormatInt(generation, 10)
}

// ReconcileTrigger is the trigger of an event caused by the annotation
// lava.pleme.io/reconcile-requested-at: "reconcile:<annotation value>".
func ReconcileTrigger(requestedAt string) string {
	return "reconcile:" + requestedAt
}

// PolicyTrigger is the trigger of an event caused by a change of the referenced
// RemediationPolicy: "policy:<metadata.resourceVersion>".
func PolicyTrigger(resourceVersion string) string {
	return "policy:" + resourceVersion
}

// SourceTrigger is the trigger part of an event caused by a Flux source's artifact
// (spec.sourceRef): "source:<artifact digest>", so each new artifact is a new pass.
func SourceTrigger(artifactDigest string) string {
	return "source:" + artifactDigest
}

// BindingsTrigger is the trigger part of an event caused by the content of the
// spec.bindingsFrom sources: "bindings:<digest>" (a digest that never reveals a Secret value;
// internal/service/watcher computes it).
func BindingsTrigger(digest string) string {
	return "bindings:" + digest
}

// RetryTrigger is the trigger of a retry and of the events of that attempt:
// "retry:<stage>:<attempt>", stage being the subject token ("synth", "plan", "apply",
// "destroy") and attempt the attempt number in decimal.
func RetryTrigger(stage string, attempt int) string {
	return "retry:" + stage + ":" + strconv.Itoa(attempt)
}

// LockWaitTrigger is the trigger of a RetryRequested that repeats an attempt after a Failed
// with reason Locked (a wait, not a new attempt): "lockwait:<stage>:<failed event_id>". Each
// Failed has its own id, so every wait gets a new RetryRequested.
func LockWaitTrigger(stage, failedEventID string) string {
	return "lockwait:" + stage + ":" + failedEventID
}

// CauseTrigger is the trigger of an event that follows from exactly one earlier event (a
// Synthesized from a ResourceObserved, a PhaseChanged from a Planned): "cause:<event_id>".
func CauseTrigger(causeEventID string) string {
	return "cause:" + causeEventID
}

// DriftTrigger is the trigger of a DriftScanned: "drift:<scannedAt>", the scan time in UTC
// RFC 3339 with nanoseconds (time.RFC3339Nano).
func DriftTrigger(scannedAt time.Time) string {
	return "drift:" + scannedAt.UTC().Format(time.RFC3339Nano)
}

// AnomalyTrigger is the trigger of an AnomalyDetected: "anomaly:<fingerprint>:<count>", so each
// raise of a fingerprint's count is a distinct event.
func AnomalyTrigger(fingerprint string, count int64) string {
	return "anomaly:" + fingerprint + ":" + strconv.FormatInt(count, 10)
}
