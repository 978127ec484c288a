package anomaly

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// stageWord is the lowercase name of a stage ("apply").
func stageWord(s lavav1.Stage) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "STAGE_"))
}

func base(env *lavav1.Envelope, cluster string, now time.Time) LavaAnomaly {
	r := env.GetResource()
	return LavaAnomaly{
		Source:     Source{Cluster: cluster, Namespace: r.GetNamespace(), Name: r.GetName(), UID: r.GetUid()},
		EmittedAt:  now.UTC(),
		Generation: env.GetGeneration(),
		Metadata:   map[string]string{},
	}
}

// finish sanitizes, drops empty metadata and computes the fingerprint.
func finish(a LavaAnomaly) LavaAnomaly {
	a.Message = Sanitize(a.Message)
	for k, v := range a.Metadata {
		if v == "" {
			delete(a.Metadata, k)
			continue
		}
		a.Metadata[k] = Sanitize(v)
	}
	if len(a.Metadata) == 0 {
		a.Metadata = nil
	}
	a.Fingerprint = a.ComputeFingerprint()
	return a
}

// FromFailed is the anomaly of a Failed event, or false when the failure is none
// (PlanSuperseded, or no stage): reason RetriesExhausted is Stalled (critical); reason
// GateRejected is GateRejected (functional); stage SYNTH is SynthesisFailure (functional);
// PLAN and APPLY are ApplyFailure, DESTROY is DestroyFailure (critical). The discriminator is
// "stage/reason" ("" for Stalled, as every Stalled anomaly), so retries of one failure share a fingerprint.
// Metadata: stage, reason, attempt, retryable, plan_id.
func FromFailed(f *lavav1.Failed, cluster string, now time.Time) (LavaAnomaly, bool) {
	a := base(f.GetEnvelope(), cluster, now)
	stage, reason := stageWord(f.GetStage()), f.GetReason()
	a.Discriminator = stage + "/" + reason
	switch {
	case reason == v1alpha1.ReasonPlanSuperseded:
		return LavaAnomaly{}, false
	case reason == v1alpha1.ReasonRetriesExhausted:
		a.Kind, a.Discriminator = KindStalled, ""
	case reason == v1alpha1.ReasonGateRejected:
		a.Kind = KindGateRejected
	case f.GetStage() == lavav1.Stage_STAGE_SYNTH:
		a.Kind = KindSynthesisFailure
	case f.GetStage() == lavav1.Stage_STAGE_PLAN, f.GetStage() == lavav1.Stage_STAGE_APPLY:
		a.Kind = KindApplyFailure
	case f.GetStage() == lavav1.Stage_STAGE_DESTROY:
		a.Kind = KindDestroyFailure
	default:
		return LavaAnomaly{}, false
	}
	a.Severity = DefaultSeverity(a.Kind)
	a.Message = fmt.Sprintf("%s failed: %s", stage, reason)
	if m := f.GetMessage(); m != "" {
		a.Message += ": " + m
	}
	a.Metadata["stage"] = stage
	a.Metadata["reason"] = reason
	a.Metadata["attempt"] = strconv.Itoa(int(max(f.GetAttempt(), 1)))
	a.Metadata["retryable"] = strconv.FormatBool(f.GetRetryable())
	a.Metadata["plan_id"] = f.GetPlanId()
	return finish(a), true
}

// FromDriftScanned is the DriftDetected anomaly of a scan with findings (false for a clean
// scan, docs/dialect.md section 7.2): severity the scan's maximum (the highest finding's when unset), message
// "drift detected: N field(s)", metadata drifted_fields (N), spec_hash and
// terraform_json_digest (the declared configuration's digest, the discriminator), plan_id and
// the drifted addresses (up to 20, comma-separated; values never).
func FromDriftScanned(d *lavav1.DriftScanned, cluster string, now time.Time) (LavaAnomaly, bool) {
	n := len(d.GetFindings())
	if n == 0 {
		return LavaAnomaly{}, false
	}
	a := base(d.GetEnvelope(), cluster, now)
	a.Kind = KindDriftDetected
	sev := d.GetMaxSeverity()
	for _, f := range d.GetFindings() {
		sev = max(sev, f.GetSeverity())
	}
	a.Severity, _ = SeverityOf(sev)
	if a.Severity == "" {
		a.Severity = SeverityCosmetic
	}
	a.Message = fmt.Sprintf("drift detected: %d field(s)", n)
	a.Discriminator = d.GetTerraformJsonDigest()
	a.Metadata["drifted_fields"] = strconv.Itoa(n)
	a.Metadata["spec_hash"] = d.GetTerraformJsonDigest()
	a.Metadata["terraform_json_digest"] = d.GetTerraformJsonDigest()
	a.Metadata["plan_id"] = d.GetPlanId()
	var addrs []string
	for _, f := range d.GetFindings() {
		addr := f.GetAddress()
		if f.GetAttribute() != "" && f.GetAttribute() != "*" {
			addr += "." + f.GetAttribute()
		}
		if len(addrs) < 20 {
			addrs = append(addrs, addr)
		}
	}
	a.Metadata["drifted"] = strings.Join(addrs, ",")
	return finish(a), true
}

// FromPhaseChanged is the anomaly of a transition into a stuck state, or false: reason
// DependencyNotReady or DependencyCycle is DependencyBlocked (functional, discriminator the
// reason); reason RetriesExhausted or Stalled is Stalled (critical, no discriminator, as
// FromFailed's). Other transitions (a failure included: its Failed event is the anomaly) are none.
// Metadata: reason, phase, observed_phase (from).
func FromPhaseChanged(pc *lavav1.PhaseChanged, cluster string, now time.Time) (LavaAnomaly, bool) {
	a := base(pc.GetEnvelope(), cluster, now)
	switch pc.GetReason() {
	case v1alpha1.ReasonDependencyNotReady, v1alpha1.ReasonDependencyCycle:
		a.Kind, a.Discriminator = KindDependencyBlocked, pc.GetReason()
	case v1alpha1.ReasonRetriesExhausted, v1alpha1.ReasonStalled:
		a.Kind = KindStalled
	default:
		return LavaAnomaly{}, false
	}
	a.Severity = DefaultSeverity(a.Kind)
	a.Message = pc.GetReason()
	if m := pc.GetMessage(); m != "" {
		a.Message += ": " + m
	}
	a.Metadata["reason"] = pc.GetReason()
	a.Metadata["phase"] = strings.TrimPrefix(pc.GetTo().String(), "PHASE_")
	a.Metadata["from_phase"] = strings.TrimPrefix(pc.GetFrom().String(), "PHASE_")
	a.Metadata["plan_id"] = pc.GetPlanId()
	a.Metadata["terraform_json_digest"] = pc.GetTerraformJsonDigest()
	return finish(a), true
}

// FromDetected is the anomaly of an AnomalyDetected another service published: its kind,
// extension kind, severity, source, message and metadata (sanitized again), labels and
// generation. Its fingerprint is kept when it is 64 hex digits, else computed with an empty
// discriminator. EmittedAt is its first sighting, or now.
func FromDetected(d *lavav1.AnomalyDetected, now time.Time) (LavaAnomaly, error) {
	kind, ok := KindOf(d.GetKind())
	if !ok {
		return LavaAnomaly{}, fmt.Errorf("%w: kind %v", ErrInvalid, d.GetKind())
	}
	sev, ok := SeverityOf(d.GetSeverity())
	if !ok {
		return LavaAnomaly{}, fmt.Errorf("%w: severity %v", ErrInvalid, d.GetSeverity())
	}
	src := d.GetSource()
	if src.GetName() == "" {
		src = d.GetEnvelope().GetResource()
	}
	a := LavaAnomaly{
		Kind: kind, ExtensionKind: d.GetExtensionKind(), Severity: sev,
		Source:     Source{Cluster: d.GetCluster(), Namespace: src.GetNamespace(), Name: src.GetName(), UID: src.GetUid()},
		Message:    d.GetMessage(),
		EmittedAt:  now.UTC(),
		Metadata:   maps.Clone(d.GetMetadata()),
		Labels:     maps.Clone(d.GetLabels()),
		Generation: d.GetEnvelope().GetGeneration(),
	}
	if d.GetFirstSeen() != nil {
		a.EmittedAt = d.GetFirstSeen().AsTime().UTC()
	}
	if err := a.Validate(); err != nil {
		return LavaAnomaly{}, err
	}
	fp := d.GetFingerprint()
	a = finish(a)
	if isHex64(fp) {
		a.Fingerprint = fp
	}
	return a, nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
