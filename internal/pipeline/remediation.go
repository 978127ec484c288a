package pipeline

import (
	"errors"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// ErrNoLadder is the error of a policy that routes a severity to Escalate and has no
// escalation tiers (viggy's Decide beat, the anomaly service's PolicyRouter).
var ErrNoLadder = errors.New("escalation: Escalate set but no ladder")

// DefaultRemediation is the policy of a resource neither spec.remediation nor spec.remediationPolicyRef
// configures: api/v1alpha1.DefaultDriftRemediation (Alert / AutoCorrect / RequireApproval for
// cosmetic / functional / critical), origin DEFAULT, no escalation tiers. Each call returns a
// new message.
func DefaultRemediation() *lavav1.RemediationPolicy {
	d := v1alpha1.DefaultDriftRemediation()
	return &lavav1.RemediationPolicy{
		Cosmetic: ActionProto(d.Cosmetic), Functional: ActionProto(d.Functional), Critical: ActionProto(d.Critical),
		Origin: lavav1.PolicyOrigin_POLICY_ORIGIN_DEFAULT,
	}
}

// ActionProto maps a remediation action to the proto enum; empty or unknown is ALERT (the
// safe action: record and raise an anomaly, change nothing).
func ActionProto(a v1alpha1.RemediationAction) lavav1.RemediationAction {
	switch a {
	case v1alpha1.RemediationNoOp:
		return lavav1.RemediationAction_REMEDIATION_ACTION_NO_OP
	case v1alpha1.RemediationAutoCorrect:
		return lavav1.RemediationAction_REMEDIATION_ACTION_AUTO_CORRECT
	case v1alpha1.RemediationRequireApproval:
		return lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL
	case v1alpha1.RemediationEscalate:
		return lavav1.RemediationAction_REMEDIATION_ACTION_ESCALATE
	}
	return lavav1.RemediationAction_REMEDIATION_ACTION_ALERT
}

// ActionName is the CRD spelling of an action (api/v1alpha1.Remediation*: "NoOp", "Alert",
// "AutoCorrect", "RequireApproval", "Escalate"); UNSPECIFIED and unknown values are "Alert".
func ActionName(a lavav1.RemediationAction) string {
	switch a {
	case lavav1.RemediationAction_REMEDIATION_ACTION_NO_OP:
		return string(v1alpha1.RemediationNoOp)
	case lavav1.RemediationAction_REMEDIATION_ACTION_AUTO_CORRECT:
		return string(v1alpha1.RemediationAutoCorrect)
	case lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL:
		return string(v1alpha1.RemediationRequireApproval)
	case lavav1.RemediationAction_REMEDIATION_ACTION_ESCALATE:
		return string(v1alpha1.RemediationEscalate)
	}
	return string(v1alpha1.RemediationAlert)
}
