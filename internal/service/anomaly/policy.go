package anomaly

import (
	"time"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
)

// RequeueAfter is how soon a resource is looked at again after a decision (docs/dialect.md section 7.1):
// NoOp 10m, Alert 5m, AutoCorrect 30s, RequireApproval 2m, Escalate 1m; UNSPECIFIED reads as
// Alert.
func RequeueAfter(a lavav1.RemediationAction) time.Duration {
	switch a {
	case lavav1.RemediationAction_REMEDIATION_ACTION_NO_OP:
		return 10 * time.Minute
	case lavav1.RemediationAction_REMEDIATION_ACTION_AUTO_CORRECT:
		return 30 * time.Second
	case lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL:
		return 2 * time.Minute
	case lavav1.RemediationAction_REMEDIATION_ACTION_ESCALATE:
		return time.Minute
	}
	return 5 * time.Minute
}

// Decision is where a policy routes an anomaly.
type Decision struct {
	// Action is the policy's action for the anomaly's severity (never UNSPECIFIED).
	Action lavav1.RemediationAction
	// RequeueAfter is [RequeueAfter] of Action.
	RequeueAfter time.Duration
	// Escalation is the first escalation tier when Action is Escalate; nil otherwise.
	Escalation *lavav1.EscalationTier
}

// Router decides what a remediation policy does about an anomaly.
type Router interface {
	// Route returns the decision for a under p (nil p is pipeline.DefaultRemediation).
	Route(a LavaAnomaly, p *lavav1.RemediationPolicy) (Decision, error)
}

// PolicyRouter is upstream's PolicyRouter: the action is the policy's entry for the anomaly's
// severity (the kind is ignored; UNSPECIFIED reads as Alert); Escalate picks the first tier and
// fails with pipeline.ErrNoLadder without tiers.
type PolicyRouter struct{}

// Route implements [Router].
func (PolicyRouter) Route(a LavaAnomaly, p *lavav1.RemediationPolicy) (Decision, error) {
	if p == nil {
		p = pipeline.DefaultRemediation()
	}
	var act lavav1.RemediationAction
	switch a.Severity {
	case SeverityCritical:
		act = p.GetCritical()
	case SeverityFunctional:
		act = p.GetFunctional()
	default:
		act = p.GetCosmetic()
	}
	if act == lavav1.RemediationAction_REMEDIATION_ACTION_UNSPECIFIED {
		act = lavav1.RemediationAction_REMEDIATION_ACTION_ALERT
	}
	d := Decision{Action: act, RequeueAfter: RequeueAfter(act)}
	if act == lavav1.RemediationAction_REMEDIATION_ACTION_ESCALATE {
		tiers := p.GetEscalationTiers()
		if len(tiers) == 0 {
			return d, pipeline.ErrNoLadder
		}
		d.Escalation = tiers[0]
	}
	return d, nil
}
