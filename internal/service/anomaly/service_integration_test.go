//go:build integration

package anomaly_test

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/service/anomaly"
)

const (
	leaked   = "hunter2-leaked"
	hmacKey  = "webhook-signing-key"
	vpcUID   = "9d7c4c1e-0000-4a57-9c0e-7f0f6d0d2b11"
	dbUID    = "9d7c4c1e-1111-4a57-9c0e-7f0f6d0d2b11"
	testWait = 20 * time.Second
)

// clock is a settable test clock.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }

// webhook is a real HTTP receiver that verifies the signature of every request.
type webhook struct {
	mu     sync.Mutex
	bodies [][]byte
	bad    int
}

func (w *webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !hmac.Equal([]byte(r.Header.Get(anomaly.HeaderSignature)), []byte(anomaly.Sign([]byte(hmacKey), body))) ||
		r.Header.Get("Content-Type") != "application/json" {
		w.bad++
		http.Error(rw, "bad signature", http.StatusUnauthorized)
		return
	}
	w.bodies = append(w.bodies, body)
}

func (w *webhook) received() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([][]byte(nil), w.bodies...)
}

func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// consistently fails the test if f fails at any poll during d.
func consistently(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		select {
		case <-t.Context().Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

type harness struct {
	js     jetstream.JetStream
	nc     *nats.Conn
	pub    *bus.Publisher
	reg    *prometheus.Registry
	svc    *anomaly.Service
	clock  *clock
	hook   *webhook
	am     *alertmanager
	sub    *nats.Subscription
	routes *anomaly.Routing
}

func start(t *testing.T, replicas int) *harness {
	t.Helper()
	ns := natstest.RunJetStream(t)
	h := &harness{js: ns.JetStream(), nc: ns.Conn(), clock: &clock{}, hook: &webhook{}, am: runAlertmanager(t)}
	ctx := t.Context()
	if err := bus.EnsureTopology(ctx, h.js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	h.pub = bus.NewPublisher(h.js)
	var err error
	// A plain NATS subscription, as a user's `nats sub 'lava.anomaly.>'`.
	if h.sub, err = h.nc.SubscribeSync("lava.anomaly.>"); err != nil {
		t.Fatal(err)
	}
	hook := httptest.NewServer(h.hook)
	t.Cleanup(hook.Close)
	h.routes, err = anomaly.ParseRouting([]byte(fmt.Sprintf(`
window: 1m
stuckAfter: 90s
approvalAfter: 200s
cluster: test-cluster
sinks:
  - {name: ops, type: webhook, url: %q, secretFile: %q, maxAttempts: 3, timeout: 2s}
  - {name: am, type: alertmanager, url: %q, generatorURL: "http://lava.test/{namespace}/{name}"}
rules:
  - {name: infra, match: {labels: {team: infra}}, sinks: [ops, am]}
`, hook.URL, keyFile(t, hmacKey+"\n"), h.am.URL)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range replicas {
		js := h.js
		if i > 0 {
			_, js = ns.Connect(t)
		}
		reg := prometheus.NewRegistry()
		svc, err := anomaly.New(ctx, anomaly.Config{JS: js, Routing: h.routes, Registerer: reg, Now: h.clock.now, Concurrency: 4,
			ScanInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			h.svc, h.reg = svc, reg
		}
		runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan error, 1)
		go func() { done <- svc.Run(runCtx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	return h
}

func (h *harness) observed(t *testing.T, name, uid string, labels map[string]string) {
	t.Helper()
	ro := &lavav1.ResourceObserved{Labels: labels, Remediation: pipeline.DefaultRemediation()}
	ro.Envelope = &lavav1.Envelope{EventId: eventid.ID(uid, 1, "lava.v1.ResourceObserved", eventid.GenerationTrigger(1)),
		Source: "watcher", Resource: &lavav1.ResourceRef{Namespace: "infra", Name: name, Uid: uid}, Generation: 1}
	if _, err := h.pub.PublishEvent(t.Context(), ro); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) failed(t *testing.T, name, uid string, attempt int32) *lavav1.Failed {
	t.Helper()
	f := &lavav1.Failed{Stage: lavav1.Stage_STAGE_APPLY, Reason: "ApplyFailed", Retryable: true, Attempt: attempt,
		Message: fmt.Sprintf(`apply: invalid value "(redacted)" for master_password (attempt %d); provider echoed password=%s`, attempt, leaked)}
	f.Envelope = &lavav1.Envelope{EventId: eventid.ID(uid, 1, "lava.v1.Failed", fmt.Sprintf("cause:%s-%d", name, attempt)),
		Source: "applier", Resource: &lavav1.ResourceRef{Namespace: "infra", Name: name, Uid: uid}, Generation: 1, CorrelationId: "corr-1"}
	if _, err := h.pub.PublishEvent(t.Context(), f); err != nil {
		t.Fatal(err)
	}
	return f
}

// next decodes the next message of the plain subscription as a user would.
func (h *harness) next(t *testing.T) (*nats.Msg, *lavav1.AnomalyDetected) {
	t.Helper()
	m, err := h.sub.NextMsg(testWait)
	if err != nil {
		t.Fatalf("no anomaly on lava.anomaly.>: %v", err)
	}
	if m.Header.Get("Lava-Schema") != "lava.v1.AnomalyDetected" || m.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", m.Header)
	}
	a := &lavav1.AnomalyDetected{}
	if err := protojson.Unmarshal(m.Data, a); err != nil {
		t.Fatalf("protojson body %s: %v", m.Data, err)
	}
	return m, a
}

func (h *harness) quiet(t *testing.T) {
	t.Helper()
	if m, err := h.sub.NextMsg(700 * time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("unexpected anomaly on %s: %s (%v)", m.Subject, m.Data, err)
	}
}

func (h *harness) window(t *testing.T, fp string, count int64) *anomaly.Window {
	t.Helper()
	var w *anomaly.Window
	eventually(t, fmt.Sprintf("window %s reaches count %d", fp, count), func() error {
		var err error
		if w, err = h.svc.Windows().Get(t.Context(), fp); err != nil {
			return err
		}
		if w == nil || w.Count != count {
			return fmt.Errorf("window %+v", w)
		}
		return nil
	})
	return w
}

func TestService_oncePerWindowToEverySink(t *testing.T) {
	h := start(t, 1)
	h.observed(t, "vpc", vpcUID, map[string]string{"team": "infra"})
	h.failed(t, "vpc", vpcUID, 1)

	m, a := h.next(t)
	if m.Subject != "lava.anomaly.critical.apply_failure" {
		t.Errorf("subject %s", m.Subject)
	}
	if a.GetKind() != lavav1.AnomalyKind_ANOMALY_KIND_APPLY_FAILURE || a.GetSeverity() != lavav1.Severity_SEVERITY_CRITICAL ||
		a.GetSource().GetUid() != vpcUID || a.GetCluster() != "test-cluster" || a.GetCount() != 1 ||
		a.GetLabels()["team"] != "infra" || a.GetAction() != lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL ||
		a.GetEnvelope().GetSource() != "anomaly" || a.GetEnvelope().GetCorrelationId() != "corr-1" ||
		a.GetEnvelope().GetTrigger() != eventid.AnomalyTrigger(a.GetFingerprint(), 1) {
		t.Errorf("anomaly %v", a)
	}
	fp := a.GetFingerprint()

	// A repeat in the window raises the count, and nothing is published or routed again.
	h.failed(t, "vpc", vpcUID, 2)
	w := h.window(t, fp, 2)
	if !w.LastSeen.After(w.FirstSeen) && !w.LastSeen.Equal(w.FirstSeen) {
		t.Errorf("window %+v", w)
	}
	h.quiet(t)

	// The webhook got it once, signed.
	eventually(t, "webhook delivery", func() error {
		if n := len(h.hook.received()); n != 1 {
			return fmt.Errorf("%d deliveries", n)
		}
		return nil
	})
	hooked := &lavav1.AnomalyDetected{}
	if err := protojson.Unmarshal(h.hook.received()[0], hooked); err != nil || hooked.GetFingerprint() != fp {
		t.Errorf("webhook body %v, %v", hooked, err)
	}

	// Alertmanager holds the alert.
	var alert gettableAlert
	eventually(t, "alert in Alertmanager", func() error {
		alerts, err := h.am.alerts(t)
		if err != nil {
			return err
		}
		for _, al := range alerts {
			if al.Labels["alertname"] == "LavaApplyFailure" {
				alert = al
				return nil
			}
		}
		return fmt.Errorf("alerts %v", alerts)
	})
	want := map[string]string{"alertname": "LavaApplyFailure", "severity": "critical", "kind": "apply_failure",
		"namespace": "infra", "name": "vpc", "resource": "infra/vpc", "team": "infra", "cluster": "test-cluster"}
	for k, v := range want {
		if alert.Labels[k] != v {
			t.Errorf("alert label %s = %q, want %q (%v)", k, alert.Labels[k], v, alert.Labels)
		}
	}
	// Alertmanager routes it (team infra: the default route) and its webhook receiver gets
	// the notification with the same labels.
	var note amDelivery
	eventually(t, "Alertmanager's webhook notification", func() error {
		for _, d := range h.am.delivered() {
			if d.Receiver == "default" && len(d.Payload.Alerts) > 0 && d.Payload.Alerts[0].Labels["alertname"] == "LavaApplyFailure" {
				note = d
				return nil
			}
		}
		return fmt.Errorf("deliveries %v", h.am.delivered())
	})
	if note.Payload.Version != "4" || note.Payload.Status != "firing" || note.Payload.Receiver != "default" {
		t.Errorf("notification %s", note.Body)
	}
	for k, v := range want {
		if note.Payload.Alerts[0].Labels[k] != v {
			t.Errorf("notified label %s = %q, want %q (%s)", k, note.Payload.Alerts[0].Labels[k], v, note.Body)
		}
	}
	if alert.Status.State != "active" || alert.GeneratorURL != "http://lava.test/infra/vpc" || alert.Annotations["fingerprint"] != fp ||
		!strings.Contains(alert.Annotations["description"], "ApplyFailed") {
		t.Errorf("alert %+v", alert)
	}

	// No secret in any payload; the publisher's redaction survives.
	amJSON := fmt.Sprint(alert)
	for name, payload := range map[string]string{"bus": string(m.Data), "webhook": string(h.hook.received()[0]), "alertmanager": amJSON,
		"alertmanager's webhook": string(note.Body)} {
		if strings.Contains(payload, leaked) {
			t.Errorf("%s payload carries the secret: %s", name, payload)
		}
	}
	if !strings.Contains(string(m.Data), `(redacted)`) {
		t.Errorf("bus payload lost the redaction marker: %s", m.Data)
	}

	// After the window a new sighting is a new alert: count 1, a new event id.
	h.clock.advance(2 * time.Minute)
	h.failed(t, "vpc", vpcUID, 3)
	_, again := h.next(t)
	if again.GetFingerprint() != fp || again.GetCount() != 1 || again.GetEnvelope().GetEventId() == a.GetEnvelope().GetEventId() ||
		again.GetEnvelope().GetTrigger() != eventid.AnomalyTrigger(fp, 2) {
		t.Errorf("second window %v", again)
	}
	eventually(t, "second webhook delivery", func() error {
		if n := len(h.hook.received()); n != 2 {
			return fmt.Errorf("%d deliveries", n)
		}
		return nil
	})
	if h.hook.bad != 0 {
		t.Errorf("%d badly signed webhook requests", h.hook.bad)
	}

	// An anomaly another service published (viggy's stall) reaches the webhook; the service's
	// own anomalies coming back on LAVA_ANOMALIES are skipped.
	stall := &lavav1.AnomalyDetected{Kind: lavav1.AnomalyKind_ANOMALY_KIND_STALLED, Severity: lavav1.Severity_SEVERITY_CRITICAL,
		Source: &lavav1.ResourceRef{Namespace: "infra", Name: "vpc", Uid: vpcUID}, Message: "gave up after 5 attempts",
		Fingerprint: anomaly.Fingerprint(lavav1.AnomalyKind_ANOMALY_KIND_STALLED, "", vpcUID, lavav1.Severity_SEVERITY_CRITICAL, ""),
		Count:       1, Labels: map[string]string{"team": "infra"}}
	stall.Envelope = &lavav1.Envelope{EventId: "viggy-stall-1", Source: "viggy", Resource: stall.Source, Generation: 1}
	if _, err := h.pub.PublishEvent(t.Context(), stall); err != nil {
		t.Fatal(err)
	}
	if m, got := h.next(t); m.Subject != "lava.anomaly.critical.stalled" || got.GetEnvelope().GetSource() != "viggy" {
		t.Errorf("stall on %s from %s", m.Subject, got.GetEnvelope().GetSource())
	}
	eventually(t, "foreign anomaly at the webhook", func() error {
		got := h.hook.received()
		if len(got) != 3 || !strings.Contains(string(got[2]), "gave up") {
			return fmt.Errorf("%d deliveries", len(got))
		}
		return nil
	})
	h.quiet(t)
	eventually(t, "own anomalies skipped", func() error {
		if n := testutil.ToFloat64(counter(t, h.reg, "lava_anomaly_events_total", map[string]string{"event": "anomaly_detected", "result": "own"})); n != 2 {
			return fmt.Errorf("own = %v", n)
		}
		return nil
	})
	problems, err := testutil.GatherAndLint(h.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// An escalation tier (the anomaly viggy publishes for an Escalate policy, metadata
// escalation_tier and escalation_team) reaches Alertmanager with the labels tier and team,
// and Alertmanager's route on team delivers it to that team's receiver, not the default one.
func TestService_escalationTierRoutedByTeam(t *testing.T) {
	h := start(t, 1)
	h.observed(t, "vpc", vpcUID, map[string]string{"team": "infra"})
	esc := &lavav1.AnomalyDetected{Kind: lavav1.AnomalyKind_ANOMALY_KIND_DRIFT_DETECTED, Severity: lavav1.Severity_SEVERITY_CRITICAL,
		Source: &lavav1.ResourceRef{Namespace: "infra", Name: "vpc", Uid: vpcUID}, Message: "drift detected: 2 field(s)",
		Fingerprint: anomaly.Fingerprint(lavav1.AnomalyKind_ANOMALY_KIND_DRIFT_DETECTED, "", vpcUID, lavav1.Severity_SEVERITY_CRITICAL, "d1"),
		Count:       1, Labels: map[string]string{"team": "infra"},
		Metadata: map[string]string{"escalation_tier": "0", "escalation_team": "platform-oncall", "drifted_fields": "2"}}
	esc.Envelope = &lavav1.Envelope{EventId: "viggy-esc-0", Source: "viggy", Resource: esc.Source, Generation: 1}
	if _, err := h.pub.PublishEvent(t.Context(), esc); err != nil {
		t.Fatal(err)
	}
	var note amDelivery
	eventually(t, "the oncall receiver's notification", func() error {
		for _, d := range h.am.delivered() {
			if d.Receiver == "oncall" {
				note = d
				return nil
			}
		}
		return fmt.Errorf("deliveries %v", h.am.delivered())
	})
	got := note.Payload.Alerts[0].Labels
	for k, v := range map[string]string{"alertname": "LavaDriftDetected", "severity": "critical", "tier": "0", "team": "platform-oncall",
		"resource": "infra/vpc", "namespace": "infra"} {
		if got[k] != v {
			t.Errorf("label %s = %q, want %q (%s)", k, got[k], v, note.Body)
		}
	}
	if _, ok := got["drifted_fields"]; ok {
		t.Errorf("metadata leaked into the labels: %v", got)
	}
	for _, d := range h.am.delivered() {
		if d.Receiver == "default" {
			t.Errorf("the escalation also went to the default receiver: %s", d.Body)
		}
	}
}

// Two replicas racing over many sightings of one fingerprint agree: one alert, every sighting
// counted.
func TestService_replicasAgree(t *testing.T) {
	h := start(t, 2)
	h.observed(t, "db", dbUID, map[string]string{"team": "infra"})
	var f *lavav1.Failed
	for i := range int32(12) {
		f = h.failed(t, "db", dbUID, i+1)
	}
	_, a := h.next(t)
	want, _ := anomaly.FromFailed(f, "", time.Now())
	if a.GetFingerprint() != want.Fingerprint {
		t.Fatalf("fingerprint %s, want %s", a.GetFingerprint(), want.Fingerprint)
	}
	h.window(t, a.GetFingerprint(), 12)
	h.quiet(t)
	if n := len(h.hook.received()); n != 1 {
		t.Errorf("webhook got %d deliveries, want 1", n)
	}
}

// counter finds one series of a metric family in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) prometheus.Collector {
	t.Helper()
	return collectorFunc(func(ch chan<- prometheus.Metric) {
		mfs, err := reg.Gather()
		if err != nil {
			return
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
		next:
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
						continue next
					}
				}
				ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, "copy", nil, nil), prometheus.CounterValue, m.GetCounter().GetValue())
				return
			}
		}
	})
}

type collectorFunc func(chan<- prometheus.Metric)

func (f collectorFunc) Describe(chan<- *prometheus.Desc)    {}
func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }

// A resource that stays in a working phase past stuckAfter raises one Stalled anomaly; reaching
// a resting phase clears it.
func TestService_stuckResourceRaisesStalled(t *testing.T) {
	h := start(t, 1)
	const uid = "9d7c4c1e-2222-4a57-9c0e-7f0f6d0d2b11"
	h.observed(t, "api", uid, map[string]string{"team": "infra"})
	phase := func(n int, from, to lavav1.Phase, reason string) {
		t.Helper()
		pc := &lavav1.PhaseChanged{From: from, To: to, Reason: reason}
		pc.Envelope = &lavav1.Envelope{EventId: eventid.ID(uid, 1, "lava.v1.PhaseChanged", fmt.Sprintf("cause:pc-%d", n)), Source: "watcher",
			Resource: &lavav1.ResourceRef{Namespace: "infra", Name: "api", Uid: uid}, Generation: 1}
		if _, err := h.pub.PublishEvent(t.Context(), pc); err != nil {
			t.Fatal(err)
		}
	}
	kv, err := h.js.KeyValue(t.Context(), anomaly.BucketProgress)
	if err != nil {
		t.Fatal(err)
	}
	key := bus.ResourceKey("infra", "api")
	phase(1, lavav1.Phase_PHASE_PENDING, lavav1.Phase_PHASE_SYNTHESIZED, "SynthesisSucceeded")
	eventually(t, "progress tracked", func() error {
		_, err := kv.Get(t.Context(), key)
		return err
	})
	h.clock.advance(time.Minute)
	h.quiet(t)
	h.clock.advance(time.Minute)
	m, a := h.next(t)
	if m.Subject != "lava.anomaly.critical.stalled" || a.GetMetadata()["reason"] != anomaly.ReasonProgressDeadlineExceeded ||
		a.GetMetadata()["phase"] != "SYNTHESIZED" || a.GetSource().GetUid() != uid || !strings.Contains(a.GetMessage(), "no progress for 2m") {
		t.Errorf("stall %s: %v", m.Subject, a)
	}
	h.clock.advance(time.Minute)
	h.quiet(t)
	phase(2, lavav1.Phase_PHASE_SYNTHESIZED, lavav1.Phase_PHASE_APPLIED, "Applied")
	eventually(t, "progress cleared", func() error {
		if _, err := kv.Get(t.Context(), key); !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("entry still there: %v", err)
		}
		return nil
	})
}

// A plan held for approval is no stall (the progress deadline passes quietly) but raises one
// approval_overdue anomaly past approvalAfter; the approval clears it.
func TestService_approvalOverdue(t *testing.T) {
	h := start(t, 1)
	const uid = "9d7c4c1e-4444-4a57-9c0e-7f0f6d0d2b11"
	h.observed(t, "db", uid, map[string]string{"team": "infra"})
	phase := func(n int, from, to lavav1.Phase, reason string) {
		t.Helper()
		pc := &lavav1.PhaseChanged{From: from, To: to, Reason: reason}
		pc.Envelope = &lavav1.Envelope{EventId: eventid.ID(uid, 1, "lava.v1.PhaseChanged", fmt.Sprintf("cause:pc-%d", n)), Source: "watcher",
			Resource: &lavav1.ResourceRef{Namespace: "infra", Name: "db", Uid: uid}, Generation: 1}
		if _, err := h.pub.PublishEvent(t.Context(), pc); err != nil {
			t.Fatal(err)
		}
	}
	kv, err := h.js.KeyValue(t.Context(), anomaly.BucketProgress)
	if err != nil {
		t.Fatal(err)
	}
	key := bus.ResourceKey("infra", "db")
	phase(1, lavav1.Phase_PHASE_SYNTHESIZED, lavav1.Phase_PHASE_PLANNED, v1alpha1.ReasonApprovalRequired)
	eventually(t, "approval tracked", func() error {
		_, err := kv.Get(t.Context(), key)
		return err
	})
	h.clock.advance(2 * time.Minute) // past stuckAfter (90s), not approvalAfter (200s)
	h.quiet(t)
	h.clock.advance(2 * time.Minute)
	m, a := h.next(t)
	if m.Subject != "lava.anomaly.functional.approval_overdue" || a.GetExtensionKind() != anomaly.ExtensionApprovalOverdue ||
		a.GetSource().GetUid() != uid || !strings.Contains(a.GetMessage(), "lava plan show infra/db") {
		t.Errorf("approval overdue %s: %v", m.Subject, a)
	}
	h.clock.advance(2 * time.Minute)
	h.quiet(t) // once per held plan
	phase(2, lavav1.Phase_PHASE_PLANNED, lavav1.Phase_PHASE_APPLIED, "Applied")
	eventually(t, "approval cleared", func() error {
		if _, err := kv.Get(t.Context(), key); !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("entry still there: %v", err)
		}
		return nil
	})
}

// A DriftDetected published directly for a scan (as viggy did under Alert before it left that
// to this service; a mixed-version upgrade) and the one this service derives from the same
// DriftScanned share the fingerprint and the first window's event id: one alert in
// LAVA_ANOMALIES and at the webhook, whichever comes first. (A plain core-NATS subscriber can
// see both publishes: JetStream de-duplicates what it stores, not what it forwards.)
func TestService_viggyDriftAndScanAreOneAlert(t *testing.T) {
	h := start(t, 1)
	const uid = "9d7c4c1e-3333-4a57-9c0e-7f0f6d0d2b11"
	h.observed(t, "net", uid, map[string]string{"team": "infra"})
	scan := &lavav1.DriftScanned{MaxSeverity: lavav1.Severity_SEVERITY_FUNCTIONAL, TerraformJsonDigest: strings.Repeat("d", 64),
		Findings: []*lavav1.DriftFinding{{Address: "aws_vpc.main", Attribute: "cidr_block", Change: lavav1.ChangeKind_CHANGE_KIND_UPDATE,
			Severity: lavav1.Severity_SEVERITY_FUNCTIONAL}}}
	scan.Envelope = &lavav1.Envelope{EventId: eventid.ID(uid, 1, "lava.v1.DriftScanned", "drift:1"), Source: "drift",
		Resource: &lavav1.ResourceRef{Namespace: "infra", Name: "net", Uid: uid}, Generation: 1}
	fp := anomaly.Fingerprint(lavav1.AnomalyKind_ANOMALY_KIND_DRIFT_DETECTED, "", uid, lavav1.Severity_SEVERITY_FUNCTIONAL, scan.GetTerraformJsonDigest())
	trigger := eventid.AnomalyTrigger(fp, 1)
	viggy := &lavav1.AnomalyDetected{Kind: lavav1.AnomalyKind_ANOMALY_KIND_DRIFT_DETECTED, Severity: lavav1.Severity_SEVERITY_FUNCTIONAL,
		Source: scan.Envelope.Resource, Message: "drift detected: 1 field(s)", Fingerprint: fp, Count: 1, Labels: map[string]string{"team": "infra"},
		Envelope: &lavav1.Envelope{EventId: eventid.ID(uid, 1, "lava.v1.AnomalyDetected", trigger), Source: "viggy",
			Resource: scan.Envelope.Resource, Generation: 1, Trigger: trigger}}
	if _, err := h.pub.PublishEvent(t.Context(), scan); err != nil {
		t.Fatal(err)
	}
	if _, err := h.pub.PublishEvent(t.Context(), viggy); err != nil {
		t.Fatal(err)
	}
	m, a := h.next(t)
	if m.Subject != "lava.anomaly.functional.drift_detected" || a.GetFingerprint() != fp {
		t.Fatalf("%s: %v", m.Subject, a)
	}
	eventually(t, "webhook delivery", func() error {
		if n := len(h.hook.received()); n != 1 {
			return fmt.Errorf("%d deliveries", n)
		}
		return nil
	})
	eventually(t, "both sightings handled", func() error {
		if n := testutil.ToFloat64(counter(t, h.reg, "lava_anomaly_events_total", map[string]string{"event": "drift_scanned", "result": "anomaly"})); n != 1 {
			return fmt.Errorf("drift_scanned anomalies = %v", n)
		}
		return nil
	})
	consistently(t, 700*time.Millisecond, "one webhook delivery", func() error {
		if n := len(h.hook.received()); n != 1 {
			return fmt.Errorf("%d deliveries", n)
		}
		return nil
	})
	st, err := h.js.Stream(t.Context(), bus.StreamAnomalies)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(m.Subject))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[m.Subject]; n != 1 {
		t.Errorf("LAVA_ANOMALIES holds %d messages on %s, want 1", n, m.Subject)
	}
	if n := len(h.hook.received()); n != 1 {
		t.Errorf("webhook got %d deliveries, want 1", n)
	}
}

// The windows live in JetStream KV: a service started after another one stopped (a restart)
// counts a repeat in the open window instead of alerting again.
func TestService_restartKeepsWindows(t *testing.T) {
	ns := natstest.RunJetStream(t)
	js := ns.JetStream()
	ctx := t.Context()
	if err := bus.EnsureTopology(ctx, js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	sub, err := ns.Conn().SubscribeSync("lava.anomaly.>")
	if err != nil {
		t.Fatal(err)
	}
	f := &lavav1.Failed{Envelope: env("infra", "vpc"), Stage: lavav1.Stage_STAGE_SYNTH, Reason: "GateRejected", Message: "cidr: not a CIDR"}
	a, _ := anomaly.FromFailed(f, "", time.Now())
	for i, id := range []string{"first", "after-restart"} {
		svc, err := anomaly.New(ctx, anomaly.Config{JS: js})
		if err != nil {
			t.Fatal(err)
		}
		cause := &lavav1.Envelope{EventId: id, Resource: f.GetEnvelope().GetResource(), Generation: 3}
		if err := svc.Process(ctx, a, cause, nil); err != nil {
			t.Fatal(err)
		}
		w, err := svc.Windows().Get(ctx, a.Fingerprint)
		if err != nil || w == nil || w.Count != int64(i+1) || w.OpenedBy != "first" {
			t.Fatalf("after %s: window %+v, %v", id, w, err)
		}
	}
	if m, err := sub.NextMsg(testWait); err != nil || m.Subject != "lava.anomaly.functional.gate_rejected" {
		t.Fatalf("first alert: %v, %v", m, err)
	}
	if m, err := sub.NextMsg(700 * time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("alert after the restart: %v", m)
	}
}

// The buckets and consumers come from bus.EnsureTopology: without it New fails and names it,
// and creates nothing.
func TestNew_needsTheTopology(t *testing.T) {
	t.Parallel()
	ns := natstest.RunJetStream(t)
	js := ns.JetStream()
	ctx := t.Context()
	_, err := anomaly.New(ctx, anomaly.Config{JS: js})
	if err == nil || !strings.Contains(err.Error(), "bus.EnsureTopology") {
		t.Fatalf("New without the topology: %v, want an error naming bus.EnsureTopology", err)
	}
	if _, err := js.KeyValue(ctx, anomaly.BucketWindows); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("New created %s: %v", anomaly.BucketWindows, err)
	}
	if err := bus.EnsureTopology(ctx, js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := anomaly.New(ctx, anomaly.Config{JS: js}); err != nil {
		t.Fatalf("New after EnsureTopology: %v", err)
	}
}

// Poison-message reports are published directly (pipeline.PoisonReporter), so the service routes
// them to its other sinks like viggy's escalations, its own included.
func TestService_routesPoisonReports(t *testing.T) {
	h := start(t, 1)
	const uid = "5b0c8f0e-4444-4a57-9c0e-7f0f6d0d2b11"
	h.observed(t, "junk", uid, map[string]string{"team": "infra"})
	env := &lavav1.Envelope{EventId: "poisoned", Resource: &lavav1.ResourceRef{Namespace: "infra", Name: "junk", Uid: uid}, Generation: 1}
	for i, svc := range []string{bus.ServiceAttest, bus.ServiceAnomaly} {
		an := pipeline.PoisonAnomaly(svc, bus.PoisonReport{Stream: bus.StreamPhases, Consumer: svc,
			Subject: bus.PhaseSubject("infra", "junk", bus.EventPhaseChanged), StreamSeq: uint64(10 + i), NumDelivered: 1,
			Reason: bus.PoisonPermanent, Err: errors.New("no resource"), Envelope: env}, time.Now())
		if _, err := h.pub.PublishEvent(t.Context(), an); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "two webhook deliveries", func() error {
		got := h.hook.received()
		if len(got) != 2 {
			return fmt.Errorf("%d deliveries", len(got))
		}
		for _, b := range got {
			if !strings.Contains(string(b), `"poison_message"`) {
				return fmt.Errorf("delivery is not a poison report: %s", b)
			}
		}
		return nil
	})
}
