package drift_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/engines"
	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/service/drift"
)

// world is real JetStream with Lava's topology and the embedded engine over the real state
// store, for applying terraform_data architectures that drift then scans.
type world struct {
	tb      testing.TB
	js      jetstream.JetStream
	engines map[string]engine.Engine
	art     *bus.Artifacts
}

func newWorld(tb testing.TB) *world {
	tb.Helper()
	return newWorldWith(tb, engines.Options{})
}

// newWorldWith is newWorld with the engines configured by o (Process is set to drift).
func newWorldWith(tb testing.TB, o engines.Options) *world {
	tb.Helper()
	srv := natstest.RunJetStream(tb)
	js := srv.JetStream()
	if err := bus.EnsureTopology(tb.Context(), js, bus.TopologyOptions{}); err != nil {
		tb.Fatal(err)
	}
	o.Process = "drift"
	set, err := engines.Open(tb.Context(), js, o, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(set.Close)
	art, err := bus.NewArtifacts(tb.Context(), js)
	if err != nil {
		tb.Fatal(err)
	}
	return &world{tb: tb, js: js, engines: set.Engines, art: art}
}

// dataDoc renders n terraform_data resources.
func dataDoc(n int) []byte {
	res := map[string]any{}
	for i := range n {
		res[fmt.Sprintf("d%d", i)] = map[string]any{"input": fmt.Sprintf("value %d", i)}
	}
	b, _ := json.Marshal(map[string]any{"resource": map[string]any{"terraform_data": res}})
	return b
}

// apply stores doc, plans and applies it for ns/name with the embedded engine, and returns
// the Applied event the applier would publish.
func (w *world) apply(ns, name string, doc []byte) *lavav1.Applied {
	w.tb.Helper()
	digest, err := w.art.Put(w.tb.Context(), bytes.NewReader(doc))
	if err != nil {
		w.tb.Fatal(err)
	}
	eng := w.engines[string(v1alpha1.EngineEmbedded)]
	rec, err := eng.Plan(w.tb.Context(), engine.PlanRequest{Target: engine.Target{Key: state.Key{Namespace: ns, Name: name},
		RenderedDigest: digest, Holder: "test"}})
	if err != nil {
		w.tb.Fatal(err)
	}
	res, err := eng.Apply(w.tb.Context(), engine.ApplyRequest{Plan: rec, Holder: "test"})
	if err != nil {
		w.tb.Fatal(err)
	}
	uid := "uid-" + name
	return &lavav1.Applied{Envelope: envelope(ns, name, uid, 1, "lava.v1.Applied", "cause:plan-"+name), PlanId: rec.PlanID,
		StateSerial: int64(res.StateSerial), StateLineage: res.StateLineage, Engine: lavav1.Engine_ENGINE_EMBEDDED,
		TerraformJsonDigest: "tf-" + digest[:8], ArtifactDigest: digest}
}

func envelope(ns, name, uid string, gen int64, typ, trigger string) *lavav1.Envelope {
	id := eventid.ID(uid, gen, typ, trigger)
	return &lavav1.Envelope{EventId: id, OccurredAt: timestamppb.Now(), Source: "test",
		Resource: &lavav1.ResourceRef{Namespace: ns, Name: name, Uid: uid}, Generation: gen, CorrelationId: id, Trigger: trigger}
}

func handle(tb testing.TB, s *drift.Service, ev bus.Event) {
	tb.Helper()
	if err := s.Handle(tb.Context(), &bus.Message{Event: ev, Envelope: ev.GetEnvelope(), Schema: string(ev.ProtoReflect().Descriptor().FullName())}); err != nil {
		tb.Fatal(err)
	}
}

func observed(ns, name string, interval time.Duration) *lavav1.ResourceObserved {
	return &lavav1.ResourceObserved{Envelope: envelope(ns, name, "uid-"+name, 1, "lava.v1.ResourceObserved", "generation:1"),
		Spec: &lavav1.ArchitectureSpec{DriftInterval: durationpb.New(interval)}}
}

// run runs s until the test ends or stop is called.
func run(tb testing.TB, s *drift.Service) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(tb.Context()))
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("drift: %v", err)
			}
		})
	}
	tb.Cleanup(stop)
	return stop
}

// scans returns the DriftScanned events stored for ns/name.
func (w *world) scans(ns, name string) []*lavav1.DriftScanned {
	w.tb.Helper()
	st, err := w.js.Stream(w.tb.Context(), bus.StreamPhases)
	if err != nil {
		w.tb.Fatal(err)
	}
	subject := bus.PhaseSubject(ns, name, bus.EventDriftScanned)
	info, err := st.Info(w.tb.Context(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		w.tb.Fatal(err)
	}
	var out []*lavav1.DriftScanned
	count := info.State.Subjects[subject]
	if count == 0 {
		return nil
	}
	cons, err := st.OrderedConsumer(w.tb.Context(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		w.tb.Fatal(err)
	}
	for range count {
		m, err := cons.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			w.tb.Fatal(err)
		}
		ev := &lavav1.DriftScanned{}
		if err := proto.Unmarshal(m.Data(), ev); err != nil {
			w.tb.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

func (w *world) entry(ns, name string) *drift.Entry {
	w.tb.Helper()
	kv, err := w.js.KeyValue(w.tb.Context(), bus.BucketDriftSchedule)
	if err != nil {
		w.tb.Fatal(err)
	}
	kve, err := kv.Get(w.tb.Context(), bus.ResourceKey(ns, name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		w.tb.Fatal(err)
	}
	e := &drift.Entry{}
	if err := json.Unmarshal(kve.Value(), e); err != nil {
		w.tb.Fatal(err)
	}
	return e
}

func waitFor(tb testing.TB, d time.Duration, what string, ok func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestService_scheduleSurvivesRestartAndDestroyUnschedules(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	cfg := drift.Config{JS: w.js, Engines: w.engines, Holder: "r1", MinInterval: 10 * time.Millisecond, Tick: 20 * time.Millisecond}
	s1, err := drift.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	handle(t, s1, observed("ns", "web", 300*time.Millisecond))
	applied := w.apply("ns", "web", dataDoc(3))
	before := time.Now()
	handle(t, s1, applied)
	e := w.entry("ns", "web")
	if e == nil || e.Engine != string(v1alpha1.EngineEmbedded) || e.PlanID != applied.GetPlanId() || e.Interval != 300*time.Millisecond {
		t.Fatalf("entry after Applied: %+v", e)
	}
	if d := e.Due.Sub(before); d < 250*time.Millisecond || d > 400*time.Millisecond {
		t.Errorf("first scan due in %v, want the interval ±10%%", d)
	}
	stop := run(t, s1)
	waitFor(t, 10*time.Second, "a first scan", func() bool { return len(w.scans("ns", "web")) >= 1 })
	first := w.scans("ns", "web")[0]
	if len(first.GetFindings()) != 0 || first.GetMaxSeverity() != lavav1.Severity_SEVERITY_UNSPECIFIED || first.GetPlanId() != applied.GetPlanId() ||
		first.GetEnvelope().GetGeneration() != 1 || first.GetEngine() != lavav1.Engine_ENGINE_EMBEDDED {
		t.Fatalf("first scan: %v", first)
	}
	if at := first.GetScannedAt().AsTime(); at.Sub(before) < 250*time.Millisecond {
		t.Errorf("scanned %v after Applied, before its interval", at.Sub(before))
	}
	stop()
	n := len(w.scans("ns", "web"))
	// A new replica (a restart) finds the schedule in the bucket and keeps scanning.
	cfg.Holder = "r2"
	s2, err := drift.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	run(t, s2)
	waitFor(t, 10*time.Second, "a scan after the restart", func() bool { return len(w.scans("ns", "web")) > n })
	handle(t, s2, &lavav1.Destroyed{Envelope: envelope("ns", "web", "uid-web", 1, "lava.v1.Destroyed", "cause:del")})
	if e := w.entry("ns", "web"); e != nil {
		t.Fatalf("entry after Destroyed: %+v", e)
	}
}

// overlapEngine wraps a real engine and records scans of one resource overlapping in time.
type overlapEngine struct {
	engine.Engine
	mu       sync.Mutex
	running  map[state.Key]string
	overlaps atomic.Int32
	by       map[string]int
}

func (o *overlapEngine) ScanDrift(ctx context.Context, req engine.DriftRequest) (*engine.DriftReport, error) {
	o.mu.Lock()
	if _, busy := o.running[req.Key]; busy {
		o.overlaps.Add(1)
	}
	o.running[req.Key] = req.Holder
	o.by[req.Holder]++
	o.mu.Unlock()
	time.Sleep(5 * time.Millisecond) // widen the window an overlap would need
	defer func() {
		o.mu.Lock()
		delete(o.running, req.Key)
		o.mu.Unlock()
	}()
	return o.Engine.ScanDrift(ctx, req)
}

func TestService_replicasNeverScanOneResourceAtOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	shared := &overlapEngine{Engine: w.engines[string(v1alpha1.EngineEmbedded)], running: map[state.Key]string{}, by: map[string]int{}}
	var svcs []*drift.Service
	for _, holder := range []string{"a", "b", "c"} {
		leases, err := bus.NewLeases(t.Context(), w.js, holder, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := drift.New(t.Context(), drift.Config{JS: w.js, Engines: map[string]engine.Engine{string(v1alpha1.EngineEmbedded): shared}, Holder: holder,
			MinInterval: time.Millisecond, Jitter: 0.5, Tick: 5 * time.Millisecond, Leases: leases, RetryDelay: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, s)
	}
	const n = 8
	for i := range n {
		name := fmt.Sprintf("r%d", i)
		handle(t, svcs[0], observed("ns", name, 20*time.Millisecond))
		handle(t, svcs[0], w.apply("ns", name, dataDoc(1)))
	}
	for _, s := range svcs {
		run(t, s)
	}
	waitFor(t, 30*time.Second, "10 scans of every resource", func() bool {
		for i := range n {
			if len(w.scans("ns", fmt.Sprintf("r%d", i))) < 10 {
				return false
			}
		}
		return true
	})
	if o := shared.overlaps.Load(); o != 0 {
		t.Fatalf("%d scans overlapped another scan of the same resource", o)
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if len(shared.by) < 2 {
		t.Errorf("scans by replica %v: want the work spread over replicas", shared.by)
	}
}

// TestService_suspendStopsScansAndResumePicksUp: the suspended generation the watcher
// publishes (spec.suspend true) stops scans of an applied resource; the resumed generation
// scans again once it is applied, from the same schedule entry.
func TestService_suspendStopsScansAndResumePicksUp(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	s, err := drift.New(t.Context(), drift.Config{JS: w.js, Engines: w.engines, Holder: "r1", MinInterval: 10 * time.Millisecond, Tick: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	observe := func(gen int64, suspend bool) {
		handle(t, s, &lavav1.ResourceObserved{Envelope: envelope("ns", "held", "uid-held", gen, "lava.v1.ResourceObserved", eventid.GenerationTrigger(gen)),
			Spec: &lavav1.ArchitectureSpec{DriftInterval: durationpb.New(50 * time.Millisecond), Suspend: suspend}})
	}
	observe(1, false)
	applied := w.apply("ns", "held", dataDoc(1))
	handle(t, s, applied)
	run(t, s)
	waitFor(t, 10*time.Second, "a first scan", func() bool { return len(w.scans("ns", "held")) >= 1 })

	observe(2, true)
	if e := w.entry("ns", "held"); e == nil || !e.Suspended || e.Scannable() {
		t.Fatalf("entry after the suspended generation: %+v", e)
	}
	// A scan already running when the suspension arrived may still finish; then none.
	time.Sleep(200 * time.Millisecond)
	n := len(w.scans("ns", "held"))
	time.Sleep(500 * time.Millisecond)
	if got := len(w.scans("ns", "held")); got != n {
		t.Fatalf("%d scans while suspended (10 intervals)", got-n)
	}

	observe(3, false)
	resumed := w.apply("ns", "held", dataDoc(1))
	resumed.Envelope = envelope("ns", "held", "uid-held", 3, "lava.v1.Applied", "cause:plan-3")
	handle(t, s, resumed)
	waitFor(t, 10*time.Second, "a scan of the resumed generation", func() bool {
		sc := w.scans("ns", "held")
		return len(sc) > n && sc[len(sc)-1].GetEnvelope().GetGeneration() == 3
	})
}

// holdEngine wraps a real engine: scans of namespace hold wait until release is closed (a
// tenant's provider read that never answers), and the most of them running at once is kept.
type holdEngine struct {
	engine.Engine
	hold    string
	release chan struct{}
	mu      sync.Mutex
	running int
	most    int
}

func (h *holdEngine) ScanDrift(ctx context.Context, req engine.DriftRequest) (*engine.DriftReport, error) {
	if req.Key.Namespace != h.hold {
		return h.Engine.ScanDrift(ctx, req)
	}
	h.mu.Lock()
	h.running++
	h.most = max(h.most, h.running)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.running--
		h.mu.Unlock()
	}()
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return h.Engine.ScanDrift(ctx, req)
}

// TestService_namespaceShareAttack: four resources of one namespace whose scans never end
// hold at most that namespace's share of the four scan slots (two); another namespace's
// resources are still scanned at their interval meanwhile.
func TestService_namespaceShareAttack(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	held := &holdEngine{Engine: w.engines[string(v1alpha1.EngineEmbedded)], hold: "attacker", release: make(chan struct{})}
	t.Cleanup(func() { close(held.release) })
	s, err := drift.New(t.Context(), drift.Config{JS: w.js, Engines: map[string]engine.Engine{string(v1alpha1.EngineEmbedded): held},
		Holder: "r1", Concurrency: 4, MinInterval: 10 * time.Millisecond, Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		name := fmt.Sprintf("slow-%d", i)
		handle(t, s, observed("attacker", name, 10*time.Millisecond))
		handle(t, s, w.apply("attacker", name, dataDoc(1)))
	}
	run(t, s)
	waitFor(t, 30*time.Second, "the attacker's scans to start", func() bool {
		held.mu.Lock()
		defer held.mu.Unlock()
		return held.running == 2
	})
	handle(t, s, observed("victim", "web", 10*time.Millisecond))
	handle(t, s, w.apply("victim", "web", dataDoc(1)))
	waitFor(t, 30*time.Second, "3 scans of the other namespace's resource", func() bool { return len(w.scans("victim", "web")) >= 3 })
	held.mu.Lock()
	defer held.mu.Unlock()
	if held.most != 2 {
		t.Fatalf("the attacker's namespace ran %d scans at once, want its share of 2", held.most)
	}
}
