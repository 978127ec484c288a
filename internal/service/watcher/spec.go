package watcher

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
)

// PhaseProto maps a status phase to the proto enum: "PHASE_" and the upper-case name; the empty
// phase (a status nothing was folded into yet) and unknown values are PHASE_UNSPECIFIED.
func PhaseProto(p v1alpha1.Phase) lavav1.Phase {
	if p == "" {
		return lavav1.Phase_PHASE_UNSPECIFIED
	}
	return lavav1.Phase(lavav1.Phase_value["PHASE_"+strings.ToUpper(string(p))])
}

// withDefaults fills the unset actions of r with the default policy's.
func withDefaults(r v1alpha1.DriftRemediation) v1alpha1.DriftRemediation {
	d := v1alpha1.DefaultDriftRemediation()
	if r.Cosmetic == "" {
		r.Cosmetic = d.Cosmetic
	}
	if r.Functional == "" {
		r.Functional = d.Functional
	}
	if r.Critical == "" {
		r.Critical = d.Critical
	}
	return r
}

// EffectivePolicy resolves the remediation policy of a LavaArchitecture: spec.remediation
// (origin INLINE), else the referenced RemediationPolicy ref (origin REFERENCE, with its name
// and resourceVersion; ref must be the object spec.remediationPolicyRef names), else the
// default policy Alert / AutoCorrect / RequireApproval (origin DEFAULT). Unset actions take
// the default's. It fails when an escalation tier's waitBeforeNext does not parse.
func EffectivePolicy(spec v1alpha1.LavaArchitectureSpec, ref *v1alpha1.RemediationPolicy) (*lavav1.RemediationPolicy, error) {
	var (
		r   v1alpha1.DriftRemediation
		out = &lavav1.RemediationPolicy{}
	)
	switch {
	case spec.Remediation != nil:
		r = *spec.Remediation
		out.Origin = lavav1.PolicyOrigin_POLICY_ORIGIN_INLINE
	case spec.RemediationPolicyRef != nil && ref != nil:
		r = ref.Spec.DriftRemediation
		out.Origin = lavav1.PolicyOrigin_POLICY_ORIGIN_REFERENCE
		out.PolicyName = ref.Name
		out.PolicyResourceVersion = ref.ResourceVersion
		if ref.Spec.Escalation != nil {
			for i, tier := range ref.Spec.Escalation.Tiers {
				wait, err := tier.WaitDuration()
				if err != nil {
					return nil, fmt.Errorf("watcher: remediation policy %s: escalation tier %d: %w", ref.Name, i, err)
				}
				out.EscalationTiers = append(out.EscalationTiers, &lavav1.EscalationTier{
					Team: tier.Team, WaitBeforeNext: durationpb.New(wait),
				})
			}
		}
	default:
		out.Origin = lavav1.PolicyOrigin_POLICY_ORIGIN_DEFAULT
	}
	r = withDefaults(r)
	out.Cosmetic, out.Functional, out.Critical = pipeline.ActionProto(r.Cosmetic), pipeline.ActionProto(r.Functional), pipeline.ActionProto(r.Critical)
	return out, nil
}
