package anomaly

import "github.com/lava-operator/lava/internal/pipeline"

// Redacted replaces a secret value in anomaly text (the same text the engines use).
const Redacted = pipeline.Redacted

// MaxMessageBytes bounds an anomaly message and each metadata value (the Kubernetes Event note
// limit is 1 KiB).
const MaxMessageBytes = pipeline.MaxMessageBytes

// Sanitize returns s with secret-looking values replaced by [Redacted], cut to
// [MaxMessageBytes] on a rune boundary ([pipeline.Sanitize]). Publishers already redact the
// secrets they know (binding values, sensitive outputs); this is the anomaly boundary's second
// line, so no anomaly payload, webhook body, alert or Kubernetes Event carries one.
func Sanitize(s string) string { return pipeline.Sanitize(s) }
