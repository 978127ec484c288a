package anomaly_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/service/anomaly"
)

// Upstream's lava-anomaly and anomaly-bridge behaviours (docs/dialect.md section 11).

const (
	noOp      = lavav1.RemediationAction_REMEDIATION_ACTION_NO_OP
	alert     = lavav1.RemediationAction_REMEDIATION_ACTION_ALERT
	autoFix   = lavav1.RemediationAction_REMEDIATION_ACTION_AUTO_CORRECT
	approval  = lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL
	escalate  = lavav1.RemediationAction_REMEDIATION_ACTION_ESCALATE
	cosmetic  = lavav1.Severity_SEVERITY_COSMETIC
	function  = lavav1.Severity_SEVERITY_FUNCTIONAL
	critical  = lavav1.Severity_SEVERITY_CRITICAL
	testUID   = "0b6f3c1e-5d2a-4a57-9c0e-7f0f6d0d2b11"
	jsonDigst = "1111111111111111111111111111111111111111111111111111111111111111"
)

var now = time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)

func env(ns, name string) *lavav1.Envelope {
	return &lavav1.Envelope{EventId: "e-" + name, Resource: &lavav1.ResourceRef{Namespace: ns, Name: name, Uid: testUID}, Generation: 3}
}

func sample(sev anomaly.Severity) anomaly.LavaAnomaly {
	return anomaly.LavaAnomaly{Kind: anomaly.KindDriftDetected, Severity: sev,
		Source: anomaly.Source{Namespace: "infra", Name: "vpc"}, Message: "drift detected: 1 field(s)"}
}

func TestPolicyRouter_defaultPolicyMapping(t *testing.T) {
	t.Parallel()
	p := pipeline.DefaultRemediation()
	if p.GetCosmetic() != alert || p.GetFunctional() != autoFix || p.GetCritical() != approval {
		t.Fatalf("default policy %v, want Alert/AutoCorrect/RequireApproval", p)
	}
	tests := []struct {
		sev  anomaly.Severity
		want lavav1.RemediationAction
	}{{anomaly.SeverityCosmetic, alert}, {anomaly.SeverityFunctional, autoFix}, {anomaly.SeverityCritical, approval}}
	for _, tt := range tests {
		d, err := anomaly.PolicyRouter{}.Route(sample(tt.sev), nil)
		if err != nil || d.Action != tt.want {
			t.Errorf("%s under the default policy: %v, %v; want %v", tt.sev, d.Action, err, tt.want)
		}
	}
}

func TestPolicyRouter_picksPolicyActionIgnoringKind(t *testing.T) {
	t.Parallel()
	p := &lavav1.RemediationPolicy{Cosmetic: noOp, Functional: alert, Critical: autoFix}
	for _, kind := range anomaly.Kinds() {
		a := sample(anomaly.SeverityFunctional)
		a.Kind = kind
		d, err := anomaly.PolicyRouter{}.Route(a, p)
		if err != nil || d.Action != alert || d.RequeueAfter != 5*time.Minute {
			t.Errorf("kind %s: %+v, %v; want Alert after 5m", kind, d, err)
		}
	}
	d, _ := anomaly.PolicyRouter{}.Route(sample(anomaly.SeverityCritical), p)
	if d.Action != autoFix {
		t.Errorf("critical: %v, want AutoCorrect", d.Action)
	}
	// Unknown actions degrade to Alert.
	d, _ = anomaly.PolicyRouter{}.Route(sample(anomaly.SeverityCosmetic), &lavav1.RemediationPolicy{})
	if d.Action != alert {
		t.Errorf("unspecified action: %v, want Alert", d.Action)
	}
}

func TestPolicyRouter_escalatePicksFirstTier(t *testing.T) {
	t.Parallel()
	first := &lavav1.EscalationTier{Team: "ops", WaitBeforeNext: durationpb.New(15 * time.Minute)}
	second := &lavav1.EscalationTier{Team: "oncall"}
	p := &lavav1.RemediationPolicy{Critical: escalate, EscalationTiers: []*lavav1.EscalationTier{first, second}}
	d, err := anomaly.PolicyRouter{}.Route(sample(anomaly.SeverityCritical), p)
	if err != nil {
		t.Fatal(err)
	}
	if d.Action != escalate || d.RequeueAfter != time.Minute {
		t.Errorf("decision %+v, want Escalate after 1m", d)
	}
	if diff := cmp.Diff(first, d.Escalation, protocmp.Transform()); diff != "" {
		t.Errorf("escalation tier (-want +got):\n%s", diff)
	}
}

func TestPolicyRouter_escalateWithoutLadderErrors(t *testing.T) {
	t.Parallel()
	_, err := anomaly.PolicyRouter{}.Route(sample(anomaly.SeverityCritical), &lavav1.RemediationPolicy{Critical: escalate})
	if !errors.Is(err, pipeline.ErrNoLadder) || err.Error() != "escalation: Escalate set but no ladder" {
		t.Fatalf("err = %v, want upstream's ladder error", err)
	}
}

func TestRequeueAfter_autoCorrectShorterThanAlert(t *testing.T) {
	t.Parallel()
	if anomaly.RequeueAfter(autoFix) >= anomaly.RequeueAfter(alert) {
		t.Fatalf("AutoCorrect %v not shorter than Alert %v", anomaly.RequeueAfter(autoFix), anomaly.RequeueAfter(alert))
	}
	want := map[lavav1.RemediationAction]time.Duration{noOp: 10 * time.Minute, alert: 5 * time.Minute,
		autoFix: 30 * time.Second, approval: 2 * time.Minute, escalate: time.Minute}
	for a, d := range want {
		if got := anomaly.RequeueAfter(a); got != d {
			t.Errorf("RequeueAfter(%v) = %v, want %v", a, got, d)
		}
	}
}

func TestFixedRouter_returnsItsDecision(t *testing.T) {
	t.Parallel()
	r := anomaly.FixedRouter{Decision: anomaly.Decision{Action: noOp, RequeueAfter: time.Hour}}
	d, err := r.Route(sample(anomaly.SeverityCritical), pipeline.DefaultRemediation())
	if err != nil || d.Action != noOp || d.RequeueAfter != time.Hour {
		t.Fatalf("%+v, %v", d, err)
	}
}

func TestLavaAnomaly_kindSerializesPascalCase(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(sample(anomaly.SeverityFunctional))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"kind":"DriftDetected"`, `"severity":"functional"`, `"emittedAt":`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	var back anomaly.LavaAnomaly
	if err := json.Unmarshal(b, &back); err != nil || back.Kind != anomaly.KindDriftDetected {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}

func TestLavaAnomaly_customCarriesExtensionKind(t *testing.T) {
	t.Parallel()
	a := anomaly.LavaAnomaly{Kind: anomaly.KindCustom, ExtensionKind: "cost_spike", Severity: anomaly.SeverityFunctional,
		Source: anomaly.Source{Namespace: "infra", Name: "vpc"}}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(a)
	if !strings.Contains(string(b), `"kind":"Custom","extensionKind":"cost_spike"`) {
		t.Errorf("JSON %s", b)
	}
	p := a.Proto()
	if p.GetKind() != lavav1.AnomalyKind_ANOMALY_KIND_CUSTOM || p.GetExtensionKind() != "cost_spike" || a.KindToken() != "cost_spike" {
		t.Errorf("proto %v, token %q", p, a.KindToken())
	}
	back, err := anomaly.FromDetected(p, now)
	if err != nil || back.ExtensionKind != "cost_spike" {
		t.Errorf("back %+v, %v", back, err)
	}
	a.ExtensionKind = "Cost Spike"
	if err := a.Validate(); !errors.Is(err, anomaly.ErrInvalid) {
		t.Errorf("invalid extension kind accepted: %v", err)
	}
}

// Anomaly bridge (lava-operator src/anomaly_bridge.rs): the anomaly and the default policy's
// decision for drift, synthesis errors and apply errors.
func TestBridge_mappings(t *testing.T) {
	t.Parallel()
	finding := func(sev lavav1.Severity) *lavav1.DriftFinding {
		return &lavav1.DriftFinding{Address: "aws_vpc.main", Attribute: "cidr_block", Change: lavav1.ChangeKind_CHANGE_KIND_UPDATE, Severity: sev}
	}
	build := func(ev any) anomaly.LavaAnomaly {
		t.Helper()
		var (
			a  anomaly.LavaAnomaly
			ok bool
		)
		switch e := ev.(type) {
		case *lavav1.DriftScanned:
			a, ok = anomaly.FromDriftScanned(e, "", now)
		case *lavav1.Failed:
			a, ok = anomaly.FromFailed(e, "", now)
		}
		if !ok {
			t.Fatalf("no anomaly for %v", ev)
		}
		return a
	}
	tests := []struct {
		name     string
		ev       any
		kind     anomaly.Kind
		severity anomaly.Severity
		action   lavav1.RemediationAction
		metadata map[string]string
	}{{
		name: "functional drift",
		ev: &lavav1.DriftScanned{Envelope: env("infra", "vpc"), Findings: []*lavav1.DriftFinding{finding(function)},
			MaxSeverity: function, TerraformJsonDigest: jsonDigst},
		kind: anomaly.KindDriftDetected, severity: anomaly.SeverityFunctional, action: autoFix,
		metadata: map[string]string{"drifted_fields": "1", "spec_hash": jsonDigst},
	}, {
		name: "critical drift",
		ev: &lavav1.DriftScanned{Envelope: env("infra", "vpc"), Findings: []*lavav1.DriftFinding{finding(cosmetic), finding(critical)},
			MaxSeverity: critical, TerraformJsonDigest: jsonDigst},
		kind: anomaly.KindDriftDetected, severity: anomaly.SeverityCritical, action: approval,
		metadata: map[string]string{"drifted_fields": "2"},
	}, {
		name: "synthesis error",
		ev:   &lavav1.Failed{Envelope: env("infra", "vpc"), Stage: lavav1.Stage_STAGE_SYNTH, Reason: "SynthesisFailed", Message: "inline:1:2: unexpected )"},
		kind: anomaly.KindSynthesisFailure, severity: anomaly.SeverityFunctional, action: autoFix,
		metadata: map[string]string{"stage": "synth", "reason": "SynthesisFailed"},
	}, {
		name: "apply error",
		ev:   &lavav1.Failed{Envelope: env("infra", "vpc"), Stage: lavav1.Stage_STAGE_APPLY, Reason: "ApplyFailed", Message: "boom"},
		kind: anomaly.KindApplyFailure, severity: anomaly.SeverityCritical, action: approval,
		metadata: map[string]string{"stage": "apply", "reason": "ApplyFailed"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := build(tt.ev)
			d, err := anomaly.PolicyRouter{}.Route(a, nil)
			if err != nil {
				t.Fatal(err)
			}
			if a.Kind != tt.kind || a.Severity != tt.severity || d.Action != tt.action {
				t.Errorf("got %s/%s -> %v, want %s/%s -> %v", a.Kind, a.Severity, d.Action, tt.kind, tt.severity, tt.action)
			}
			for k, v := range tt.metadata {
				if a.Metadata[k] != v {
					t.Errorf("metadata[%s] = %q, want %q", k, a.Metadata[k], v)
				}
			}
		})
	}
	a := build(tests[1].ev)
	if a.Message != "drift detected: 2 field(s)" {
		t.Errorf("drift message %q", a.Message)
	}
}
