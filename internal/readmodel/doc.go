// Package readmodel is what the CLI and the read RPCs show, in the form it is stored: the
// applier's per-resource record in lava-state and the receipt chains in LAVA_RECEIPTS. The
// services that write them (internal/service/applier, internal/service/attest) use these types
// and functions; `lava state show`, `lava plan show` and `lava receipts` read through them
// without importing a service.
//
// # The applier's record
//
// [Record] is the JSON the applier keeps per resource under [RecordKey] ("applier.<ns>.<name>"):
// the plan held for approval, the recent plan ids, the applied plan ids, the handled event ids
// and the last applied configuration ([LastApplied]: with the state serial, lineage and body
// digest the apply left, against which the applier detects a lost or regressed state and from
// which `lava state restore` puts it back). [Load] reads it; [ReadRecord] also returns
// the revision the applier's compare-and-set write expects.
//
// # Receipts
//
// A receipt (lavav1.Receipt) has a sequence (0, 1, 2 ... per resource), a timestamp, a kind
// ([KindOutcome] for a PhaseChanged or TickReported, [KindAnomaly] for an AnomalyDetected), the
// content hash of the previous receipt ([Genesis] for the first), a payload
// ([OutcomeFromPhaseChanged], [OutcomeFromTick], [AnomalyFromDetected]), its own content hash
// and a signature. The content hash is BLAKE3-256 over the canonical encoding [Canonical]
// (version [EncodingV1], docs/design/0002-receipt-encoding.md); the signature is Ed25519 over
// the 32 raw content-hash bytes ([Signer]). [NewReceipt] builds the receipt that follows a
// chain's head.
//
// # Storage
//
// A receipt is stored as a message on lava.v1.receipt.<ns>.<name> in LAVA_RECEIPTS
// ([EncodeReceipt], [DecodeReceipt]) with the headers [HeaderEventID], [HeaderPrevSeq],
// [HeaderReceiptSequence] and [HeaderPhasesSeq]. [ReadChain] reads a chain in stream order;
// only attest appends receipts, so a message on the subject that is not the chain's next
// receipt is skipped and returned as [Foreign] (docs/security.md, "Receipts"), and never makes
// the chain unreadable.
//
// # Verifying
//
// [Verify] checks a chain exactly as upstream's verify_chain does (sequence, links, hashes,
// signatures, time order) with upstream's failure messages, plus a require-signatures mode and
// a pinned public key ([VerifyOptions], [LoadPublicKey]).
package readmodel
