// Package attest keeps Lava's receipts: per resource, an append-only, hash-linked and Ed25519
// signed chain of what happened to it (docs/architecture.md section 6, docs/dialect.md section 8), stored in the JetStream
// stream LAVA_RECEIPTS on the subject lava.v1.receipt.<ns>.<name>.
//
// # Receipts
//
// The receipt format lives in internal/readmodel, which the CLI reads too: a receipt
// (lavav1.Receipt) has a sequence (0, 1, 2 ... per resource), a timestamp, a kind
// (readmodel.KindOutcome for a PhaseChanged or TickReported, readmodel.KindAnomaly for an
// AnomalyDetected), the content hash of the previous receipt (readmodel.Genesis for the first),
// a payload, its own content hash and a signature. The content hash is BLAKE3-256 over the
// canonical encoding readmodel.Canonical (version readmodel.EncodingV1,
// docs/design/0002-receipt-encoding.md); the signature is Ed25519 over the 32 raw content-hash
// bytes (readmodel.Signer). This package is the service that writes them.
//
// # Appending
//
// [Store.Append] reads the chain's tail and publishes the next receipt (readmodel.NewReceipt,
// readmodel.EncodeReceipt) with JetStream's expected-last-subject-sequence check, retrying on a
// conflict, so any number of attest replicas append to one chain without ever forking it. The
// receipt id ([ReceiptID], derived from the attested event's event_id) is the Nats-Msg-Id, and
// the recent tail is searched for the event id, so a redelivered event is recorded once. A
// foreign message on a chain's subject (readmodel.Foreign) is skipped, and [ForeignReporter]
// reports it as a critical anomaly.
//
// # Order
//
// A chain holds the receipts of its resource's PhaseChanged and TickReported in their
// LAVA_PHASES stream order, with any number of replicas and handlers: every receipt carries
// readmodel.HeaderPhasesSeq, and [Service.Handle] of the event at stream sequence S first appends the
// receipts of the resource's events stored after the head's value and before S, read from
// LAVA_PHASES by subject ([AppendRequest].Earlier), each behind the expected-sequence check, so
// racing replicas converge; an event at or below the head's value is already recorded
// (docs/design/0018-receipt-order-across-replicas.md). Anomalies are appended as they come.
//
// # Serving
//
// [Service] consumes PhaseChanged, TickReported and AnomalyDetected, appends one receipt for
// each and publishes ReceiptAppended; [Handler] serves ReceiptService (GetChain, VerifyChain)
// over connect, reading with readmodel.ReadChain and verifying with readmodel.Verify (upstream's
// verify_chain); [Run] wires it all for services/attest and `lava up`.
package attest
