package watcher_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/service/watcher"
)

func TestNewMetrics_promlint(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := watcher.NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	n, err := testutil.GatherAndCount(reg, "lava_watcher_published_total", "lava_watcher_phase_events_total", "lava_watcher_held_total")
	if err != nil {
		t.Fatal(err)
	}
	if n != 3+7+6 {
		t.Errorf("%d pre-initialized series, want 16", n)
	}
	if _, err := watcher.NewMetrics(reg); err == nil {
		t.Error("registering the metrics twice succeeded")
	}
}

func TestEffectivePolicy(t *testing.T) {
	ref := &v1alpha1.RemediationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: "42"},
		Spec: v1alpha1.RemediationPolicySpec{
			DriftRemediation: v1alpha1.DriftRemediation{Critical: v1alpha1.RemediationEscalate},
			Escalation: &v1alpha1.EscalationLadder{Tiers: []v1alpha1.EscalationTier{
				{Team: "ops"},
				{Team: "platform-oncall", WaitBeforeNext: "PT1H"},
			}},
		}}
	const (
		alert    = lavav1.RemediationAction_REMEDIATION_ACTION_ALERT
		auto     = lavav1.RemediationAction_REMEDIATION_ACTION_AUTO_CORRECT
		approval = lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL
	)
	tests := []struct {
		name string
		spec v1alpha1.LavaArchitectureSpec
		ref  *v1alpha1.RemediationPolicy
		want *lavav1.RemediationPolicy
	}{
		{"default", v1alpha1.LavaArchitectureSpec{}, nil,
			&lavav1.RemediationPolicy{Cosmetic: alert, Functional: auto, Critical: approval, Origin: lavav1.PolicyOrigin_POLICY_ORIGIN_DEFAULT}},
		{"inline, unset actions defaulted", v1alpha1.LavaArchitectureSpec{Remediation: &v1alpha1.DriftRemediation{Functional: v1alpha1.RemediationNoOp}}, nil,
			&lavav1.RemediationPolicy{Cosmetic: alert, Functional: lavav1.RemediationAction_REMEDIATION_ACTION_NO_OP, Critical: approval,
				Origin: lavav1.PolicyOrigin_POLICY_ORIGIN_INLINE}},
		{"reference with tiers", v1alpha1.LavaArchitectureSpec{RemediationPolicyRef: &v1alpha1.LocalObjectReference{Name: "p"}}, ref,
			&lavav1.RemediationPolicy{Cosmetic: alert, Functional: auto, Critical: lavav1.RemediationAction_REMEDIATION_ACTION_ESCALATE,
				Origin: lavav1.PolicyOrigin_POLICY_ORIGIN_REFERENCE, PolicyName: "p", PolicyResourceVersion: "42",
				EscalationTiers: []*lavav1.EscalationTier{
					{Team: "ops", WaitBeforeNext: durationpb.New(15 * time.Minute)},
					{Team: "platform-oncall",
						WaitBeforeNext: durationpb.New(time.Hour)},
				}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := watcher.EffectivePolicy(tt.spec, tt.ref)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	bad := ref.DeepCopy()
	bad.Spec.Escalation.Tiers[0].WaitBeforeNext = "15m"
	if _, err := watcher.EffectivePolicy(v1alpha1.LavaArchitectureSpec{RemediationPolicyRef: &v1alpha1.LocalObjectReference{Name: "p"}}, bad); err == nil {
		t.Error("a malformed waitBeforeNext was accepted")
	}
}

func TestObservedTrigger(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		policyRV    string
		bindings    string
		want        string
	}{
		{"generation", nil, "", "", "generation:7"},
		{"annotation", map[string]string{v1alpha1.ReconcileRequestedAnnotation: "now"}, "", "", "reconcile:now"},
		{"policy", nil, "12", "", "policy:12"},
		{"both", map[string]string{v1alpha1.ReconcileRequestedAnnotation: "now"}, "12", "", "reconcile:now;policy:12"},
		{"empty annotation", map[string]string{v1alpha1.ReconcileRequestedAnnotation: ""}, "", "", "generation:7"},
		{"bindings", nil, "", "ab12", "bindings:ab12"},
		{"all three", map[string]string{v1alpha1.ReconcileRequestedAnnotation: "now"}, "12", "ab12", "reconcile:now;policy:12;bindings:ab12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &v1alpha1.LavaArchitecture{ObjectMeta: metav1.ObjectMeta{Generation: 7, Annotations: tt.annotations}}
			if got := watcher.ObservedTrigger(obj, tt.policyRV, tt.bindings); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRecheck(t *testing.T) {
	secret := []v1alpha1.BindingsSource{{SecretRef: &v1alpha1.ObjectKeyReference{Name: "creds"}}}
	outputs := []v1alpha1.BindingsSource{{OutputsRef: &v1alpha1.ObjectKeyReference{Name: "net"}}}
	configMap := []v1alpha1.BindingsSource{{ConfigMapRef: &v1alpha1.ObjectKeyReference{Name: "net"}}}
	every := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	deleted := metav1.NewTime(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	tests := []struct {
		name     string
		read     bool
		recheck  time.Duration
		bindings []v1alpha1.BindingsSource
		interval *metav1.Duration
		deleted  bool
		in, want time.Duration
	}{
		{"a Secret, default drift interval", true, 0, secret, nil, false, 0, 5 * time.Minute},
		{"a Secret, the object's interval", true, 0, secret, every(2 * time.Minute), false, 0, 2 * time.Minute},
		{"an interval below the floor", true, 0, secret, every(time.Second), false, 0, 30 * time.Second},
		{"an outputs Secret", true, 0, outputs, nil, false, 0, 5 * time.Minute},
		{"the configured recheck", true, time.Second, secret, nil, false, 0, time.Second},
		{"an earlier requeue stays", true, 0, secret, nil, false, time.Minute, time.Minute},
		{"a later requeue is brought forward", true, 0, secret, nil, false, time.Hour, 5 * time.Minute},
		{"a ConfigMap only", true, 0, configMap, nil, false, 0, 0},
		{"Secrets watched or not read", false, 0, secret, nil, false, 0, 0},
		{"being deleted", true, 0, secret, nil, true, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &v1alpha1.LavaArchitecture{Spec: v1alpha1.LavaArchitectureSpec{BindingsFrom: tt.bindings, DriftInterval: tt.interval}}
			if tt.deleted {
				obj.DeletionTimestamp = &deleted
			}
			got := watcher.RecheckForTest(tt.read, tt.recheck, obj, reconcile.Result{RequeueAfter: tt.in})
			if got.RequeueAfter != tt.want {
				t.Errorf("RequeueAfter %v, want %v", got.RequeueAfter, tt.want)
			}
		})
	}
}

func TestPhaseEvent(t *testing.T) {
	at := time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)
	published := at.Add(time.Hour)
	env := func() *lavav1.Envelope {
		return &lavav1.Envelope{EventId: "id", Generation: 3, OccurredAt: timestamppb.New(at)}
	}
	tests := []struct {
		name   string
		ev     bus.Event
		want   pipeline.Event
		diags  []string
		ignore bool
	}{{
		name: "synthesized",
		ev: &lavav1.Synthesized{Envelope: env(), Render: &lavav1.RenderRecord{SourceKind: lavav1.SourceKind_SOURCE_KIND_NAME, ArchitectureName: "a", ResourceCount: 2},
			Gate: &lavav1.GateVerdict{Gate: "g", Passed: true, Warnings: []string{"w"}}},
		want:  pipeline.Event{Type: pipeline.EventSynthesized, Generation: 3, Time: at, Render: &v1alpha1.RenderRecord{SourceKind: v1alpha1.SourceKindName, ArchitectureName: "a", ResourceCount: 2, Gate: "g"}},
		diags: []string{"w"},
	}, {
		name: "planned awaiting approval",
		ev:   &lavav1.Planned{Envelope: env(), PlanId: "p", Summary: &lavav1.ChangeSummary{Add: 1, Destroy: 2}, AwaitingApproval: true},
		want: pipeline.Event{Type: pipeline.EventAwaitingApproval, Generation: 3, Time: at, Plan: &v1alpha1.PlanSummary{ID: "p", Add: 1, Destroy: 2}},
	}, {
		name: "applied with outputs",
		ev:   &lavav1.Applied{Envelope: env(), PlanId: "p", Outputs: map[string]string{"id": `"x"`}, OutputsSecret: "s-lava-outputs"},
		want: pipeline.Event{Type: pipeline.EventApplied, Generation: 3, Time: at, Plan: &v1alpha1.PlanSummary{ID: "p"},
			Outputs: map[string]apiextensionsv1.JSON{"id": {Raw: []byte(`"x"`)}}, OutputsSecret: "s-lava-outputs"},
	}, {
		name:  "gate rejection is terminal",
		ev:    &lavav1.Failed{Envelope: env(), Stage: lavav1.Stage_STAGE_SYNTH, Reason: "GateRejected", Message: "cidr: missing"},
		want:  pipeline.Event{Type: pipeline.EventFailed, Generation: 3, Time: at, Stage: pipeline.StageGate, Reason: "GateRejected", Message: "cidr: missing", Terminal: true},
		diags: []string{"cidr: missing"},
	}, {
		name: "retryable apply failure",
		ev:   &lavav1.Failed{Envelope: env(), Stage: lavav1.Stage_STAGE_APPLY, Reason: "ApplyFailed", Retryable: true},
		want: pipeline.Event{Type: pipeline.EventFailed, Generation: 3, Time: at, Stage: pipeline.StageApply, Reason: "ApplyFailed"},
	}, {
		name: "orphaned",
		ev:   &lavav1.Destroyed{Envelope: env(), Orphaned: true},
		want: pipeline.Event{Type: pipeline.EventDestroyed, Generation: 3, Time: at, Message: "infrastructure orphaned (deletionPolicy Orphan)"},
	}, {
		name: "clean drift scan",
		ev:   &lavav1.DriftScanned{Envelope: env()},
		want: pipeline.Event{Type: pipeline.EventDriftClean, Generation: 3, Time: at},
	}, {
		name:   "drift with findings waits for viggy",
		ev:     &lavav1.DriftScanned{Envelope: env(), MaxSeverity: lavav1.Severity_SEVERITY_FUNCTIONAL},
		ignore: true,
	}, {
		name: "viggy holds drift",
		ev: &lavav1.TickReported{Envelope: env(), FinalPhase: lavav1.Phase_PHASE_DRIFTED, Decision: &lavav1.Decision{
			Action: lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL, Severity: lavav1.Severity_SEVERITY_CRITICAL, PlanId: "p"}},
		want: pipeline.Event{Type: pipeline.EventDrifted, Generation: 3, Time: at, Message: "drift of severity CRITICAL: REQUIRE_APPROVAL, plan p awaits approval"},
	}, {
		name: "viggy re-applies",
		ev:   &lavav1.TickReported{Envelope: env(), FinalPhase: lavav1.Phase_PHASE_RECONVERGING},
		want: pipeline.Event{Type: pipeline.EventReconverging, Generation: 3, Time: at},
	}, {
		name:   "tick to applied",
		ev:     &lavav1.TickReported{Envelope: env(), FinalPhase: lavav1.Phase_PHASE_APPLIED},
		ignore: true,
	}, {
		name: "receipt without occurred_at uses the stream time",
		ev:   &lavav1.ReceiptAppended{Envelope: &lavav1.Envelope{EventId: "id"}, Sequence: 4, ContentHash: []byte{0xab, 0xcd}},
		want: pipeline.Event{Type: pipeline.EventReceiptAppended, Time: published, Receipt: &v1alpha1.ReceiptHead{Sequence: 4, Hash: "abcd"}},
	}, {
		name:   "own phase changed",
		ev:     &lavav1.PhaseChanged{Envelope: env()},
		ignore: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, diags, ok, err := watcher.PhaseEvent(tt.ev, published)
			if err != nil {
				t.Fatal(err)
			}
			if ok == tt.ignore {
				t.Fatalf("ok = %v, want %v", ok, !tt.ignore)
			}
			if tt.ignore {
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("event (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.diags, diags); diff != "" {
				t.Errorf("diagnostics (-want +got):\n%s", diff)
			}
		})
	}
	_, _, _, err := watcher.PhaseEvent(&lavav1.Applied{Envelope: env(), Outputs: map[string]string{"x": "not json"}}, published)
	if err == nil || errors.Is(err, pipeline.ErrInvalidEvent) {
		t.Errorf("an output that is not JSON: err = %v", err)
	}
}

func TestPhaseProto(t *testing.T) {
	for _, p := range pipeline.All() {
		if got := watcher.PhaseProto(p); got == lavav1.Phase_PHASE_UNSPECIFIED || got.String() != "PHASE_"+upper(string(p)) {
			t.Errorf("PhaseProto(%s) = %s", p, got)
		}
	}
	if got := watcher.PhaseProto(""); got != lavav1.Phase_PHASE_UNSPECIFIED {
		t.Errorf("PhaseProto(\"\") = %s", got)
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// TestPhaseEvent_planResourcesBounded: status.plan.resources lists the changing resources of a
// Planned in its order, no-ops left out, at most v1alpha1.MaxStatusPlanResources; the rest,
// with those the event itself left out, is counted in resourcesOmitted.
func TestPhaseEvent_planResourcesBounded(t *testing.T) {
	ev := &lavav1.Planned{Envelope: &lavav1.Envelope{EventId: "id", Generation: 2}, PlanId: "p",
		Summary: &lavav1.ChangeSummary{Add: 60}, ChangesOmitted: 7}
	ev.Changes = append(ev.Changes, &lavav1.ResourceChange{Address: "a.noop", Action: lavav1.ChangeKind_CHANGE_KIND_NO_OP})
	for i := range 60 {
		ev.Changes = append(ev.Changes, &lavav1.ResourceChange{Address: fmt.Sprintf("a.r%02d", i), Action: lavav1.ChangeKind_CHANGE_KIND_CREATE})
	}
	ev.Changes[5].Action = lavav1.ChangeKind_CHANGE_KIND_REPLACE
	got, _, ok, err := watcher.PhaseEvent(ev, time.Now())
	if err != nil || !ok {
		t.Fatalf("PhaseEvent: %v, %v", ok, err)
	}
	p := got.Plan
	if len(p.Resources) != v1alpha1.MaxStatusPlanResources || p.ResourcesOmitted != 10+7 {
		t.Fatalf("%d resources listed, %d omitted; want %d and 17", len(p.Resources), p.ResourcesOmitted, v1alpha1.MaxStatusPlanResources)
	}
	if p.Resources[0] != (v1alpha1.PlannedResource{Address: "a.r00", Action: "create"}) ||
		p.Resources[4] != (v1alpha1.PlannedResource{Address: "a.r04", Action: "replace"}) ||
		p.Resources[49].Address != "a.r49" {
		t.Errorf("resources %v", p.Resources)
	}
}

// TestCore_keepsStatusOnly: what the Core keeps of an object between writes is its status and
// the metadata a status write needs, not its spec, labels, annotations or managedFields (the
// watcher's memory per object, docs/design/0007-status-writes.md), and it is a copy.
func TestCore_keepsStatusOnly(t *testing.T) {
	core, err := watcher.NewCore(watcher.CoreConfig{Store: watcher.NewAPIStore(nil, nil, nil), Publisher: bus.NewPublisher(nil)})
	if err != nil {
		t.Fatal(err)
	}
	obj := &v1alpha1.LavaArchitecture{
		ObjectMeta: metav1.ObjectMeta{
			Name: "a", Namespace: "ns", UID: "u1", ResourceVersion: "7", Generation: 3,
			Labels: map[string]string{"team": "x"}, Annotations: map[string]string{"note": "y"},
			Finalizers:    []string{v1alpha1.Finalizer},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: v1alpha1.LavaArchitectureSpec{Engine: "embedded", Bindings: map[string]string{"v": "1"}},
		Status: v1alpha1.LavaArchitectureStatus{Phase: v1alpha1.PhaseApplied, ObservedGeneration: 3,
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Applied"}}},
	}
	core.Remember(obj)
	got := core.StoredForTest(types.NamespacedName{Namespace: "ns", Name: "a"})
	want := &v1alpha1.LavaArchitecture{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u1", ResourceVersion: "7", Generation: 3},
		Status:     obj.Status,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	obj.Status.Conditions[0].Reason = "changed"
	if got.Status.Conditions[0].Reason != "Applied" {
		t.Error("the kept status shares memory with the object remembered")
	}
}
