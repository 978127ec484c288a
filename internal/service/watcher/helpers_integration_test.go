//go:build integration

package watcher_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/service/watcher"
)

// leaseNamespace holds the leader election Leases of the test watchers.
const leaseNamespace = "lava-system"

// env is one API server and one NATS server shared by the subtests; every subtest uses its
// own namespace and its own watcher.
type env struct {
	kube *kubetest.Env
	nats *natstest.Server
	js   jetstream.JetStream
	pub  *bus.Publisher
}

func newEnv(t *testing.T) *env {
	t.Helper()
	kube := kubetest.Start(t)
	ns := natstest.RunJetStream(t)
	js := ns.JetStream()
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, kube.Client, leaseNamespace)
	// controller-runtime's process-wide logger (some of its packages log through it only).
	ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(testOutput(t), &slog.HandlerOptions{Level: slog.LevelError})))
	return &env{kube: kube, nats: ns, js: js, pub: bus.NewPublisher(js)}
}

func createNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// running is a started watcher.
type running struct {
	name    string
	reg     *prometheus.Registry
	stop    func()
	elected <-chan struct{}
}

// startWatcher starts a watcher on namespace ns with leader election, its own durable phase
// consumer (filtered to ns) and its own controller name (so the reconcile counter is its own).
func (e *env) startWatcher(t *testing.T, ns, name string, with ...func(*watcher.Config)) *running {
	t.Helper()
	r := e.startReplica(t, ns, name, with...)
	select {
	case <-r.elected:
	case <-time.After(60 * time.Second):
		t.Fatal("watcher not elected within 60s")
	}
	return r
}

// startReplica starts a watcher like startWatcher but does not wait for it to be elected
// (a second replica is a hot standby while the first one leads).
func (e *env) startReplica(t *testing.T, ns, name string, with ...func(*watcher.Config)) *running {
	t.Helper()
	spec, ok := bus.Declare(bus.TopologyOptions{}).Consumer(bus.StreamPhases, bus.ServiceWatcher)
	if !ok {
		t.Fatal("no watcher consumer in bus.Declare")
	}
	durable := "watcher-" + ns
	cfg := spec.Config
	cfg.Durable, cfg.Name = durable, durable
	cfg.FilterSubjects = []string{bus.PrefixPhase + bus.EscapeToken(ns) + ".>"}
	if _, err := e.js.CreateOrUpdateConsumer(t.Context(), bus.StreamPhases, cfg); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	log := slog.New(slog.NewTextHandler(testOutput(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Unique per process run: controller-runtime's counters are process-wide (-count=N).
	ctrlName := fmt.Sprintf("lava-%s-%s-%d", ns, name, time.Now().UnixNano())
	opts := watcher.Config{
		RESTConfig: e.kube.Config, Scheme: e.kube.Scheme, JetStream: e.js, Logger: log, Registry: reg,
		Namespaces: []string{ns}, ControllerName: ctrlName, PhaseConsumer: durable,
		LeaderElection: true, LeaderElectionID: "lava-watcher-" + ns, LeaderElectionNamespace: leaseNamespace,
		RetryPeriod: 200 * time.Millisecond,
	}
	for _, f := range with {
		f(&opts)
	}
	w, err := watcher.New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	eventually(t, 30*time.Second, func() error { return w.Ready(t.Context()) })
	var once sync.Once
	r := &running{name: ctrlName, reg: reg, elected: w.Elected()}
	r.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("watcher %s: %v", ctrlName, err)
			}
		})
	}
	t.Cleanup(r.stop)
	return r
}

// reconciles is controller_runtime_reconcile_total of the watcher's controller, every result.
func (r *running) reconciles(t *testing.T) float64 {
	t.Helper()
	return sumMetric(t, crmetrics.Registry, "controller_runtime_reconcile_total", map[string]string{"controller": r.name})
}

// metric sums the samples of a counter of the watcher's registry matching labels.
func (r *running) metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return sumMetric(t, r.reg, name, labels)
}

func sumMetric(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func matches(m *dto.Metric, labels map[string]string) bool {
	for k, v := range labels {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// eventually polls fn every 50ms until it returns nil, failing the test after timeout with
// fn's last error.
func eventually(t *testing.T, timeout time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// consistently checks fn every 50ms for d and fails at the first error.
func consistently(t *testing.T, d time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := fn(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// count is the number of messages stored on subject in stream.
func (e *env) count(t *testing.T, stream, subject string) int {
	t.Helper()
	s, err := e.js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return int(info.State.Subjects[subject])
}

func (e *env) observedCount(t *testing.T, ns, name string) int {
	return e.count(t, bus.StreamResources, bus.ResourceSubject(ns, name, bus.EventObserved))
}

func (e *env) phaseChangedCount(t *testing.T, ns, name string) int {
	return e.count(t, bus.StreamPhases, bus.PhaseSubject(ns, name, bus.EventPhaseChanged))
}

// waitCount waits until subject holds want messages.
func (e *env) waitCount(t *testing.T, stream, subject string, want int) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		if n := e.count(t, stream, subject); n != want {
			return fmt.Errorf("%s: %d messages, want %d", subject, n, want)
		}
		return nil
	})
}

// messages decodes every message stored on subject into new(T).
func messages[T proto.Message](t *testing.T, e *env, stream, subject string, newT func() T) []T {
	t.Helper()
	n := e.count(t, stream, subject)
	if n == 0 {
		return nil
	}
	c, err := e.js.OrderedConsumer(t.Context(), stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	for m := range batch.Messages() {
		v := newT()
		if err := proto.Unmarshal(m.Data(), v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if len(out) != n {
		t.Fatalf("%s: fetched %d of %d messages: %v", subject, len(out), n, batch.Error())
	}
	return out
}

func (e *env) observed(t *testing.T, ns, name string) []*lavav1.ResourceObserved {
	return messages(t, e, bus.StreamResources, bus.ResourceSubject(ns, name, bus.EventObserved),
		func() *lavav1.ResourceObserved { return &lavav1.ResourceObserved{} })
}

func (e *env) get(t *testing.T, ns, name string) *v1alpha1.LavaArchitecture {
	t.Helper()
	obj := &v1alpha1.LavaArchitecture{}
	if err := e.kube.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// waitStatus waits until the object's status satisfies check.
func (e *env) waitStatus(t *testing.T, ns, name string, check func(*v1alpha1.LavaArchitecture) error) *v1alpha1.LavaArchitecture {
	t.Helper()
	return e.waitStatusFor(t, 30*time.Second, ns, name, check)
}

// waitStatusFor is waitStatus with its own bound.
func (e *env) waitStatusFor(t *testing.T, d time.Duration, ns, name string, check func(*v1alpha1.LavaArchitecture) error) *v1alpha1.LavaArchitecture {
	t.Helper()
	var obj *v1alpha1.LavaArchitecture
	eventually(t, d, func() error {
		obj = &v1alpha1.LavaArchitecture{}
		if err := e.kube.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
			return err
		}
		return check(obj)
	})
	return obj
}

// phaseIs checks the phase and observedGeneration.
func phaseIs(p v1alpha1.Phase, gen int64) func(*v1alpha1.LavaArchitecture) error {
	return func(o *v1alpha1.LavaArchitecture) error {
		if o.Status.Phase != p || o.Status.ObservedGeneration != gen {
			return fmt.Errorf("phase %q observedGeneration %d, want %q %d (conditions %v)",
				o.Status.Phase, o.Status.ObservedGeneration, p, gen, o.Status.Conditions)
		}
		return nil
	}
}

// conditionIs checks one condition's status and reason ("" matches any reason).
func conditionIs(typ string, st metav1.ConditionStatus, reason string) func(*v1alpha1.LavaArchitecture) error {
	return func(o *v1alpha1.LavaArchitecture) error {
		c := meta.FindStatusCondition(o.Status.Conditions, typ)
		if c == nil {
			return fmt.Errorf("no condition %s in %v", typ, o.Status.Conditions)
		}
		if c.Status != st || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("condition %s = %s/%s (%q), want %s/%s", typ, c.Status, c.Reason, c.Message, st, reason)
		}
		return nil
	}
}

func all(checks ...func(*v1alpha1.LavaArchitecture) error) func(*v1alpha1.LavaArchitecture) error {
	return func(o *v1alpha1.LavaArchitecture) error {
		var errs []error
		for _, c := range checks {
			if err := c(o); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
}

// stage publishes pipeline events for one resource as synth and the applier would: each
// event's trigger is "cause:<id of the previous event>", its correlation the ResourceObserved.
type stage struct {
	e    *env
	ref  *lavav1.ResourceRef
	gen  int64
	corr string
	prev string
	// at is every event's occurred_at, so the same fact published twice is identical.
	at time.Time
	// held, if not nil, collects the events instead of publishing them.
	held *[]bus.Event
}

func (e *env) stageFor(obj *v1alpha1.LavaArchitecture, ro *lavav1.ResourceObserved) *stage {
	return &stage{e: e, ref: &lavav1.ResourceRef{Namespace: obj.Namespace, Name: obj.Name, Uid: string(obj.UID)},
		gen: ro.GetEnvelope().GetGeneration(), corr: ro.GetEnvelope().GetEventId(), prev: ro.GetEnvelope().GetEventId(),
		at: time.Now().Truncate(time.Second)}
}

// publish fills ev's envelope and publishes it; it returns the event id.
func (s *stage) publish(t *testing.T, source string, ev bus.Event, setEnv func(*lavav1.Envelope)) string {
	t.Helper()
	trigger := eventid.CauseTrigger(s.prev)
	env := &lavav1.Envelope{
		EventId:    eventid.ID(s.ref.GetUid(), s.gen, eventid.Type(ev), trigger),
		OccurredAt: timestamppb.New(s.at), Source: source, Resource: s.ref, Generation: s.gen,
		CorrelationId: s.corr, Trigger: trigger,
	}
	setEnv(env)
	s.prev = env.EventId
	if s.held != nil {
		*s.held = append(*s.held, ev)
		return env.EventId
	}
	if _, err := s.e.pub.PublishEvent(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	return env.EventId
}

func (s *stage) synthesized(t *testing.T) string {
	ev := &lavav1.Synthesized{
		Render: &lavav1.RenderRecord{SourceKind: lavav1.SourceKind_SOURCE_KIND_INLINE, SourceDigest: strings.Repeat("a", 64),
			BindingsDigest: strings.Repeat("b", 64), ArchitectureName: "demo-vpc", ResourceCount: 1,
			TerraformJsonDigest: strings.Repeat("c", 64), EvaluatorVersion: "lava-eval-go/test", ObservedGeneration: s.gen},
		Gate:           &lavav1.GateVerdict{Passed: true},
		ArtifactDigest: strings.Repeat("d", 64), Engine: lavav1.Engine_ENGINE_EMBEDDED, ApprovePlan: "auto",
	}
	return s.publish(t, bus.ServiceSynth, ev, func(e *lavav1.Envelope) { ev.Envelope = e })
}

func (s *stage) planned(t *testing.T) string {
	ev := &lavav1.Planned{PlanId: strings.Repeat("e", 64), Engine: lavav1.Engine_ENGINE_EMBEDDED,
		Summary: &lavav1.ChangeSummary{Add: 1}, TerraformJsonDigest: strings.Repeat("c", 64)}
	return s.publish(t, bus.ServiceApplier, ev, func(e *lavav1.Envelope) { ev.Envelope = e })
}

func (s *stage) applied(t *testing.T) string {
	ev := &lavav1.Applied{PlanId: strings.Repeat("e", 64), Outputs: map[string]string{"vpc_id": `"vpc-1"`},
		StateSerial: 1, StateLineage: "lineage", Summary: &lavav1.ChangeSummary{Add: 1}, Engine: lavav1.Engine_ENGINE_EMBEDDED}
	return s.publish(t, bus.ServiceApplier, ev, func(e *lavav1.Envelope) { ev.Envelope = e })
}

func (s *stage) drifted(t *testing.T) string {
	ev := &lavav1.TickReported{FinalPhase: lavav1.Phase_PHASE_DRIFTED, Decision: &lavav1.Decision{
		Action: lavav1.RemediationAction_REMEDIATION_ACTION_ALERT, Severity: lavav1.Severity_SEVERITY_COSMETIC, EscalationTier: -1}}
	return s.publish(t, bus.ServiceViggy, ev, func(e *lavav1.Envelope) { ev.Envelope = e })
}

func (s *stage) destroyed(t *testing.T) string {
	ev := &lavav1.Destroyed{DestroyedCount: 1}
	return s.publish(t, bus.ServiceApplier, ev, func(e *lavav1.Envelope) { ev.Envelope = e })
}

// eventReasons lists the reasons of the events.k8s.io Events about the object.
func (e *env) eventReasons(t *testing.T, ns, name string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := e.kube.Client.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		if ev.Regarding.Name == name {
			out = append(out, ev.Reason)
		}
	}
	slices.Sort(out)
	return out
}

// guardedWriter writes to a test's output until the test's cleanup runs, then discards:
// goroutines of a stopped manager may still log, and writing to a finished test's output
// panics.
type guardedWriter struct {
	mu     sync.Mutex
	t      *testing.T
	closed bool
}

func testOutput(t *testing.T) *guardedWriter {
	w := &guardedWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
	})
	return w
}

func (w *guardedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return len(p), nil
	}
	return w.t.Output().Write(p)
}
