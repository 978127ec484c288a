package viggy_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/service/viggy"
)

func TestRunPass_cleanVisitsAllBeatsInCanonicalOrder(t *testing.T) {
	t.Parallel()
	var visited []string
	beat := func(name string) viggy.BeatFunc {
		return func(context.Context) (string, error) { visited = append(visited, name); return name, nil }
	}
	res := viggy.RunPass(t.Context(), viggy.Beats{Observe: beat("observe"), Diff: beat("diff"), Classify: beat("classify"),
		Decide: beat("decide"), Act: beat("act"), Attest: beat("attest"), Tick: beat("tick")}, time.Now)
	if diff := cmp.Diff([]string{"observe", "diff", "classify", "decide", "act", "attest", "tick"}, visited); diff != "" {
		t.Fatalf("beats ran out of order (-want +got):\n%s", diff)
	}
	if res.Failed || !res.Decided || len(res.Beats) != 7 {
		t.Fatalf("failed=%v decided=%v beats=%d", res.Failed, res.Decided, len(res.Beats))
	}
	if res.Beats[0].GetBeat() != lavav1.Beat_BEAT_OBSERVE || res.Beats[6].GetBeat() != lavav1.Beat_BEAT_TICK {
		t.Fatalf("first %v last %v, want Observe first and Tick last", res.Beats[0].GetBeat(), res.Beats[6].GetBeat())
	}
	for _, b := range res.Beats {
		if b.GetStatus() != lavav1.BeatStatus_BEAT_STATUS_OK {
			t.Errorf("%v: %v", b.GetBeat(), b.GetStatus())
		}
		if d := b.GetEndedAt().AsTime().Sub(b.GetStartedAt().AsTime()); d < 0 {
			t.Errorf("%v: negative duration %v", b.GetBeat(), d)
		}
	}
	if res.Ended.Before(res.Started) {
		t.Errorf("pass ended %v before it started %v", res.Ended, res.Started)
	}
}

func TestRunPass_failureSkipsLaterBeats(t *testing.T) {
	t.Parallel()
	boom := func(context.Context) (string, error) { return "", errors.New("boom") }
	ok := func(context.Context) (string, error) { return "ok", nil }
	tests := []struct {
		name        string
		beats       viggy.Beats
		failedAt    int
		wantSkipped int
		wantFailed  bool
		wantDecided bool
	}{
		{"observe fails: six skipped", viggy.Beats{Observe: boom, Diff: ok, Tick: ok}, 0, 6, true, false},
		{"diff fails", viggy.Beats{Diff: boom}, 1, 5, true, false},
		{"decide fails: no decision", viggy.Beats{Decide: boom}, 3, 3, true, false},
		{"act fails: decision kept", viggy.Beats{Act: boom}, 4, 2, true, true},
		{"attest fails: recorded, pass goes on", viggy.Beats{Attest: boom}, 5, 0, false, true},
		{"panic is a failure", viggy.Beats{Classify: func(context.Context) (string, error) { panic("x") }}, 2, 4, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := viggy.RunPass(t.Context(), tt.beats, time.Now)
			skipped := 0
			for i, b := range res.Beats {
				switch {
				case i == tt.failedAt && b.GetStatus() != lavav1.BeatStatus_BEAT_STATUS_FAILED:
					t.Errorf("beat %v: %v, want failed", b.GetBeat(), b.GetStatus())
				case b.GetStatus() == lavav1.BeatStatus_BEAT_STATUS_SKIPPED:
					skipped++
					if b.GetStartedAt() != nil {
						t.Errorf("skipped beat %v has a start time", b.GetBeat())
					}
				}
			}
			if skipped != tt.wantSkipped || res.Failed != tt.wantFailed || res.Decided != tt.wantDecided {
				t.Errorf("skipped=%d failed=%v decided=%v, want %d %v %v", skipped, res.Failed, res.Decided, tt.wantSkipped, tt.wantFailed, tt.wantDecided)
			}
		})
	}
}

func TestActionFor_policy(t *testing.T) {
	t.Parallel()
	def := pipeline.DefaultRemediation()
	custom := &lavav1.RemediationPolicy{Cosmetic: lavav1.RemediationAction_REMEDIATION_ACTION_NO_OP,
		Functional: lavav1.RemediationAction_REMEDIATION_ACTION_ESCALATE}
	tests := []struct {
		policy *lavav1.RemediationPolicy
		sev    lavav1.Severity
		want   string
	}{
		{def, lavav1.Severity_SEVERITY_COSMETIC, "Alert"},
		{def, lavav1.Severity_SEVERITY_FUNCTIONAL, "AutoCorrect"},
		{def, lavav1.Severity_SEVERITY_CRITICAL, "RequireApproval"},
		{nil, lavav1.Severity_SEVERITY_CRITICAL, "RequireApproval"},
		{def, lavav1.Severity_SEVERITY_UNSPECIFIED, "NoOp"},
		{custom, lavav1.Severity_SEVERITY_COSMETIC, "NoOp"},
		{custom, lavav1.Severity_SEVERITY_FUNCTIONAL, "Escalate"},
		{custom, lavav1.Severity_SEVERITY_CRITICAL, "Alert"}, // unset degrades to Alert
	}
	for _, tt := range tests {
		if got := pipeline.ActionName(viggy.ActionFor(tt.policy, tt.sev)); got != tt.want {
			t.Errorf("ActionFor(%v, %v) = %s, want %s", tt.policy.GetOrigin(), tt.sev, got, tt.want)
		}
	}
}

// env is a test harness: JetStream with the topology and a viggy service whose Handle is
// called directly.
type env struct {
	t   *testing.T
	js  jetstream.JetStream
	svc *viggy.Service
}

func newEnv(t *testing.T, cfg viggy.Config) *env {
	t.Helper()
	srv := natstest.RunJetStream(t)
	js := srv.JetStream()
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg.JS = js
	svc, err := viggy.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, js: js, svc: svc}
}

func envelope(name string, gen int64, typ, trigger string) *lavav1.Envelope {
	id := eventid.ID("uid-"+name, gen, typ, trigger)
	return &lavav1.Envelope{EventId: id, OccurredAt: timestamppb.Now(), Source: "test",
		Resource: &lavav1.ResourceRef{Namespace: "ns", Name: name, Uid: "uid-" + name}, Generation: gen, CorrelationId: id, Trigger: trigger}
}

func (e *env) handle(ev bus.Event) {
	e.t.Helper()
	m := &bus.Message{Event: ev, Envelope: ev.GetEnvelope(), Schema: string(ev.ProtoReflect().Descriptor().FullName())}
	if err := e.svc.Handle(e.t.Context(), m); err != nil {
		e.t.Fatalf("Handle %s: %v", m.Schema, err)
	}
}

func (e *env) observe(name string, policy *lavav1.RemediationPolicy) {
	e.handle(&lavav1.ResourceObserved{Envelope: envelope(name, 1, "lava.v1.ResourceObserved", "generation:1"),
		Spec: &lavav1.ArchitectureSpec{DriftInterval: durationpb.New(time.Minute)}, Remediation: policy,
		Labels: map[string]string{"team": "infra"}})
}

// last returns the newest message on subject decoded into m, false when there is none.
func (e *env) last(stream, subject string, m proto.Message) bool {
	e.t.Helper()
	st, err := e.js.Stream(e.t.Context(), stream)
	if err != nil {
		e.t.Fatal(err)
	}
	raw, err := st.GetLastMsgForSubject(e.t.Context(), subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	if strings.HasPrefix(subject, bus.PrefixAnomaly) {
		err = protojson.Unmarshal(raw.Data, m)
	} else {
		err = proto.Unmarshal(raw.Data, m)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return true
}

func scan(name string, at time.Time, findings ...*lavav1.DriftFinding) *lavav1.DriftScanned {
	return &lavav1.DriftScanned{Envelope: envelope(name, 1, "lava.v1.DriftScanned", eventid.DriftTrigger(at)), Findings: findings,
		MaxSeverity: viggy.MaxSeverity(findings), ScannedAt: timestamppb.New(at), Engine: lavav1.Engine_ENGINE_EMBEDDED,
		TerraformJsonDigest: strings.Repeat("ab", 32)}
}

func finding(attr string, change lavav1.ChangeKind, sev lavav1.Severity) *lavav1.DriftFinding {
	return &lavav1.DriftFinding{Address: "testkit_file.a", Attribute: attr, Change: change, Severity: sev}
}

func TestService_driftPasses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, viggy.Config{})
	critical := finding("mode", lavav1.ChangeKind_CHANGE_KIND_REPLACE, lavav1.Severity_SEVERITY_CRITICAL)
	functional := finding("content", lavav1.ChangeKind_CHANGE_KIND_UPDATE, lavav1.Severity_SEVERITY_FUNCTIONAL)
	cosmetic := finding("tags.owner", lavav1.ChangeKind_CHANGE_KIND_UPDATE, lavav1.Severity_SEVERITY_COSMETIC)
	noop := &lavav1.RemediationPolicy{Cosmetic: lavav1.RemediationAction_REMEDIATION_ACTION_NO_OP,
		Functional: lavav1.RemediationAction_REMEDIATION_ACTION_NO_OP, Critical: lavav1.RemediationAction_REMEDIATION_ACTION_NO_OP,
		Origin: lavav1.PolicyOrigin_POLICY_ORIGIN_INLINE}
	escalateNoLadder := &lavav1.RemediationPolicy{Functional: lavav1.RemediationAction_REMEDIATION_ACTION_ESCALATE}
	tests := []struct {
		name       string
		policy     *lavav1.RemediationPolicy
		findings   []*lavav1.DriftFinding
		wantPhase  lavav1.Phase
		wantAction lavav1.RemediationAction
		// wantReapply: 0 none, 1 auto-correct, 2 with require_approval.
		wantReapply int
	}{
		{"clean is applied", nil, nil, lavav1.Phase_PHASE_APPLIED, lavav1.RemediationAction_REMEDIATION_ACTION_NO_OP, 0},
		{"functional reconverges", nil, []*lavav1.DriftFinding{functional, cosmetic}, lavav1.Phase_PHASE_RECONVERGING,
			lavav1.RemediationAction_REMEDIATION_ACTION_AUTO_CORRECT, 1},
		{"critical holds for approval", nil, []*lavav1.DriftFinding{critical, functional}, lavav1.Phase_PHASE_DRIFTED,
			lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL, 2},
		{"cosmetic alerts", nil, []*lavav1.DriftFinding{cosmetic}, lavav1.Phase_PHASE_DRIFTED,
			lavav1.RemediationAction_REMEDIATION_ACTION_ALERT, 0},
		{"noop records", noop, []*lavav1.DriftFinding{critical}, lavav1.Phase_PHASE_DRIFTED,
			lavav1.RemediationAction_REMEDIATION_ACTION_NO_OP, 0},
		{"escalate without ladder fails at decide", escalateNoLadder, []*lavav1.DriftFinding{functional}, lavav1.Phase_PHASE_FAILED,
			lavav1.RemediationAction_REMEDIATION_ACTION_UNSPECIFIED, 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "r" + string(rune('a'+i))
			e.observe(name, tt.policy)
			ev := scan(name, time.Now(), tt.findings...)
			e.handle(ev)
			tr := &lavav1.TickReported{}
			if !e.last(bus.StreamPhases, bus.PhaseSubject("ns", name, bus.EventTickReported), tr) {
				t.Fatal("no TickReported")
			}
			if tr.GetFinalPhase() != tt.wantPhase || tr.GetDecision().GetAction() != tt.wantAction {
				t.Fatalf("final phase %v action %v, want %v %v; beats %v", tr.GetFinalPhase(), tr.GetDecision().GetAction(),
					tt.wantPhase, tt.wantAction, tr.GetBeats())
			}
			if len(tr.GetBeats()) != 7 || tr.GetEnvelope().GetTrigger() != eventid.CauseTrigger(ev.GetEnvelope().GetEventId()) {
				t.Fatalf("beats %d trigger %q", len(tr.GetBeats()), tr.GetEnvelope().GetTrigger())
			}
			if tt.wantPhase == lavav1.Phase_PHASE_FAILED {
				if tr.GetDecision() != nil || tr.GetBeats()[3].GetMessage() != pipeline.ErrNoLadder.Error() {
					t.Fatalf("decision %v, decide message %q", tr.GetDecision(), tr.GetBeats()[3].GetMessage())
				}
			}
			js, _ := protojson.Marshal(tr)
			if !strings.Contains(string(js), `"finalPhase":"`+tt.wantPhase.String()+`"`) {
				t.Errorf("JSON has no finalPhase %s: %s", tt.wantPhase, js)
			}
			re := &lavav1.ReapplyRequested{}
			got := 0
			if e.last(bus.StreamCommands, bus.CommandSubject(bus.StagePlan, "ns", name, bus.VerbReapply), re) {
				got = 1
				if re.GetRequireApproval() {
					got = 2
				}
				if re.GetDriftEventId() != ev.GetEnvelope().GetEventId() || re.GetEnvelope().GetGeneration() != 1 {
					t.Errorf("reapply drift id %q generation %d", re.GetDriftEventId(), re.GetEnvelope().GetGeneration())
				}
			}
			if got != tt.wantReapply {
				t.Errorf("reapply %d, want %d", got, tt.wantReapply)
			}
			// Outside Escalate viggy publishes no anomaly: the anomaly service raises
			// DriftDetected from the DriftScanned (Alert), and a second copy would reach a plain
			// subscriber of lava.anomaly.> twice.
			an := &lavav1.AnomalyDetected{}
			sev, _ := bus.SeverityToken(max(viggy.MaxSeverity(tt.findings), lavav1.Severity_SEVERITY_COSMETIC))
			if e.last(bus.StreamAnomalies, bus.AnomalySubject(sev, "drift_detected"), an) && an.GetSource().GetName() == name {
				t.Errorf("viggy published DriftDetected under %s: %v", pipeline.ActionName(tt.wantAction), an)
			}
		})
	}
}

func TestService_escalationTiersOnTimers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, viggy.Config{Tick: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.svc.Run(ctx) }()
	defer func() { cancel(); <-done }()
	policy := &lavav1.RemediationPolicy{Cosmetic: lavav1.RemediationAction_REMEDIATION_ACTION_ESCALATE,
		EscalationTiers: []*lavav1.EscalationTier{
			{Team: "ops", WaitBeforeNext: durationpb.New(300 * time.Millisecond)},
			{Team: "oncall"},
		}}
	e.observe("esc", policy)
	e.handle(scan("esc", time.Now(), finding("tags.owner", lavav1.ChangeKind_CHANGE_KIND_UPDATE, lavav1.Severity_SEVERITY_COSMETIC)))
	subject := bus.AnomalySubject("cosmetic", "drift_detected")
	an := &lavav1.AnomalyDetected{}
	if !e.last(bus.StreamAnomalies, subject, an) || an.GetMetadata()["escalation_tier"] != "0" || an.GetMetadata()["escalation_team"] != "ops" {
		t.Fatalf("tier 0 anomaly: %v", an)
	}
	first := time.Now()
	deadline := time.Now().Add(10 * time.Second)
	for an.GetMetadata()["escalation_tier"] != "1" {
		if time.Now().After(deadline) {
			t.Fatal("tier 1 never notified")
		}
		time.Sleep(20 * time.Millisecond)
		e.last(bus.StreamAnomalies, subject, an)
	}
	if waited := time.Since(first); waited < 250*time.Millisecond {
		t.Errorf("tier 1 after %v, before tier 0's wait of 300ms", waited)
	}
	if an.GetMetadata()["escalation_team"] != "oncall" {
		t.Errorf("tier 1 team %q", an.GetMetadata()["escalation_team"])
	}
}

func TestService_retriesBackOffThenStall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, viggy.Config{Tick: 10 * time.Millisecond, MaxAttempts: 3,
		Backoff: bus.Backoff{Base: 100 * time.Millisecond, Max: 150 * time.Millisecond, Jitter: 0.1}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.svc.Run(ctx) }()
	defer func() { cancel(); <-done }()
	e.observe("flaky", nil)
	failed := func(attempt int32, trigger string) *lavav1.Failed {
		return &lavav1.Failed{Envelope: envelope("flaky", 1, "lava.v1.Failed", trigger), Stage: lavav1.Stage_STAGE_APPLY,
			Reason: "ApplyFailed", Message: "testkit: fail_on_update", Retryable: true, Attempt: attempt, PlanId: "p1"}
	}
	subject := bus.CommandSubject(bus.StageApply, "ns", "flaky", bus.VerbRetry)
	for attempt := int32(1); attempt < 3; attempt++ {
		f := failed(attempt, "cause:try"+string(rune('0'+attempt)))
		start := time.Now()
		e.handle(f)
		retry := &lavav1.RetryRequested{}
		for !e.last(bus.StreamCommands, subject, retry) || retry.GetAttempt() != attempt+1 {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("no RetryRequested attempt %d", attempt+1)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if waited := time.Since(start); waited < 80*time.Millisecond {
			t.Errorf("retry %d published after %v, before its backoff", attempt+1, waited)
		}
		if retry.GetFailedEventId() != f.GetEnvelope().GetEventId() || retry.GetPlanId() != "p1" || retry.GetTarget() != lavav1.Stage_STAGE_APPLY ||
			retry.GetEnvelope().GetTrigger() != eventid.RetryTrigger("apply", int(attempt+1)) {
			t.Errorf("retry %v", retry)
		}
		// The work queue: take it off as the applier would.
		cons, err := e.js.Consumer(t.Context(), bus.StreamCommands, bus.ServiceApplier)
		if err != nil {
			t.Fatal(err)
		}
		batch, err := cons.FetchNoWait(10)
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			_ = m.Ack()
		}
	}
	e.handle(failed(3, "cause:try3"))
	stalled := &lavav1.Failed{}
	if !e.last(bus.StreamPhases, bus.PhaseSubject("ns", "flaky", bus.EventFailed), stalled) || stalled.GetReason() != v1alpha1.ReasonRetriesExhausted ||
		stalled.GetRetryable() || stalled.GetEnvelope().GetSource() != bus.ServiceViggy || !strings.Contains(stalled.GetMessage(), "ApplyFailed") {
		t.Fatalf("stall Failed: %v", stalled)
	}
	// The anomaly service raises Stalled from that Failed; viggy does not publish it too.
	if an := (&lavav1.AnomalyDetected{}); e.last(bus.StreamAnomalies, bus.AnomalySubject("critical", "stalled"), an) {
		t.Errorf("viggy published a Stalled anomaly: %v", an)
	}
	tr := &lavav1.TickReported{}
	if !e.last(bus.StreamPhases, bus.PhaseSubject("ns", "flaky", bus.EventTickReported), tr) || tr.GetFinalPhase() != lavav1.Phase_PHASE_FAILED ||
		tr.GetBeats()[4].GetMessage() != "stalled: RetriesExhausted" {
		t.Fatalf("stall tick: %v", tr)
	}
	// viggy's own Failed is not acted on again.
	e.handle(stalled)
	tr2 := &lavav1.TickReported{}
	e.last(bus.StreamPhases, bus.PhaseSubject("ns", "flaky", bus.EventTickReported), tr2)
	if tr2.GetEnvelope().GetEventId() != tr.GetEnvelope().GetEventId() {
		t.Errorf("viggy made a pass over its own Failed")
	}
}

func TestService_generationsAndAppliesCancelRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, viggy.Config{Tick: 10 * time.Millisecond, Backoff: bus.Backoff{Base: 300 * time.Millisecond, Max: time.Second}})
	failed := func(name string) *lavav1.Failed {
		return &lavav1.Failed{Envelope: envelope(name, 1, "lava.v1.Failed", "cause:x"), Stage: lavav1.Stage_STAGE_PLAN,
			Reason: "Locked", Retryable: true, Attempt: 1}
	}
	// A new generation makes the failed one's retry obsolete.
	e.observe("newgen", nil)
	e.handle(failed("newgen"))
	e.handle(&lavav1.ResourceObserved{Envelope: envelope("newgen", 2, "lava.v1.ResourceObserved", "generation:2"),
		Spec: &lavav1.ArchitectureSpec{}})
	// An apply that succeeded meanwhile does too.
	e.observe("applied", nil)
	e.handle(failed("applied"))
	e.handle(&lavav1.Applied{Envelope: envelope("applied", 1, "lava.v1.Applied", "cause:y"), PlanId: "p"})
	// A control resource whose retry goes out.
	e.observe("control", nil)
	e.handle(failed("control"))

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.svc.Run(ctx) }()
	defer func() { cancel(); <-done }()
	retry := &lavav1.RetryRequested{}
	waitStart := time.Now()
	for !e.last(bus.StreamCommands, bus.CommandSubject(bus.StagePlan, "ns", "control", bus.VerbRetry), retry) {
		if time.Since(waitStart) > 10*time.Second {
			t.Fatal("the control resource's retry never went out")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the others were due at the same time
	for _, name := range []string{"newgen", "applied"} {
		if e.last(bus.StreamCommands, bus.CommandSubject(bus.StagePlan, "ns", name, bus.VerbRetry), &lavav1.RetryRequested{}) {
			t.Errorf("%s: a cancelled retry was published", name)
		}
	}
	// A scan of the old generation is stale: no pass.
	e.handle(scan("newgen", time.Now(), finding("content", lavav1.ChangeKind_CHANGE_KIND_UPDATE, lavav1.Severity_SEVERITY_FUNCTIONAL)))
	tr := &lavav1.TickReported{}
	if e.last(bus.StreamPhases, bus.PhaseSubject("ns", "newgen", bus.EventTickReported), tr) &&
		tr.GetEnvelope().GetTrigger() != eventid.CauseTrigger(failed("newgen").GetEnvelope().GetEventId()) {
		t.Errorf("a pass ran over a scan of an older generation: %v", tr)
	}
}

func TestService_heldPlanInDecision(t *testing.T) {
	t.Parallel()
	e := newEnv(t, viggy.Config{})
	e.observe("held", nil)
	crit := finding("mode", lavav1.ChangeKind_CHANGE_KIND_REPLACE, lavav1.Severity_SEVERITY_CRITICAL)
	e.handle(scan("held", time.Now(), crit))
	plan := strings.Repeat("c", 64)
	e.handle(&lavav1.Planned{Envelope: envelope("held", 1, "lava.v1.Planned", "cause:r"), PlanId: plan, AwaitingApproval: true})
	e.handle(scan("held", time.Now().Add(time.Second), crit))
	tr := &lavav1.TickReported{}
	if !e.last(bus.StreamPhases, bus.PhaseSubject("ns", "held", bus.EventTickReported), tr) || tr.GetDecision().GetPlanId() != plan ||
		tr.GetFinalPhase() != lavav1.Phase_PHASE_DRIFTED {
		t.Fatalf("second pass: %v", tr)
	}
}

// A poison message on viggy's consumer is terminated and reported once as a PoisonMessage
// anomaly, with where it was and why, never its body.
func TestService_poisonMessageReportedAsAnomaly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, viggy.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.svc.Run(ctx) }()
	defer func() { cancel(); <-done }()

	subject := bus.PhaseSubject("ns", "junk", bus.EventFailed)
	body := []byte("\xff\xff\xffBODY-MARKER password=hunter2")
	msg := &nats.Msg{Subject: subject, Data: body, Header: nats.Header{}}
	msg.Header.Set(bus.HeaderSchema, "lava.v1.Failed")
	msg.Header.Set(bus.HeaderContentType, bus.ContentTypeProto)
	ack, err := e.js.PublishMsg(t.Context(), msg)
	if err != nil {
		t.Fatal(err)
	}

	st, err := e.js.Stream(t.Context(), bus.StreamAnomalies)
	if err != nil {
		t.Fatal(err)
	}
	poison := bus.AnomalySubject("functional", "poison_message")
	var raw *jetstream.RawStreamMsg
	for deadline := time.Now().Add(10 * time.Second); raw == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no anomaly on %s", poison)
		}
		if raw, err = st.GetLastMsgForSubject(t.Context(), poison); errors.Is(err, jetstream.ErrMsgNotFound) {
			raw = nil
		} else if err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // a second report would have arrived by now
	info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(poison))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Msgs; n != 1 {
		t.Errorf("%d anomalies on %s, want 1", n, poison)
	}
	if strings.Contains(string(raw.Data), "BODY-MARKER") || strings.Contains(string(raw.Data), "hunter2") {
		t.Errorf("the anomaly carries the message body: %s", raw.Data)
	}
	an := &lavav1.AnomalyDetected{}
	if err := protojson.Unmarshal(raw.Data, an); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"service": "viggy", "stream": bus.StreamPhases, "consumer": bus.ServiceViggy, "subject": subject,
		"stream_seq": strconv.FormatUint(ack.Sequence, 10), "deliveries": "1", "reason": string(bus.PoisonUndecodable)}
	if diff := cmp.Diff(want, an.GetMetadata()); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if an.GetKind() != lavav1.AnomalyKind_ANOMALY_KIND_CUSTOM || an.GetExtensionKind() != "poison_message" ||
		an.GetSeverity() != lavav1.Severity_SEVERITY_FUNCTIONAL || an.GetSource().GetNamespace() != "ns" ||
		an.GetSource().GetName() != "junk" || an.GetEnvelope().GetSource() != bus.ServiceViggy || len(an.GetFingerprint()) != 64 {
		t.Errorf("anomaly %v", an)
	}
	if !strings.Contains(an.GetMessage(), "undecodable") {
		t.Errorf("message %q does not say why the message was terminated", an.GetMessage())
	}
}

// TestService_suspendStopsActs: after a suspended generation is observed, a drift scan gets
// no pass (no TickReported, no ReapplyRequested, even under AutoCorrect); the resumed
// generation's scan is acted on again.
func TestService_suspendStopsActs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, viggy.Config{})
	functional := finding("content", lavav1.ChangeKind_CHANGE_KIND_UPDATE, lavav1.Severity_SEVERITY_FUNCTIONAL)
	observe := func(gen int64, suspend bool) {
		e.handle(&lavav1.ResourceObserved{Envelope: envelope("held", gen, "lava.v1.ResourceObserved", eventid.GenerationTrigger(gen)),
			Spec: &lavav1.ArchitectureSpec{DriftInterval: durationpb.New(time.Minute), Suspend: suspend}})
	}
	scanAt := func(gen int64, at time.Time) *lavav1.DriftScanned {
		ev := scan("held", at, functional)
		ev.Envelope = envelope("held", gen, "lava.v1.DriftScanned", eventid.DriftTrigger(at))
		return ev
	}
	observe(1, false)
	observe(2, true)
	e.handle(scanAt(2, time.Now()))
	e.handle(scanAt(1, time.Now().Add(time.Second)))
	tr := &lavav1.TickReported{}
	if e.last(bus.StreamPhases, bus.PhaseSubject("ns", "held", bus.EventTickReported), tr) {
		t.Fatalf("suspended resource got a pass: %v", tr)
	}
	reapply := bus.CommandSubject(bus.StagePlan, "ns", "held", bus.VerbReapply)
	if e.last(bus.StreamCommands, reapply, &lavav1.ReapplyRequested{}) {
		t.Fatal("suspended resource was auto-corrected")
	}
	observe(3, false)
	e.handle(scanAt(3, time.Now().Add(2*time.Second)))
	if !e.last(bus.StreamPhases, bus.PhaseSubject("ns", "held", bus.EventTickReported), tr) || tr.GetEnvelope().GetGeneration() != 3 {
		t.Fatalf("resumed generation got no pass: %v", tr)
	}
	re := &lavav1.ReapplyRequested{}
	if !e.last(bus.StreamCommands, reapply, re) || re.GetEnvelope().GetGeneration() != 3 {
		t.Fatalf("resumed generation was not auto-corrected: %v", re)
	}
}

// TestService_lockWaitsKeepTheBudget: a Failed with reason Locked is a wait. Six of them in a
// row (more than MaxAttempts) each schedule a retry of the same attempt with a lock-wait
// event id and never stall the resource; the budget is spent only by real failures.
func TestService_lockWaitsKeepTheBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, viggy.Config{Tick: 10 * time.Millisecond, MaxAttempts: 2,
		Backoff: bus.Backoff{Base: 20 * time.Millisecond, Max: 40 * time.Millisecond}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.svc.Run(ctx) }()
	defer func() { cancel(); <-done }()
	e.observe("waits", nil)
	subject := bus.CommandSubject(bus.StagePlan, "ns", "waits", bus.VerbRetry)
	drain := func() {
		cons, err := e.js.Consumer(t.Context(), bus.StreamCommands, bus.ServiceApplier)
		if err != nil {
			t.Fatal(err)
		}
		batch, err := cons.FetchNoWait(10)
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			_ = m.Ack()
		}
	}
	trigger := "cause:synthesized"
	for wait := 1; wait <= 6; wait++ {
		f := &lavav1.Failed{Envelope: envelope("waits", 1, "lava.v1.Failed", trigger), Stage: lavav1.Stage_STAGE_PLAN,
			Reason: v1alpha1.ReasonLocked, Message: "state ns/waits is locked by \"cli\"", Retryable: true, Attempt: 1}
		e.handle(f)
		retry := &lavav1.RetryRequested{}
		start := time.Now()
		for !e.last(bus.StreamCommands, subject, retry) || retry.GetFailedEventId() != f.GetEnvelope().GetEventId() {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("wait %d: no RetryRequested after a Locked failure", wait)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if retry.GetAttempt() != 1 || retry.GetEnvelope().GetTrigger() != eventid.LockWaitTrigger("plan", f.GetEnvelope().GetEventId()) {
			t.Fatalf("wait %d: retry attempt %d trigger %q, want attempt 1 again with a lock-wait trigger", wait,
				retry.GetAttempt(), retry.GetEnvelope().GetTrigger())
		}
		stalled := &lavav1.Failed{}
		if e.last(bus.StreamPhases, bus.PhaseSubject("ns", "waits", bus.EventFailed), stalled) && stalled.GetReason() == v1alpha1.ReasonRetriesExhausted {
			t.Fatalf("wait %d: the resource stalled while only waiting on a lock", wait)
		}
		drain()
		trigger = "cause:" + retry.GetEnvelope().GetEventId()
	}
	// A real failure of the last attempt the budget allows still stalls.
	e.handle(&lavav1.Failed{Envelope: envelope("waits", 1, "lava.v1.Failed", trigger), Stage: lavav1.Stage_STAGE_PLAN,
		Reason: "PlanFailed", Retryable: true, Attempt: 2})
	stalled := &lavav1.Failed{}
	if !e.last(bus.StreamPhases, bus.PhaseSubject("ns", "waits", bus.EventFailed), stalled) || stalled.GetReason() != v1alpha1.ReasonRetriesExhausted {
		t.Fatalf("after the budget's real failures: %v, want RetriesExhausted", stalled)
	}
}
