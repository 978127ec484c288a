package pipeline

import (
	"encoding/hex"
	"strconv"

	"lukechampine.com/blake3"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// Fingerprint is the de-duplication key of anomaly.proto: BLAKE3-256 over the fields
// ("lava.anomaly.fingerprint.v1", kind enum name, extension kind, resource uid, severity enum
// name, discriminator), each written as its decimal byte length, ":" and its bytes; 64
// lowercase hex digits. The anomaly service and viggy both compute it here, so an anomaly viggy
// publishes and one the anomaly service derives from the same fact share a fingerprint.
// Times, messages and secret values are never inputs.
func Fingerprint(kind lavav1.AnomalyKind, extension, uid string, sev lavav1.Severity, discriminator string) string {
	var b []byte
	for _, f := range []string{"lava.anomaly.fingerprint.v1", kind.String(), extension, uid, sev.String(), discriminator} {
		b = strconv.AppendInt(b, int64(len(f)), 10)
		b = append(b, ':')
		b = append(b, f...)
	}
	sum := blake3.Sum256(b)
	return hex.EncodeToString(sum[:])
}
