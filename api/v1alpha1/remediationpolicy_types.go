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

// EscalationTier is one rung of an escalation ladder.
type EscalationTier struct {
	// target is who is notified.
	// +required
	Target NotifyTarget `json:"target"`

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

// NotifyKind is the kind of an escalation [NotifyTarget].
// +kubebuilder:validation:Enum=slack;ntfy;pagerduty;email;webhook
type NotifyKind string

// The notification target kinds.
const (
	// NotifySlack posts to a Slack incoming webhook (webhookSecretRef).
	NotifySlack NotifyKind = "slack"
	// NotifyNtfy publishes to an ntfy topic (topic).
	NotifyNtfy NotifyKind = "ntfy"
	// NotifyPagerDuty opens a PagerDuty incident (serviceKeySecretRef).
	NotifyPagerDuty NotifyKind = "pagerduty"
	// NotifyEmail mails an address (address).
	NotifyEmail NotifyKind = "email"
	// NotifyWebhook posts JSON to a URL (url, optional secretRef for a signing secret).
	NotifyWebhook NotifyKind = "webhook"
)

// NotifyTarget is a typed notification address; which fields are required depends on kind.
//
// +kubebuilder:validation:XValidation:rule="self.kind != 'slack' || has(self.webhookSecretRef)",message="target.webhookSecretRef is required when target.kind is slack"
// +kubebuilder:validation:XValidation:rule="self.kind != 'ntfy' || has(self.topic)",message="target.topic is required when target.kind is ntfy"
// +kubebuilder:validation:XValidation:rule="self.kind != 'pagerduty' || has(self.serviceKeySecretRef)",message="target.serviceKeySecretRef is required when target.kind is pagerduty"
// +kubebuilder:validation:XValidation:rule="self.kind != 'email' || has(self.address)",message="target.address is required when target.kind is email"
// +kubebuilder:validation:XValidation:rule="self.kind != 'webhook' || has(self.url)",message="target.url is required when target.kind is webhook"
type NotifyTarget struct {
	// kind of target: slack, ntfy, pagerduty, email or webhook.
	// +required
	Kind NotifyKind `json:"kind"`

	// webhookSecretRef is the Secret key holding the Slack webhook URL.
	// +optional
	WebhookSecretRef *ObjectKeyReference `json:"webhookSecretRef,omitempty"`

	// topic is the ntfy topic.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Topic string `json:"topic,omitempty"`

	// serviceKeySecretRef is the Secret key holding the PagerDuty service key.
	// +optional
	ServiceKeySecretRef *ObjectKeyReference `json:"serviceKeySecretRef,omitempty"`

	// address is the e-mail address.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=320
	Address string `json:"address,omitempty"`

	// url is the webhook URL.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url,omitempty"`

	// secretRef is the Secret key holding the webhook's signing secret.
	// +optional
	SecretRef *ObjectKeyReference `json:"secretRef,omitempty"`
}

// RemediationPolicyList is a list of [RemediationPolicy].
//
// +kubebuilder:object:root=true
type RemediationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RemediationPolicy `json:"items"`
}
