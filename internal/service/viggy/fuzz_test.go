package viggy

import (
	"encoding/json"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
)

// FuzzRecordPolicy decodes arbitrary bytes as viggy's per-resource record (JSON, as load reads
// it from the viggy bucket) and its remediation policy (binary protobuf, copied from the
// ResourceObserved; Record.policy), then routes every severity (ActionFor) and every tier
// (TierWait): nothing panics, every action is a known one (Alert for an unknown or unset
// value, NoOp for a clean scan) and every tier wait is positive.
func FuzzRecordPolicy(f *testing.F) {
	withTiers := &lavav1.RemediationPolicy{Cosmetic: lavav1.RemediationAction_REMEDIATION_ACTION_ALERT,
		Functional: lavav1.RemediationAction_REMEDIATION_ACTION_AUTO_CORRECT, Critical: lavav1.RemediationAction_REMEDIATION_ACTION_ESCALATE,
		EscalationTiers: []*lavav1.EscalationTier{{Team: "net", WaitBeforeNext: durationpb.New(time.Minute)}, {Team: "sre"}}}
	for _, p := range []*lavav1.RemediationPolicy{pipeline.DefaultRemediation(), withTiers} {
		b, err := proto.Marshal(p)
		if err != nil {
			f.Fatal(err)
		}
		rec, err := json.Marshal(&Record{Namespace: "ns", Name: "n", UID: "u", Generation: 3, Policy: b, Interval: time.Minute,
			Retry: &Retry{Stage: 3, Attempt: 2, FailedEventID: "f", Generation: 3}, Escalation: &Escalation{Tier: 1}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(rec)
	}
	f.Add([]byte(`{"policy":"CAEQAhgD","escalation":{"tier":-1}}`))
	f.Add([]byte(`{"policy":"////"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &Record{}
		if json.Unmarshal(data, r) != nil {
			return
		}
		p := r.policy()
		if p == nil {
			t.Fatal("Record.policy returned nil")
		}
		for sev := range lavav1.Severity_name {
			a := ActionFor(p, lavav1.Severity(sev))
			if _, known := lavav1.RemediationAction_name[int32(a)]; !known || a == lavav1.RemediationAction_REMEDIATION_ACTION_UNSPECIFIED {
				t.Fatalf("ActionFor(%v) = %v, not a known action", lavav1.Severity(sev), a)
			}
			if sev == int32(lavav1.Severity_SEVERITY_UNSPECIFIED) && a != lavav1.RemediationAction_REMEDIATION_ACTION_NO_OP {
				t.Fatalf("a clean scan routes to %v, want NoOp", a)
			}
		}
		for i := -1; i <= len(p.GetEscalationTiers()); i++ {
			if d := TierWait(p, i); d <= 0 {
				t.Fatalf("TierWait(%d) = %v, want a positive wait", i, d)
			}
		}
		if r.Escalation != nil && (r.Escalation.Tier < 0 || r.Escalation.Tier >= len(p.GetEscalationTiers())) && tierTeam(p, r.Escalation.Tier) != "" {
			t.Fatalf("tier %d of %d has a team", r.Escalation.Tier, len(p.GetEscalationTiers()))
		}
	})
}
