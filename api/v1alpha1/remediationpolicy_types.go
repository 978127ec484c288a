package v1alpha1

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RemediationAction is what viggy does about drift of one severity (docs/dialect.md section 7.1).
// +kubebuilder:validation:Enum=NoOp;Alert;AutoCorrect;RequireApproval;Escalate
type RemediationAction string

// The remediation actions.
const (
	// RemediationNoOp records the drift and does nothing else.
	RemediationNoOp RemediationAction = "NoOp"
	// RemediationAlert records the drift and raises an anomaly.
	RemediationAlert RemediationAction = "Alert"
	// RemediationAutoCorrect re-applies the last plan to correct the drift.
	RemediationAutoCorrect RemediationAction = "AutoCorrect"
	// RemediationRequireApproval holds until a human approves the corrective plan.
	RemediationRequireApproval RemediationAction = "RequireApproval"
	// RemediationEscalate notifies the escalation ladder, tier by tier.
	RemediationEscalate RemediationAction = "Escalate"
)

// DriftRemediation is the action per drift severity. Unset fields default to upstream's
// default policy: cosmetic Alert, functional AutoCorrect, critical RequireApproval.
type DriftRemediation struct {
	// cosmetic drift (tag-only updates).
	// +optional
	// +kubebuilder:default=Alert
	Cosmetic RemediationAction `json:"cosmetic,omitempty"`

	// functional drift (other updates, missing resources).
	// +optional
	// +kubebuilder:default=AutoCorrect
	Functional RemediationAction `json:"functional,omitempty"`

	// critical drift (deletes and replacements).
	// +optional
	// +kubebuilder:default=RequireApproval
	Critical RemediationAction `json:"critical,omitempty"`
}

// DefaultDriftRemediation is upstream's default policy: Alert, AutoCorrect, RequireApproval.
func DefaultDriftRemediation() DriftRemediation {
	return DriftRemediation{
		Cosmetic:   RemediationAlert,
		Functional: RemediationAutoCorrect,
		Critical:   RemediationRequireApproval,
	}
}

// RemediationPolicy is a named remediation policy that LavaArchitectures reference with
// spec.remediationPolicyRef. Editing it re-publishes the resources that use it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=lavapolicy
// +kubebuilder:printcolumn:name="Cosmetic",type=string,JSONPath=`.spec.cosmetic`
// +kubebuilder:printcolumn:name="Functional",type=string,JSONPath=`.spec.functional`
// +kubebuilder:printcolumn:name="Critical",type=string,JSONPath=`.spec.critical`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RemediationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the policy.
	// +required
	Spec RemediationPolicySpec `json:"spec"`
}

// RemediationPolicySpec is the action per drift severity plus an optional escalation ladder
// (docs/dialect.md section 5.2).
//
// +kubebuilder:validation:XValidation:rule="!((has(self.cosmetic) && self.cosmetic == 'Escalate') || (has(self.functional) && self.functional == 'Escalate') || (has(self.critical) && self.critical == 'Escalate')) || (has(self.escalation) && size(self.escalation.tiers) > 0)",message="spec.escalation.tiers must not be empty when an action is Escalate",fieldPath=".escalation"
type RemediationPolicySpec struct {
	DriftRemediation `json:",inline"`

	// escalation is the ladder Escalate walks.
	// +optional
	Escalation *EscalationLadder `json:"escalation,omitempty"`
}

// EscalationLadder is the tiers an Escalate action notifies, in order.
type EscalationLadder struct {
	// tiers in order; the first is notified at once, each next one after the previous tier's
	// waitBeforeNext.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Tiers []EscalationTier `json:"tiers"`
}

// DefaultWaitBeforeNext is an escalation tier's waitBeforeNext when unset: 15 minutes.
const DefaultWaitBeforeNext = "PT15M"

// EscalationTier is one rung of an escalation ladder. Lava notifies no one directly: each
// tier is an alert that the anomaly service posts to Alertmanager with the labels tier (the
// tier's index, from 0) and team (this field), and Alertmanager's routes send it to Slack,
// PagerDuty, e-mail or a webhook (docs/alerting.md).
type EscalationTier struct {
	// team is the value of the alert's team label for this tier; Alertmanager routes on it
	// (a receiver name such as "platform-oncall"). Lowercase letters, digits, '-', '_', '.'.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`
	Team string `json:"team"`

	// waitBeforeNext is how long to wait before the next tier, as an ISO-8601 duration
	// ("PT15M", "PT1H30M", "P1D"), upstream's format. Default PT15M.
	// +optional
	// +kubebuilder:default="PT15M"
	// +kubebuilder:validation:Pattern=`^P(?:[0-9]+D)?(?:T(?:[0-9]+H)?(?:[0-9]+M)?(?:[0-9]+S)?)?$`
	WaitBeforeNext string `json:"waitBeforeNext,omitempty"`
}

// iso8601Duration matches the subset of ISO-8601 durations waitBeforeNext admits.
const iso8601Duration = `^P(?:([0-9]+)D)?(?:T(?:([0-9]+)H)?(?:([0-9]+)M)?(?:([0-9]+)S)?)?$`

// WaitDuration parses WaitBeforeNext (days, hours, minutes and seconds of an ISO-8601 duration;
// empty means [DefaultWaitBeforeNext]). It fails on any other form, on "P" or "PT" alone, and on
// values that overflow a [time.Duration].
func (t EscalationTier) WaitDuration() (time.Duration, error) {
	s := t.WaitBeforeNext
	if s == "" {
		s = DefaultWaitBeforeNext
	}
	m := regexp.MustCompile(iso8601Duration).FindStringSubmatch(s)
	if m == nil || s == "P" || s == "PT" || s[len(s)-1] == 'T' {
		return 0, fmt.Errorf("waitBeforeNext %q: not an ISO-8601 duration like PT15M", s)
	}
	units := []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second}
	var total time.Duration
	for i, unit := range units {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil || n > int64((1<<63-1)/unit) {
			return 0, fmt.Errorf("waitBeforeNext %q: out of range", s)
		}
		d := time.Duration(n) * unit
		if total > (1<<63-1)-d {
			return 0, fmt.Errorf("waitBeforeNext %q: out of range", s)
		}
		total += d
	}
	return total, nil
}

// RemediationPolicyList is a list of [RemediationPolicy].
//
// +kubebuilder:object:root=true
type RemediationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RemediationPolicy `json:"items"`
}
