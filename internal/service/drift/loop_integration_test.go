//go:build integration

package drift_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/engines"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
	"github.com/lava-operator/lava/internal/service/anomaly"
	"github.com/lava-operator/lava/internal/service/applier"
	"github.com/lava-operator/lava/internal/service/drift"
	"github.com/lava-operator/lava/internal/service/viggy"
)

type loopEvent struct {
	subject string
	event   bus.Event
}

// loop is the pipeline after synth, all real and in process: JetStream, the applier service,
// the drift service, viggy and the anomaly service, with the real engines and the extended
// testkit provider.
type loop struct {
	t      *testing.T
	js     jetstream.JetStream
	pub    *bus.Publisher
	art    *bus.Artifacts
	engine lavav1.Engine

	mu   sync.Mutex
	msgs []loopEvent
}

func newLoop(t *testing.T, eng lavav1.Engine) *loop {
	t.Helper()
	tools := tofutest.Tofu(t)
	mirror := tofutest.TestkitMirror(t, tools)
	srv := natstest.RunJetStream(t)
	js := srv.JetStream()
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{LeaseTTL: 3 * time.Second, BackOff: []time.Duration{30 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	art, err := bus.NewArtifacts(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	l := &loop{t: t, js: js, pub: bus.NewPublisher(js), art: art, engine: eng}
	sub, err := srv.Conn().Subscribe("lava.>", func(m *nats.Msg) {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(m.Header.Get(bus.HeaderSchema)))
		if err != nil {
			return
		}
		msg := mt.New().Interface()
		if strings.HasPrefix(m.Subject, bus.PrefixAnomaly) {
			err = protojson.Unmarshal(m.Data, msg)
		} else {
			err = proto.Unmarshal(m.Data, msg)
		}
		if ev, ok := msg.(bus.Event); ok && err == nil {
			l.mu.Lock()
			l.msgs = append(l.msgs, loopEvent{subject: m.Subject, event: ev})
			l.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	log := slog.New(slog.NewTextHandler(&testWriter{t: t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	timeouts := engine.Timeouts{Init: time.Minute, Plan: 2 * time.Minute, Apply: 2 * time.Minute, Destroy: 2 * time.Minute}

	// The applier.
	aSet, err := applier.OpenEngines(t.Context(), js, engines.Options{ProviderDir: mirror, TofuBin: tools.Bin,
		WorkDir: t.TempDir(), Timeouts: timeouts}, time.Minute, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(aSet.Close)
	app, err := applier.New(t.Context(), applier.Config{JS: js, Store: aSet.Store, Engines: aSet.Engines, Holder: "applier-" + rand.Text()[:6],
		Logger: log.With("service", "applier"), NakBackoff: bus.Backoff{Base: 200 * time.Millisecond, Max: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	l.run("applier", app.Run)

	// Drift.
	dSet, err := engines.Open(t.Context(), js, engines.Options{ProviderDir: mirror, TofuBin: tools.Bin, WorkDir: t.TempDir(),
		Timeouts: timeouts, Process: "drift"}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dSet.Close)
	leases, err := bus.NewLeases(t.Context(), js, "drift-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	dr, err := drift.New(t.Context(), drift.Config{JS: js, Engines: dSet.Engines, Holder: "drift-test", MinInterval: 100 * time.Millisecond,
		Tick: 50 * time.Millisecond, Leases: leases, RetryDelay: 200 * time.Millisecond, Logger: log.With("service", "drift")})
	if err != nil {
		t.Fatal(err)
	}
	l.run("drift", dr.Run)

	// Viggy.
	vg, err := viggy.New(t.Context(), viggy.Config{JS: js, MaxAttempts: 3, Tick: 50 * time.Millisecond,
		Backoff: bus.Backoff{Base: 500 * time.Millisecond, Max: 2 * time.Second, Jitter: 0.2}, Logger: log.With("service", "viggy")})
	if err != nil {
		t.Fatal(err)
	}
	l.run("viggy", vg.Run)

	// The anomaly service raises DriftDetected (Alert) and Stalled from the pipeline's events.
	an, err := anomaly.New(t.Context(), anomaly.Config{JS: js, Logger: log.With("service", "anomaly")})
	if err != nil {
		t.Fatal(err)
	}
	l.run("anomaly", an.Run)
	return l
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (l *loop) run(what string, f func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(l.t.Context()))
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	l.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			l.t.Errorf("%s: %v", what, err)
		}
	})
}

// fileDoc renders one testkit_file.
func fileDoc(path string, extra map[string]any) []byte {
	attrs := map[string]any{"filename": path, "content": "hello\n", "tags": map[string]string{"owner": "ana"}}
	for k, v := range extra {
		attrs[k] = v
	}
	b, _ := json.Marshal(map[string]any{"resource": map[string]any{"testkit_file": map[string]any{"f": attrs}}})
	return b
}

// start publishes what the watcher and synth would for a new resource: ResourceObserved (the
// drift interval and the remediation policy) and Synthesized (the Terraform JSON) under
// approvePlan auto.
func (l *loop) start(name string, doc []byte, policy *lavav1.RemediationPolicy) {
	l.t.Helper()
	l.generation(name, 1, doc, policy, v1alpha1.ApprovePlanAuto)
}

// generation publishes what the watcher and synth would for generation gen of a resource:
// ResourceObserved (the drift interval and the remediation policy) and Synthesized (the
// Terraform JSON, spec.approvePlan approve).
func (l *loop) generation(name string, gen int64, doc []byte, policy *lavav1.RemediationPolicy, approve string) {
	l.t.Helper()
	ctx := l.t.Context()
	uid := "uid-" + name
	obs := &lavav1.ResourceObserved{Envelope: envelope("loop", name, uid, gen, "lava.v1.ResourceObserved", eventid.GenerationTrigger(gen)),
		Spec: &lavav1.ArchitectureSpec{Engine: l.engine, DriftInterval: durationpb.New(time.Second)}, Remediation: policy,
		Dependencies: &lavav1.DependencyState{Ready: true}, Labels: map[string]string{"team": "infra"}}
	if _, err := l.pub.PublishEvent(ctx, obs); err != nil {
		l.t.Fatal(err)
	}
	digest, err := l.art.Put(ctx, bytes.NewReader(doc))
	if err != nil {
		l.t.Fatal(err)
	}
	env := envelope("loop", name, uid, gen, "lava.v1.Synthesized", eventid.CauseTrigger(obs.GetEnvelope().GetEventId()))
	env.CorrelationId = obs.GetEnvelope().GetEventId()
	syn := &lavav1.Synthesized{Envelope: env, Render: &lavav1.RenderRecord{TerraformJsonDigest: digest, BindingsDigest: "none", ResourceCount: 1},
		Gate: &lavav1.GateVerdict{Passed: true}, ArtifactDigest: digest, ArtifactSizeBytes: int64(len(doc)),
		Providers: []*lavav1.ProviderRequirement{{Name: "testkit", Source: "example/testkit"}}, Engine: l.engine, ApprovePlan: approve}
	if _, err := l.pub.PublishEvent(ctx, syn); err != nil {
		l.t.Fatal(err)
	}
}

// since returns the index of the next captured event.
func (l *loop) since() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.msgs)
}

// await waits for an event of type T about name, captured at index from or later, that ok
// accepts.
func await[T bus.Event](l *loop, name string, from int, d time.Duration, ok func(T) bool) T {
	l.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		msgs := l.msgs[from:]
		l.mu.Unlock()
		for _, m := range msgs {
			if ev, is := m.event.(T); is && ev.GetEnvelope().GetResource().GetName() == name && (ok == nil || ok(ev)) {
				return ev
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	var zero T
	l.t.Fatalf("no matching %T for %s within %v; events:\n%s", zero, name, d, l.describe(name))
	return zero
}

// index is the capture index of ev (by event id), -1 when absent.
func (l *loop) index(ev bus.Event) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, m := range l.msgs {
		if m.event.GetEnvelope().GetEventId() == ev.GetEnvelope().GetEventId() {
			return i
		}
	}
	return -1
}

func (l *loop) describe(name string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, m := range l.msgs {
		if m.event.GetEnvelope().GetResource().GetName() != name {
			continue
		}
		b.WriteString(m.subject)
		switch e := m.event.(type) {
		case *lavav1.Failed:
			b.WriteString(" " + e.GetReason() + ": " + e.GetMessage())
		case *lavav1.DriftScanned:
			for _, f := range e.GetFindings() {
				b.WriteString(" " + f.GetAddress() + "." + f.GetAttribute() + "=" + f.GetSeverity().String())
			}
		case *lavav1.TickReported:
			b.WriteString(" " + e.GetFinalPhase().String())
		}
		b.WriteString("\n")
	}
	return b.String()
}

func hasFinding(ev *lavav1.DriftScanned, attr string, sev lavav1.Severity) bool {
	for _, f := range ev.GetFindings() {
		if f.GetAttribute() == attr && f.GetSeverity() == sev {
			return true
		}
	}
	return false
}

func phaseIs(p lavav1.Phase) func(*lavav1.TickReported) bool {
	return func(tr *lavav1.TickReported) bool { return tr.GetFinalPhase() == p }
}

// TestLoop_outOfBandDrift drives drift, viggy and the applier against the real testkit
// provider: a content change is found and auto-corrected, and so is the same change made
// again; under approvePlan manual each repetition of a change is held under an id of its own
// and applied when approved by it; a mode change (replacement) holds for approval, a tag change under Alert records Drifted and raises an anomaly, a clean scan
// goes back to Applied.
func TestLoop_outOfBandDrift(t *testing.T) {
	for _, eng := range []lavav1.Engine{lavav1.Engine_ENGINE_EMBEDDED, lavav1.Engine_ENGINE_TOFU} {
		t.Run(strings.ToLower(strings.TrimPrefix(eng.String(), "ENGINE_")), func(t *testing.T) { outOfBandDrift(t, eng) })
	}
}

func outOfBandDrift(t *testing.T, eng lavav1.Engine) {
	l := newLoop(t, eng)
	dir := t.TempDir()

	t.Run("functional drift is auto-corrected, then a clean scan is Applied", func(t *testing.T) {
		path := filepath.Join(dir, "auto.txt")
		l.start("auto", fileDoc(path, nil), nil)
		await(l, "auto", 0, 2*time.Minute, func(*lavav1.Applied) bool { return true })
		from := l.since()
		if err := os.WriteFile(path, []byte("changed out of band\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		scan := await(l, "auto", from, time.Minute, func(ev *lavav1.DriftScanned) bool { return len(ev.GetFindings()) > 0 })
		if !hasFinding(scan, "content", lavav1.Severity_SEVERITY_FUNCTIONAL) || scan.GetMaxSeverity() != lavav1.Severity_SEVERITY_FUNCTIONAL {
			t.Fatalf("scan findings: %v", scan.GetFindings())
		}
		tick := await(l, "auto", from, time.Minute, phaseIs(lavav1.Phase_PHASE_RECONVERGING))
		if tick.GetDecision().GetAction() != lavav1.RemediationAction_REMEDIATION_ACTION_AUTO_CORRECT || len(tick.GetBeats()) != 7 {
			t.Fatalf("tick: %v", tick)
		}
		re := await(l, "auto", from, time.Minute, func(*lavav1.ReapplyRequested) bool { return true })
		if re.GetRequireApproval() || re.GetDriftEventId() != scan.GetEnvelope().GetEventId() {
			t.Fatalf("reapply: %v", re)
		}
		if ti, ri := l.index(tick), l.index(re); ti < 0 || ri < ti {
			t.Errorf("ReapplyRequested (#%d) went out before the TickReported (#%d) the watcher folds into Reconverging", ri, ti)
		}
		await(l, "auto", from, 2*time.Minute, func(*lavav1.Applied) bool { return true })
		if b, _ := os.ReadFile(path); string(b) != "hello\n" {
			t.Fatalf("file after auto-correct: %q", b)
		}
		after := l.since()
		clean := await(l, "auto", after, time.Minute, func(ev *lavav1.DriftScanned) bool { return len(ev.GetFindings()) == 0 })
		await(l, "auto", after, time.Minute, func(tr *lavav1.TickReported) bool {
			return tr.GetFinalPhase() == lavav1.Phase_PHASE_APPLIED && tr.GetEnvelope().GetTrigger() == eventid.CauseTrigger(clean.GetEnvelope().GetEventId())
		})
	})

	t.Run("the same functional drift made twice is auto-corrected twice", func(t *testing.T) {
		// A correction restores the state body the last apply left, at the same serial (both
		// engines, as Terraform, write no new serial for an unchanged body), so the second
		// correction is the same plan as the first (under an id of its own,
		// engine.PlanRecord.OwnID).
		path := filepath.Join(dir, "twice.txt")
		l.start("twice", fileDoc(path, nil), nil)
		await(l, "twice", 0, 2*time.Minute, func(*lavav1.Applied) bool { return true })
		for i := range 2 {
			from := l.since()
			if err := os.WriteFile(path, []byte("changed out of band\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			await(l, "twice", from, time.Minute, func(ev *lavav1.DriftScanned) bool {
				return hasFinding(ev, "content", lavav1.Severity_SEVERITY_FUNCTIONAL)
			})
			await(l, "twice", from, time.Minute, phaseIs(lavav1.Phase_PHASE_RECONVERGING))
			applied := await(l, "twice", from, time.Minute, func(*lavav1.Applied) bool { return true })
			if b, _ := os.ReadFile(path); string(b) != "hello\n" {
				t.Fatalf("file after correction %d: %q", i+1, b)
			}
			t.Logf("correction %d: plan %s, state serial %d", i+1, applied.GetPlanId(), applied.GetStateSerial())
			after := l.since()
			clean := await(l, "twice", after, time.Minute, func(ev *lavav1.DriftScanned) bool { return len(ev.GetFindings()) == 0 })
			await(l, "twice", after, time.Minute, func(tr *lavav1.TickReported) bool {
				return tr.GetFinalPhase() == lavav1.Phase_PHASE_APPLIED && tr.GetEnvelope().GetTrigger() == eventid.CauseTrigger(clean.GetEnvelope().GetEventId())
			})
		}
	})

	t.Run("the same functional drift under manual approval is held under a new id each time", func(t *testing.T) {
		// Each correction is the same plan against the same state (see above); an approval by
		// id is spent by its apply, so a repetition must be held under an id no approval
		// named yet (engine.PlanRecord.OwnID), or the object awaits an approval nobody can
		// give.
		path := filepath.Join(dir, "manual.txt")
		doc := fileDoc(path, nil)
		l.generation("manual", 1, doc, nil, v1alpha1.ApprovePlanManual)
		first := await(l, "manual", 0, 2*time.Minute, func(p *lavav1.Planned) bool { return p.GetAwaitingApproval() })
		l.generation("manual", 2, doc, nil, first.GetPlanId())
		await(l, "manual", 0, 2*time.Minute, func(a *lavav1.Applied) bool { return a.GetPlanId() == first.GetPlanId() })
		spent := []string{first.GetPlanId()}
		for i := range 3 {
			from := l.since()
			if err := os.WriteFile(path, []byte("changed out of band\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			await(l, "manual", from, time.Minute, func(ev *lavav1.DriftScanned) bool {
				return hasFinding(ev, "content", lavav1.Severity_SEVERITY_FUNCTIONAL)
			})
			held := await(l, "manual", from, 2*time.Minute, func(p *lavav1.Planned) bool { return p.GetAwaitingApproval() })
			if slices.Contains(spent, held.GetPlanId()) {
				t.Fatalf("correction %d held under %s, an id whose approval an apply spent (%v): nothing can approve it", i+1, held.GetPlanId(), spent)
			}
			if b, _ := os.ReadFile(path); string(b) != "changed out of band\n" {
				t.Fatalf("correction %d applied before its approval: file %q", i+1, b)
			}
			l.generation("manual", int64(3+i), doc, nil, held.GetPlanId())
			applied := await(l, "manual", from, 2*time.Minute, func(a *lavav1.Applied) bool { return a.GetPlanId() == held.GetPlanId() })
			if b, _ := os.ReadFile(path); string(b) != "hello\n" {
				t.Fatalf("file after correction %d: %q", i+1, b)
			}
			t.Logf("correction %d: plan %s, state serial %d", i+1, applied.GetPlanId(), applied.GetStateSerial())
			spent = append(spent, held.GetPlanId())
			after := l.since()
			await(l, "manual", after, time.Minute, func(ev *lavav1.DriftScanned) bool { return len(ev.GetFindings()) == 0 })
		}
	})

	t.Run("critical drift holds for approval", func(t *testing.T) {
		path := filepath.Join(dir, "crit.txt")
		l.start("crit", fileDoc(path, nil), nil)
		await(l, "crit", 0, 2*time.Minute, func(*lavav1.Applied) bool { return true })
		from := l.since()
		if err := os.Chmod(path, 0o600); err != nil {
			t.Fatal(err)
		}
		scan := await(l, "crit", from, time.Minute, func(ev *lavav1.DriftScanned) bool { return len(ev.GetFindings()) > 0 })
		if !hasFinding(scan, "mode", lavav1.Severity_SEVERITY_CRITICAL) || scan.GetMaxSeverity() != lavav1.Severity_SEVERITY_CRITICAL {
			t.Fatalf("scan findings: %v", scan.GetFindings())
		}
		tick := await(l, "crit", from, time.Minute, phaseIs(lavav1.Phase_PHASE_DRIFTED))
		if tick.GetDecision().GetAction() != lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL {
			t.Fatalf("tick: %v", tick)
		}
		held := await(l, "crit", from, 2*time.Minute, func(p *lavav1.Planned) bool { return p.GetAwaitingApproval() })
		if len(held.GetPlanId()) != 64 || held.GetSummary().GetAdd() != 1 || held.GetSummary().GetDestroy() != 1 {
			t.Fatalf("held plan: %v", held)
		}
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("the held plan was applied: mode %v (%v)", st.Mode(), err)
		}
		// The next pass carries the held plan id in its decision.
		next := await(l, "crit", l.since(), time.Minute, func(tr *lavav1.TickReported) bool { return tr.GetDecision().GetPlanId() != "" })
		if next.GetDecision().GetPlanId() != held.GetPlanId() {
			t.Errorf("decision plan %q, want the held %q", next.GetDecision().GetPlanId(), held.GetPlanId())
		}
	})

	t.Run("cosmetic drift under Alert records Drifted and raises an anomaly", func(t *testing.T) {
		path := filepath.Join(dir, "tags.txt")
		l.start("tags", fileDoc(path, nil), nil)
		await(l, "tags", 0, 2*time.Minute, func(*lavav1.Applied) bool { return true })
		from := l.since()
		if err := os.WriteFile(path+".tags.json", []byte(`{"owner":"mallory"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		scan := await(l, "tags", from, time.Minute, func(ev *lavav1.DriftScanned) bool { return len(ev.GetFindings()) > 0 })
		if !hasFinding(scan, "tags.owner", lavav1.Severity_SEVERITY_COSMETIC) || scan.GetMaxSeverity() != lavav1.Severity_SEVERITY_COSMETIC {
			t.Fatalf("scan findings: %v", scan.GetFindings())
		}
		tick := await(l, "tags", from, time.Minute, phaseIs(lavav1.Phase_PHASE_DRIFTED))
		if tick.GetDecision().GetAction() != lavav1.RemediationAction_REMEDIATION_ACTION_ALERT {
			t.Fatalf("tick: %v", tick)
		}
		an := await(l, "tags", from, time.Minute, func(*lavav1.AnomalyDetected) bool { return true })
		if an.GetKind() != lavav1.AnomalyKind_ANOMALY_KIND_DRIFT_DETECTED || an.GetSeverity() != lavav1.Severity_SEVERITY_COSMETIC ||
			an.GetLabels()["team"] != "infra" || an.GetEnvelope().GetSource() != bus.ServiceAnomaly ||
			an.GetMetadata()["terraform_json_digest"] != scan.GetTerraformJsonDigest() {
			t.Fatalf("anomaly (want the anomaly service's, from the scan): %v", an)
		}
		if b, _ := os.ReadFile(path + ".tags.json"); !strings.Contains(string(b), "mallory") {
			t.Errorf("Alert changed the infrastructure: %s", b)
		}
	})
}

// TestLoop_retriesBackOffThenStall: an apply that keeps failing is retried by viggy with
// growing delays (RetryRequested attempts 2 and 3, each after its backoff) and then stalls
// (Failed RetriesExhausted, not retryable, and the anomaly service's Stalled anomaly).
func TestLoop_retriesBackOffThenStall(t *testing.T) {
	l := newLoop(t, lavav1.Engine_ENGINE_EMBEDDED)
	path := filepath.Join(t.TempDir(), "fail.txt")
	l.start("fail", fileDoc(path, map[string]any{"fail_on_create": true}), nil)
	first := await(l, "fail", 0, 2*time.Minute, func(f *lavav1.Failed) bool { return f.GetAttempt() == 1 })
	if !first.GetRetryable() || first.GetStage() != lavav1.Stage_STAGE_APPLY {
		t.Fatalf("first failure: %v", first)
	}
	var notBefore []time.Time
	for attempt := int32(2); attempt <= 3; attempt++ {
		r := await(l, "fail", 0, time.Minute, func(r *lavav1.RetryRequested) bool { return r.GetAttempt() == attempt })
		if r.GetTarget() != lavav1.Stage_STAGE_APPLY {
			t.Fatalf("retry: %v", r)
		}
		notBefore = append(notBefore, r.GetNotBefore().AsTime())
		await(l, "fail", 0, 2*time.Minute, func(f *lavav1.Failed) bool {
			return f.GetAttempt() == attempt && f.GetEnvelope().GetSource() == bus.ServiceApplier
		})
	}
	stalled := await(l, "fail", 0, time.Minute, func(f *lavav1.Failed) bool { return f.GetReason() == v1alpha1.ReasonRetriesExhausted })
	if stalled.GetRetryable() || !strings.Contains(stalled.GetMessage(), "gave up after 3 attempts") {
		t.Fatalf("stall: %v", stalled)
	}
	an := await(l, "fail", 0, time.Minute, func(an *lavav1.AnomalyDetected) bool { return an.GetKind() == lavav1.AnomalyKind_ANOMALY_KIND_STALLED })
	if an.GetEnvelope().GetSource() != bus.ServiceAnomaly || an.GetMetadata()["reason"] != v1alpha1.ReasonRetriesExhausted {
		t.Errorf("Stalled anomaly (want the anomaly service's, from the RetriesExhausted Failed): %v", an)
	}
	if _, err := os.Stat(path); err == nil {
		t.Errorf("%s exists although every create failed", path)
	}
	if len(notBefore) == 2 && !notBefore[1].After(notBefore[0]) {
		t.Errorf("retry not_before times do not grow: %v", notBefore)
	}
}
