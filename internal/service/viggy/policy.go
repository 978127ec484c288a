package viggy

import (
	"time"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
)

// ActionFor is the policy's action for a severity (docs/dialect.md section 7.1, routing: the kind is
// ignored). A nil policy is pipeline.DefaultRemediation; an unset action degrades to Alert; a clean scan
// (SEVERITY_UNSPECIFIED) is NoOp.
func ActionFor(p *lavav1.RemediationPolicy, sev lavav1.Severity) lavav1.RemediationAction {
	if p == nil {
		p = pipeline.DefaultRemediation()
	}
	var a lavav1.RemediationAction
	switch sev {
	case lavav1.Severity_SEVERITY_COSMETIC:
		a = p.GetCosmetic()
	case lavav1.Severity_SEVERITY_FUNCTIONAL:
		a = p.GetFunctional()
	case lavav1.Severity_SEVERITY_CRITICAL:
		a = p.GetCritical()
	default:
		return lavav1.RemediationAction_REMEDIATION_ACTION_NO_OP
	}
	if _, known := lavav1.RemediationAction_name[int32(a)]; !known || a == lavav1.RemediationAction_REMEDIATION_ACTION_UNSPECIFIED {
		return lavav1.RemediationAction_REMEDIATION_ACTION_ALERT
	}
	return a
}

// MaxSeverity is the highest severity of findings (UNSPECIFIED when there are none); the
// order is COSMETIC < FUNCTIONAL < CRITICAL.
func MaxSeverity(findings []*lavav1.DriftFinding) lavav1.Severity {
	m := lavav1.Severity_SEVERITY_UNSPECIFIED
	for _, f := range findings {
		if f.GetSeverity() > m {
			m = f.GetSeverity()
		}
	}
	return m
}

// DefaultTierWait is an escalation tier's wait_before_next when unset (docs/dialect.md section 7.1).
const DefaultTierWait = 15 * time.Minute

// TierWait is the wait after tier i before the next one.
func TierWait(p *lavav1.RemediationPolicy, i int) time.Duration {
	tiers := p.GetEscalationTiers()
	if i < 0 || i >= len(tiers) || tiers[i].GetWaitBeforeNext().AsDuration() <= 0 {
		return DefaultTierWait
	}
	return tiers[i].GetWaitBeforeNext().AsDuration()
}
