// Command attest is Lava's attest service: it appends one signed receipt per PhaseChanged and
// per AnomalyDetected to the resource's chain in LAVA_RECEIPTS and serves ReceiptService. The
// logic is in github.com/lava-operator/lava/internal/service/attest; this command only reads its
// configuration (flags and LAVA_* variables) and runs it. See README.md.
package main
