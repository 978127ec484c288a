package pipeline

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/eventid"
)

// ExtensionStateRegressed is the extension kind of the Custom anomaly reporting a state that
// regressed since the last apply (lowercase snake case, the subject token:
// lava.anomaly.critical.state_regressed, bus.StateRegressedAnomalySubject, which the
// applier's bus identity may publish).
const ExtensionStateRegressed = "state_regressed"

// StateRegressedAnomaly is the AnomalyDetected service publishes when it planned against a
// state that is gone or regressed since the apply of plan lastApplied (docs/design/0025): kind
// Custom, extension kind [ExtensionStateRegressed], severity critical (infrastructure may
// exist that no state records); source the cause's resource; message what regressed and that
// the plan against it needs its own approval (sanitized); metadata plan_id and
// last_applied_plan_id. The fingerprint's discriminator and the event id's
// trigger ("state_regressed:<plan id>") are the new plan id, so a redelivery reports it once.
func StateRegressedAnomaly(cause *lavav1.Envelope, service, planID, lastApplied, regressed string, now time.Time) *lavav1.AnomalyDetected {
	r := cause.GetResource()
	res := &lavav1.ResourceRef{Namespace: r.GetNamespace(), Name: r.GetName(), Uid: r.GetUid()}
	const kind, sev = lavav1.AnomalyKind_ANOMALY_KIND_CUSTOM, lavav1.Severity_SEVERITY_CRITICAL
	an := &lavav1.AnomalyDetected{
		Kind: kind, ExtensionKind: ExtensionStateRegressed, Severity: sev, Source: res,
		Message: Sanitize("state regressed: " + regressed + "; the plan against it has its own id " + planID +
			" and is applied only when approved by that id (spec.approvePlan: " + planID + "), whatever the approval policy"),
		Metadata:    map[string]string{"plan_id": planID, "last_applied_plan_id": lastApplied},
		Fingerprint: Fingerprint(kind, ExtensionStateRegressed, res.GetUid(), sev, planID),
		Count:       1, FirstSeen: timestamppb.New(now.UTC()), LastSeen: timestamppb.New(now.UTC()),
		Action: lavav1.RemediationAction_REMEDIATION_ACTION_ALERT,
	}
	trigger := "state_regressed:" + planID
	id := eventid.ID(res.GetUid(), cause.GetGeneration(), eventid.Type(an), trigger)
	correlation := cause.GetCorrelationId()
	if correlation == "" {
		correlation = cause.GetEventId()
	}
	an.Envelope = &lavav1.Envelope{EventId: id, OccurredAt: timestamppb.New(now.UTC()), Source: service, Resource: res,
		Generation: cause.GetGeneration(), CorrelationId: correlation, Trigger: trigger}
	return an
}
