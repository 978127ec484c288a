package anomaly

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
)

// Kind is the kind of an anomaly, PascalCase as upstream serializes it ("DriftDetected").
type Kind string

// Kinds (docs/dialect.md section 7.1 plus the failures docs/architecture.md section 3 names).
const (
	KindDriftDetected     Kind = "DriftDetected"
	KindSynthesisFailure  Kind = "SynthesisFailure"
	KindGateRejected      Kind = "GateRejected"
	KindApplyFailure      Kind = "ApplyFailure"
	KindDestroyFailure    Kind = "DestroyFailure"
	KindDependencyBlocked Kind = "DependencyBlocked"
	KindPolicyViolation   Kind = "PolicyViolation"
	KindStalled           Kind = "Stalled"
	// KindCustom is an extension kind named by [LavaAnomaly].ExtensionKind.
	KindCustom Kind = "Custom"
)

var kindProto = map[Kind]lavav1.AnomalyKind{
	KindDriftDetected:     lavav1.AnomalyKind_ANOMALY_KIND_DRIFT_DETECTED,
	KindSynthesisFailure:  lavav1.AnomalyKind_ANOMALY_KIND_SYNTHESIS_FAILURE,
	KindGateRejected:      lavav1.AnomalyKind_ANOMALY_KIND_GATE_REJECTED,
	KindApplyFailure:      lavav1.AnomalyKind_ANOMALY_KIND_APPLY_FAILURE,
	KindDestroyFailure:    lavav1.AnomalyKind_ANOMALY_KIND_DESTROY_FAILURE,
	KindDependencyBlocked: lavav1.AnomalyKind_ANOMALY_KIND_DEPENDENCY_BLOCKED,
	KindPolicyViolation:   lavav1.AnomalyKind_ANOMALY_KIND_POLICY_VIOLATION,
	KindStalled:           lavav1.AnomalyKind_ANOMALY_KIND_STALLED,
	KindCustom:            lavav1.AnomalyKind_ANOMALY_KIND_CUSTOM,
}

// Proto is the lava.v1 enum value of k (ANOMALY_KIND_UNSPECIFIED for an unknown kind).
func (k Kind) Proto() lavav1.AnomalyKind { return kindProto[k] }

// KindOf is the Kind of a lava.v1 enum value; false for UNSPECIFIED or an unknown value.
func KindOf(k lavav1.AnomalyKind) (Kind, bool) {
	for kind, p := range kindProto {
		if p == k {
			return kind, true
		}
	}
	return "", false
}

// Severity is an anomaly's severity, lowercase as upstream serializes it. Order: cosmetic <
// functional < critical.
type Severity string

// Severities.
const (
	SeverityCosmetic   Severity = "cosmetic"
	SeverityFunctional Severity = "functional"
	SeverityCritical   Severity = "critical"
)

// Proto is the lava.v1 enum value of s (SEVERITY_UNSPECIFIED for an unknown severity).
func (s Severity) Proto() lavav1.Severity {
	switch s {
	case SeverityCosmetic:
		return lavav1.Severity_SEVERITY_COSMETIC
	case SeverityFunctional:
		return lavav1.Severity_SEVERITY_FUNCTIONAL
	case SeverityCritical:
		return lavav1.Severity_SEVERITY_CRITICAL
	}
	return lavav1.Severity_SEVERITY_UNSPECIFIED
}

// SeverityOf is the Severity of a lava.v1 enum value; false for UNSPECIFIED.
func SeverityOf(s lavav1.Severity) (Severity, bool) {
	switch s {
	case lavav1.Severity_SEVERITY_COSMETIC:
		return SeverityCosmetic, true
	case lavav1.Severity_SEVERITY_FUNCTIONAL:
		return SeverityFunctional, true
	case lavav1.Severity_SEVERITY_CRITICAL:
		return SeverityCritical, true
	}
	return "", false
}

// DefaultSeverity is the severity of an anomaly of kind k that does not carry its own (docs/architecture.md
// section 3): SynthesisFailure, GateRejected, DependencyBlocked and PolicyViolation are
// functional; ApplyFailure, DestroyFailure and Stalled critical; DriftDetected and Custom carry
// their own (functional when they do not).
func DefaultSeverity(k Kind) Severity {
	switch k {
	case KindApplyFailure, KindDestroyFailure, KindStalled:
		return SeverityCritical
	}
	return SeverityFunctional
}

// Source is the resource an anomaly is about.
type Source struct {
	// Cluster names the cluster the operator runs in; empty when not configured.
	Cluster string `json:"cluster"`
	// Namespace and Name are the LavaArchitecture's (raw Kubernetes values).
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// UID is the LavaArchitecture's metadata.uid (an input of the fingerprint).
	UID string `json:"uid,omitempty"`
}

// LavaAnomaly is a typed anomaly (docs/dialect.md section 7.1; JSON camelCase, kind PascalCase, severity
// lowercase). The wire form on the bus is lava.v1.AnomalyDetected ([LavaAnomaly.Proto]).
type LavaAnomaly struct {
	// Kind of the anomaly.
	Kind Kind `json:"kind"`
	// ExtensionKind names a Custom kind (lowercase snake case, it becomes the subject token);
	// empty otherwise.
	ExtensionKind string `json:"extensionKind,omitempty"`
	// Severity of the anomaly.
	Severity Severity `json:"severity"`
	// Source is the resource.
	Source Source `json:"source"`
	// Message is human-readable and sanitized ([Sanitize]): it never carries secret values.
	Message string `json:"message"`
	// EmittedAt is when the anomaly was built (UTC).
	EmittedAt time.Time `json:"emittedAt"`
	// Metadata is kind-specific detail (drifted_fields, spec_hash, stage, reason, plan_id, ...),
	// sanitized; JSON orders its keys.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Labels are the resource's metadata.labels (routing rules match on them).
	Labels map[string]string `json:"labels,omitempty"`
	// Generation is the metadata.generation the anomaly is about.
	Generation int64 `json:"generation,omitempty"`
	// Discriminator is the stable input of the fingerprint besides kind, source and severity
	// (the Terraform JSON digest for drift, "stage/reason" for a failure, ...).
	Discriminator string `json:"discriminator,omitempty"`
	// Fingerprint is [LavaAnomaly.ComputeFingerprint], 64 lowercase hex digits.
	Fingerprint string `json:"fingerprint"`
}

// ComputeFingerprint is [Fingerprint] of a's kind, extension kind, source uid (namespace/name
// when the uid is unknown), severity and discriminator.
func (a *LavaAnomaly) ComputeFingerprint() string {
	src := a.Source.UID
	if src == "" {
		src = a.Source.Namespace + "/" + a.Source.Name
	}
	return Fingerprint(a.Kind.Proto(), a.ExtensionKind, src, a.Severity.Proto(), a.Discriminator)
}

// Fingerprint is the de-duplication key of anomaly.proto ([pipeline.Fingerprint]: BLAKE3-256
// of kind, extension kind, resource uid, severity and discriminator, 64 lowercase hex
// digits). viggy computes the same function for its escalation anomalies, so they and the
// DriftDetected this service derives from the same scan share a fingerprint. Times, messages and secret values are never
// inputs.
func Fingerprint(kind lavav1.AnomalyKind, extension, uid string, sev lavav1.Severity, discriminator string) string {
	return pipeline.Fingerprint(kind, extension, uid, sev, discriminator)
}

// ErrInvalid reports an anomaly that cannot be published: no kind or severity, a Custom kind
// without a valid extension kind, or no source resource.
var ErrInvalid = errors.New("anomaly: invalid")

// Validate checks what every sink needs. Errors wrap [ErrInvalid].
func (a *LavaAnomaly) Validate() error {
	switch {
	case a.Kind.Proto() == lavav1.AnomalyKind_ANOMALY_KIND_UNSPECIFIED:
		return fmt.Errorf("%w: kind %q", ErrInvalid, a.Kind)
	case a.Severity.Proto() == lavav1.Severity_SEVERITY_UNSPECIFIED:
		return fmt.Errorf("%w: severity %q", ErrInvalid, a.Severity)
	case a.Kind == KindCustom && !isWord(a.ExtensionKind):
		return fmt.Errorf("%w: extension kind %q is not lowercase snake case", ErrInvalid, a.ExtensionKind)
	case a.Kind != KindCustom && a.ExtensionKind != "":
		return fmt.Errorf("%w: extension kind %q on kind %s", ErrInvalid, a.ExtensionKind, a.Kind)
	case a.Source.Namespace == "" || a.Source.Name == "":
		return fmt.Errorf("%w: no source resource", ErrInvalid)
	}
	return nil
}

// KindToken is the subject token of a's kind: the kind in snake case ("apply_failure"), or the
// extension kind for Custom.
func (a *LavaAnomaly) KindToken() string {
	if a.Kind == KindCustom {
		return a.ExtensionKind
	}
	return snake(string(a.Kind))
}

func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isWord(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Proto is a as lava.v1.AnomalyDetected without an envelope, count 1 and first/last sighting
// at EmittedAt; [Service] fills the envelope, count, sightings and action.
func (a *LavaAnomaly) Proto() *lavav1.AnomalyDetected {
	at := timestamppb.New(a.EmittedAt.UTC())
	return &lavav1.AnomalyDetected{
		Kind:          a.Kind.Proto(),
		ExtensionKind: a.ExtensionKind,
		Severity:      a.Severity.Proto(),
		Source:        &lavav1.ResourceRef{Namespace: a.Source.Namespace, Name: a.Source.Name, Uid: a.Source.UID},
		Cluster:       a.Source.Cluster,
		Message:       a.Message,
		Metadata:      maps.Clone(a.Metadata),
		Fingerprint:   a.Fingerprint,
		Count:         1,
		FirstSeen:     at,
		LastSeen:      at,
		Labels:        maps.Clone(a.Labels),
	}
}
