package pipeline_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
)

// TestDefault: the proto default is the CRD default, action for action, with origin DEFAULT.
func TestDefault(t *testing.T) {
	t.Parallel()
	want := &lavav1.RemediationPolicy{
		Cosmetic:   lavav1.RemediationAction_REMEDIATION_ACTION_ALERT,
		Functional: lavav1.RemediationAction_REMEDIATION_ACTION_AUTO_CORRECT,
		Critical:   lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL,
		Origin:     lavav1.PolicyOrigin_POLICY_ORIGIN_DEFAULT,
	}
	if got := pipeline.DefaultRemediation(); !proto.Equal(got, want) {
		t.Fatalf("DefaultRemediation() = %v, want %v", got, want)
	}
	d := v1alpha1.DefaultDriftRemediation()
	p := pipeline.DefaultRemediation()
	for crd, pb := range map[v1alpha1.RemediationAction]lavav1.RemediationAction{d.Cosmetic: p.GetCosmetic(), d.Functional: p.GetFunctional(), d.Critical: p.GetCritical()} {
		if pipeline.ActionName(pb) != string(crd) {
			t.Errorf("%v named %q, want %q", pb, pipeline.ActionName(pb), crd)
		}
	}
}

// TestActionProto_roundTrip: every CRD action maps to its enum value and back; empty and
// unknown actions are Alert.
func TestActionProto_roundTrip(t *testing.T) {
	t.Parallel()
	for _, a := range []v1alpha1.RemediationAction{v1alpha1.RemediationNoOp, v1alpha1.RemediationAlert,
		v1alpha1.RemediationAutoCorrect, v1alpha1.RemediationRequireApproval, v1alpha1.RemediationEscalate} {
		if got := pipeline.ActionName(pipeline.ActionProto(a)); got != string(a) {
			t.Errorf("%s round-trips to %s", a, got)
		}
	}
	for _, a := range []v1alpha1.RemediationAction{"", "Reboot"} {
		if got := pipeline.ActionProto(a); got != lavav1.RemediationAction_REMEDIATION_ACTION_ALERT {
			t.Errorf("ActionProto(%q) = %v, want ALERT", a, got)
		}
	}
	if got := pipeline.ActionName(lavav1.RemediationAction_REMEDIATION_ACTION_UNSPECIFIED); got != "Alert" {
		t.Errorf("ActionName(UNSPECIFIED) = %q", got)
	}
}
