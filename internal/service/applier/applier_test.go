package applier

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/providers"
	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/lang/planpolicy"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/readmodel"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		stage         lavav1.Stage
		err           error
		wantReason    string
		wantRetryable bool
	}{
		{"provider", lavav1.Stage_STAGE_PLAN, fmt.Errorf("plan: %w", &engine.ProviderUnavailableError{Sources: []string{"hashicorp/aws"}}), v1alpha1.ReasonProviderUnavailable, false},
		{"checksum", lavav1.Stage_STAGE_PLAN, &engine.StepError{Step: "plan", Err: fmt.Errorf("provider x: %w", engine.ErrProviderChecksumMismatch)}, v1alpha1.ReasonProviderChecksumMismatch, false},
		{"signature", lavav1.Stage_STAGE_PLAN, &engine.StepError{Step: "plan", Err: &providers.SignatureError{Addr: providers.Addr{Type: "x"}, Err: errors.New("bad")}}, v1alpha1.ReasonProviderSignatureInvalid, false},
		{"archive checksum", lavav1.Stage_STAGE_PLAN, &providers.ChecksumError{What: "the signed SHA256SUMS"}, v1alpha1.ReasonProviderChecksumMismatch, false},
		{"version", lavav1.Stage_STAGE_PLAN, &providers.VersionNotFoundError{Constraint: "9.9.9"}, v1alpha1.ReasonProviderVersionNotFound, false},
		{"registry down", lavav1.Stage_STAGE_PLAN, &providers.RegistryError{URL: "https://r/", Err: errors.New("connection refused")}, v1alpha1.ReasonProviderRegistryUnavailable, true},
		{"stale", lavav1.Stage_STAGE_APPLY, &engine.PlanStaleError{PlanID: "p"}, v1alpha1.ReasonPlanStale, true},
		{"locked", lavav1.Stage_STAGE_PLAN, &state.LockedError{Lock: state.Lock{Holder: "x"}}, v1alpha1.ReasonLocked, true},
		{"create interrupted", lavav1.Stage_STAGE_PLAN, &engine.CreateInterruptedError{Key: "ns/a", Addresses: []string{"x.y"}}, v1alpha1.ReasonCreateInterrupted, false},
		{"file access", lavav1.Stage_STAGE_PLAN, &engine.StepError{Step: "plan", Err: &engine.FileAccessError{Violations: []string{"resource testkit_legacy_file.w attribute filename: the path \"/etc/x\" is outside the allowed directories"}}}, v1alpha1.ReasonPolicyRejected, false},
		{"plan", lavav1.Stage_STAGE_PLAN, errors.New("boom"), v1alpha1.ReasonPlanFailed, true},
		{"evaluation limit", lavav1.Stage_STAGE_PLAN, &engine.StepError{Step: "plan", Err: fmt.Errorf("output o: %w", engine.ErrEvaluationLimit)}, v1alpha1.ReasonPlanFailed, false},
		{"apply", lavav1.Stage_STAGE_APPLY, &engine.StepError{Step: "apply", Err: errors.New("boom"), Tail: "tail"}, v1alpha1.ReasonApplyFailed, true},
		{"destroy", lavav1.Stage_STAGE_DESTROY, errors.New("boom"), v1alpha1.ReasonDestroyFailed, true},
		// Both engine families' step timeouts: the tofu engine's (a CLI step, its output tail)
		// and the embedded engine's (what the provider answered once asked to stop).
		{"tofu apply timeout", lavav1.Stage_STAGE_APPLY, &engine.StepError{Step: "apply", Tail: "tail",
			Err: &engine.StepTimeoutError{Engine: "tofu", Step: "apply", After: 30 * time.Minute}}, v1alpha1.ReasonStepTimeout, true},
		{"embedded plan timeout", lavav1.Stage_STAGE_PLAN, &engine.StepError{Step: "plan",
			Err: &engine.StepTimeoutError{Engine: "embedded", Step: "plan", After: 10 * time.Minute, Err: errors.New("readResource: context deadline exceeded")}}, v1alpha1.ReasonStepTimeout, true},
		{"embedded destroy timeout", lavav1.Stage_STAGE_DESTROY, &engine.StepError{Step: "destroy",
			Err: &engine.StepTimeoutError{Engine: "embedded", Step: "destroy", After: time.Minute}}, v1alpha1.ReasonStepTimeout, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := classify(tt.stage, tt.err)
			if f.Reason != tt.wantReason || f.Retryable() != tt.wantRetryable || f.Message != tt.err.Error() {
				t.Errorf("classify = %+v, want %s retryable %v", f, tt.wantReason, tt.wantRetryable)
			}
		})
	}
	long := redactThenCut(nil, classify(lavav1.Stage_STAGE_APPLY, errors.New(strings.Repeat("x", 3*maxMessageBytes)+"END")).Message)
	if len(long) > maxMessageBytes+len("…") || !strings.HasSuffix(long, "END") {
		t.Errorf("a long message keeps %d bytes; want its tail", len(long))
	}
}

// TestRedactThenCut_straddlingSecret: a provider error that echoes a credential across the
// point where the message is cut: cut first, the secret's tail stayed in the status, matching
// no form (found by reading the code in an eighth trial). Redacted first, nothing of it stays.
func TestRedactThenCut_straddlingSecret(t *testing.T) {
	t.Parallel()
	secret := "s3cr3t-" + strings.Repeat("k", 64) + "-tail"
	msg := "error: " + secret + " rejected" + strings.Repeat(".", maxMessageBytes-len(" rejected")-20)
	got := redactThenCut(engine.NewRedactor(secret), msg)
	if strings.Contains(got, "-tail") || strings.Contains(got, "kkkk") {
		t.Errorf("a fragment of the secret stays: %.120q", got)
	}
	if !strings.Contains(got, engine.RedactedText) || len(got) > maxMessageBytes+len("…") {
		t.Errorf("got %d bytes %.120q, want the redacted text's tail", len(got), got)
	}
}

func TestPush(t *testing.T) {
	t.Parallel()
	var l []string
	for i := range 40 {
		l = push(l, fmt.Sprint(i), 32)
		l = push(l, fmt.Sprint(i), 32) // repeats are not added twice
	}
	if len(l) != 32 || l[0] != "8" || l[31] != "39" {
		t.Errorf("push keeps %v", l)
	}
}

func TestMetricsLint(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.ops.WithLabelValues(OpPlan, ResultSuccess).Inc()
	m.duration.WithLabelValues(OpPlan).Observe(1)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("metric lint: %v %v", problems, err)
	}
	if _, err := newMetrics(reg); err == nil {
		t.Error("registering twice succeeded")
	}
}

// TestOutputsSecretName: short names keep "<name>-lava-outputs"; the longest names Kubernetes
// allows get a valid Secret name of at most 253 characters, distinct per name.
func TestOutputsSecretName(t *testing.T) {
	if got := OutputsSecretName("web"); got != "web-lava-outputs" {
		t.Errorf("OutputsSecretName(web) = %q", got)
	}
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 60) + "z"
	seen := map[string]string{}
	for _, name := range []string{long, long[:252] + "y", strings.Repeat("x", 222) + "." + strings.Repeat("y", 30), strings.Repeat("n", 240), strings.Repeat("n", 241)} {
		got := OutputsSecretName(name)
		if errs := validation.IsDNS1123Subdomain(got); len(errs) != 0 {
			t.Errorf("OutputsSecretName(%d characters) = %q: %v", len(name), got, errs)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("%q and %q map to the same Secret %q", prev, name, got)
		}
		seen[got] = name
	}
	if got := OutputsSecretName(strings.Repeat("n", 240)); got != strings.Repeat("n", 240)+"-lava-outputs" {
		t.Errorf("a 240-character name is cut: %q", got)
	}
}

// TestPermissions_applierMayPublishWhatItPublishes: every event the applier publishes is on a
// subject its bus identity may publish (bus.Topology.Permissions, what the chart's NATS, lava up
// and the end-to-end harness enforce). A subject missing from the applier's allow list is
// refused by the server, the handler that publishes it never succeeds, and its object stays
// where it was: the state_regressed anomaly was such a subject.
func TestPermissions_applierMayPublishWhatItPublishes(t *testing.T) {
	t.Parallel()
	perms, err := bus.Declare(bus.TopologyOptions{}).Permissions(bus.ServiceApplier)
	if err != nil {
		t.Fatal(err)
	}
	cause := &lavav1.Envelope{EventId: "e", Generation: 1, Resource: &lavav1.ResourceRef{Namespace: "infra", Name: "prod.vpc", Uid: "u"}}
	published := []bus.Event{
		&lavav1.Planned{Envelope: cause}, &lavav1.Applied{Envelope: cause}, &lavav1.Failed{Envelope: cause},
		&lavav1.Destroyed{Envelope: cause},
		pipeline.StateRegressedAnomaly(cause, bus.ServiceApplier, "p2", "p1", "the state is gone", time.Unix(0, 0)),
	}
	subjects := []string{bus.PoisonAnomalySubject}
	for _, ev := range published {
		s, err := bus.SubjectFor(ev)
		if err != nil {
			t.Fatal(err)
		}
		subjects = append(subjects, s)
	}
	for _, s := range subjects {
		if !slices.ContainsFunc(perms.Publish, func(f string) bool { return server.SubjectMatchesFilter(s, f) }) {
			t.Errorf("the applier publishes %s, which its identity may not publish (allowed: %v)", s, perms.Publish)
		}
	}
	if s, _ := bus.SubjectFor(published[len(published)-1]); s != bus.StateRegressedAnomalySubject {
		t.Errorf("the state_regressed anomaly goes to %s, want bus.StateRegressedAnomalySubject %s", s, bus.StateRegressedAnomalySubject)
	}
}

// TestApprovedPlan: a plan against a lost or regressed state is applied only when approved by
// its id, whatever approvePlan says otherwise and even when it changes nothing; other plans
// follow approvePlan, and a plan that changes nothing needs no approval; a plan a rule requires
// an approval of is applied only when approved by its id.
func TestApprovedPlan(t *testing.T) {
	t.Parallel()
	changes := &engine.PlanRecord{PlanID: "p", HasChanges: true}
	none := &engine.PlanRecord{PlanID: "p"}
	tests := []struct {
		name      string
		approve   string
		regressed string
		plan      *engine.PlanRecord
		verdict   planpolicy.Verdict
		want      bool
	}{
		{"auto", v1alpha1.ApprovePlanAuto, "", changes, planpolicy.Allow, true},
		{"manual", v1alpha1.ApprovePlanManual, "", changes, planpolicy.Allow, false},
		{"manual, no changes", v1alpha1.ApprovePlanManual, "", none, planpolicy.Allow, true},
		{"its id", "p", "", changes, planpolicy.Allow, true},
		{"another id", "q", "", changes, planpolicy.Allow, false},
		{"regressed, auto", v1alpha1.ApprovePlanAuto, "the state is gone", changes, planpolicy.Allow, false},
		{"regressed, auto, no changes", v1alpha1.ApprovePlanAuto, "the state has lineage L2", none, planpolicy.Allow, false},
		{"regressed, manual, no changes", v1alpha1.ApprovePlanManual, "the state has lineage L2", none, planpolicy.Allow, false},
		{"regressed, another id", "q", "the state is gone", changes, planpolicy.Allow, false},
		{"regressed, its id", "p", "the state is gone", changes, planpolicy.Allow, true},
		{"a rule requires approval, auto", v1alpha1.ApprovePlanAuto, "", changes, planpolicy.RequireApproval, false},
		{"a rule requires approval, no changes", v1alpha1.ApprovePlanManual, "", none, planpolicy.RequireApproval, false},
		{"a rule requires approval, its id", "p", "", changes, planpolicy.RequireApproval, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := approvedPlan(input{approve: tt.approve, regressed: tt.regressed}, tt.plan, tt.verdict); got != tt.want {
				t.Errorf("approvedPlan = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSpentApproval: a plan approved by its id is applied once (its id among the applied ones
// is an approval spent); a plan applied under auto, or one that changes nothing under manual, is
// not refused by it.
func TestSpentApproval(t *testing.T) {
	t.Parallel()
	plan := &engine.PlanRecord{PlanID: "p", HasChanges: true}
	tests := []struct {
		name    string
		approve string
		applied []string
		want    bool
	}{
		{"its id, applied", "p", []string{"o", "p"}, true},
		{"its id, not applied", "p", []string{"o"}, false},
		{"auto, applied", v1alpha1.ApprovePlanAuto, []string{"p"}, false},
		{"manual, applied", v1alpha1.ApprovePlanManual, []string{"p"}, false},
		{"another id, applied", "q", []string{"p", "q"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := spentApproval(input{approve: tt.approve}, plan, tt.applied); got != tt.want {
				t.Errorf("spentApproval = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWork_sameInputs_repetition: a held plan is the plan to apply only while it has its own
// id after the record's applies (engine.PlanRecord.HasOwnID): not once its id was applied (an
// approval of it is spent; planned again, it gets an id of its own), nor, for a repetition of
// an applied plan, once another plan was applied after the one it repeats.
func TestWork_sameInputs_repetition(t *testing.T) {
	t.Parallel()
	in := input{artifactDigest: "a", bindingsDigest: "b", engine: "embedded"}
	held := &engine.PlanRecord{Target: engine.Target{RenderedDigest: "a"}, BindingsDigest: "b", Engine: "embedded",
		StateSerial: 1, StateLineage: "L", StateDigest: "d", Resources: []engine.ResourceAction{{Address: "testkit_file.f", Action: engine.ActionUpdate}}}
	held.OwnID([]string{"p0"})
	first := held.PlanID
	repeat := *held
	repeat.OwnID([]string{"p0", first})
	tests := []struct {
		name    string
		held    *engine.PlanRecord
		applied []string
		want    bool
	}{
		{"first, not applied", held, []string{"p0"}, true},
		{"first, applied since", held, []string{"p0", first}, false},
		{"repetition", &repeat, []string{"p0", first}, true},
		{"repetition, applied since", &repeat, []string{"p0", first, repeat.PlanID}, false},
		{"repetition, another apply since", &repeat, []string{"p0", first, "p2"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := &work{rec: &readmodel.Record{Applied: tt.applied}}
			if got := w.sameInputs(tt.held, in); got != tt.want {
				t.Errorf("sameInputs = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestInputOf_providerPins: the applier keeps each provider's :version pin from the
// Synthesized event, which its targets pass to the engines as ProviderConstraints.
func TestInputOf_providerPins(t *testing.T) {
	in := inputOf(&lavav1.Synthesized{Providers: []*lavav1.ProviderRequirement{
		{Name: "aws", Source: "hashicorp/aws", Version: "~> 6.0"},
		{Name: "testkit", Source: "example/testkit"},
	}})
	src, pins := engine.SourcesAndConstraints(in.providers)
	if want := map[string]string{"aws": "hashicorp/aws", "testkit": "example/testkit"}; !maps.Equal(src, want) {
		t.Errorf("sources %v, want %v", src, want)
	}
	if want := map[string]string{"aws": "~> 6.0"}; !maps.Equal(pins, want) {
		t.Errorf("constraints %v, want %v", pins, want)
	}
}
