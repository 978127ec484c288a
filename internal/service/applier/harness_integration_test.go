//go:build integration

package applier_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/timestamppb"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/engines"
	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/natsauth"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
	"github.com/lava-operator/lava/internal/readmodel"
	"github.com/lava-operator/lava/internal/service/applier"
	"github.com/lava-operator/lava/internal/service/synth"
)

// leaseTTL is the lava-leases TTL of the tests: short, so a dead applier's lease (and with it
// its state lock) expires quickly.
const leaseTTL = 3 * time.Second

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type captured struct {
	subject string
	data    []byte
	event   bus.Event
}

// harness: real JetStream with Lava's topology, a running synth service, appliers started on
// demand with the real tofu and embedded engines, and every message on "lava.>" captured. The
// server admits only the bus identities, each with its generated permissions, as the chart's
// NATS, `lava up` and the end-to-end harness do: the harness acts as the bootstrap identity
// (it publishes what the watcher would and reads everything), synth and every applier as their
// own, so a publish or read an identity may not make fails here as it does in a cluster (the
// state_regressed anomaly the applier could not publish: docs/design/0025).
type harness struct {
	t     testing.TB
	srv   *natstest.Server
	js    jetstream.JetStream
	pub   *bus.Publisher
	logs  *syncBuffer
	log   *slog.Logger
	tools tofutest.Tools
	// credDir holds the identities' nkey seeds (natsauth.GenerateDir).
	credDir string
	// bindingsKey is synth's bindings key; policy its tenant policy document.
	bindingsKey []byte
	policy      *policy.File

	mu   sync.Mutex
	msgs []captured
}

// newHarness starts the harness; kube, when given, is synth's read-only Kubernetes access.
func newHarness(t testing.TB, kube ...client.Reader) *harness {
	t.Helper()
	tools := tofutest.Tofu(t)
	credDir := filepath.Join(t.TempDir(), "nats-credentials")
	keys, err := natsauth.GenerateDir(credDir)
	if err != nil {
		t.Fatal(err)
	}
	users, err := natsauth.Users(bus.Declare(bus.TopologyOptions{}), keys)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := nats.NkeyOptionFromSeed(filepath.Join(credDir, natsauth.SeedFileName(bus.IdentityBootstrap)))
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Run(t, natstest.Config{Nkeys: users, Client: []nats.Option{admin,
		nats.CustomInboxPrefix(bus.InboxPrefix(bus.IdentityBootstrap))}})
	js := srv.JetStream()
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{LeaseTTL: leaseTTL, BackOff: []time.Duration{10 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	h := &harness{t: t, srv: srv, js: js, pub: bus.NewPublisher(js), logs: logs, tools: tools, credDir: credDir,
		log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	sub, err := srv.Conn().Subscribe("lava.>", func(m *nats.Msg) {
		c := captured{subject: m.Subject, data: append([]byte(nil), m.Data...)}
		if mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(m.Header.Get(bus.HeaderSchema))); err == nil {
			ev := mt.New().Interface()
			decode := proto.Unmarshal
			if strings.HasPrefix(m.Subject, bus.PrefixAnomaly) {
				decode = protojson.Unmarshal // anomalies are protojson, the alerting contract
			}
			if decode(m.Data, ev) == nil {
				c.event, _ = ev.(bus.Event)
			}
		}
		h.mu.Lock()
		h.msgs = append(h.msgs, c)
		h.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	key := []byte(rand.Text() + rand.Text())[:32]
	// The tenant policy with a higher resource limit than the built-in 500: the applier's tests
	// plan architectures of up to 1,600 resources (TestApplier_bigPlanEventBounded); file
	// writes under os.TempDir(), where the t.TempDir() of the tests and their subtests lie
	// (their local_file and testkit_file resources write there; the fileWriteRoots rule has its
	// own tests in internal/lang/policy and cmd/lava); every other rule stays the built-in one.
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, []byte("cluster: {maxResources: 2000, fileWriteRoots: ["+filepath.Clean(os.TempDir())+"]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.bindingsKey, h.policy = key, &policy.File{Path: policyFile}
	cfg := synth.Config{JS: h.jetStreamAs(bus.ServiceSynth), BindingsKey: key, Logger: h.log, Policy: h.policy}
	if len(kube) > 0 {
		cfg.Kube = kube[0]
	}
	svc, err := synth.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.run(t, "synth", svc.Run)
	return h
}

// jetStreamAs is a JetStream context acting as identity: a connection of its own through
// bus.Connect with the identity's seed, closed at the end of the test.
func (h *harness) jetStreamAs(identity string) jetstream.JetStream {
	h.t.Helper()
	nc, js, err := bus.Connect(bus.ConnectOptions{URL: h.srv.URL(), Name: "test-" + identity, Identity: identity,
		NKeyFile: filepath.Join(h.credDir, natsauth.SeedFileName(identity))})
	if err != nil {
		h.t.Fatalf("connect as %s: %v", identity, err)
	}
	h.t.Cleanup(nc.Close)
	return js
}

// run runs f until the test ends.
func (h *harness) run(t testing.TB, what string, f func(context.Context) error) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: %v", what, err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// applierOpts configures one applier replica.
type applierOpts struct {
	holder       string
	lockTTL      time.Duration
	drainTimeout time.Duration
	concurrency  int
	kube         client.Client
	identities   *identity.Clients
	credentials  *identity.Credentials
	observe      func(applier.Operation)
	// testkit gives the engines the extended test provider (tofutest.TestkitMirror) in place
	// of the tools' mirror.
	testkit bool
	// workDir is the engines' work directory (default: a new one); replicas sharing one are
	// on the same node.
	workDir string
	// policy is the tenant policy document (default: the built-in policy).
	policy *policy.File
	// cliMaxCPU is the tofu engine's CPU limit per CLI process in seconds (0: its default).
	cliMaxCPU int64
	// artifactQuota is each namespace's artifact quota in bytes (bus.ArtifactQuota; 0: none).
	artifactQuota int64
	// maxOrphaned is Config.MaxOrphanedStates (0: its default).
	maxOrphaned int
}

// replica is a running applier.
type replica struct {
	svc     *applier.Service
	store   *state.Store
	backend *engines.Backend
	reg     *prometheus.Registry
	stop    context.CancelFunc
}

func (h *harness) startApplier(o applierOpts) *replica {
	t := h.t
	t.Helper()
	if o.holder == "" {
		o.holder = "applier-" + rand.Text()[:6]
	}
	if o.lockTTL == 0 {
		o.lockTTL = time.Minute
	}
	mirror, cliConfig := h.tools.Mirror, h.tools.CLIConfig
	if o.testkit {
		mirror, cliConfig = tofutest.TestkitMirror(t, h.tools), ""
	}
	if o.workDir == "" {
		o.workDir = t.TempDir()
	}
	js := h.jetStreamAs(bus.ServiceApplier)
	set, err := applier.OpenEngines(t.Context(), js, engines.Options{
		ProviderDir: mirror, TofuBin: h.tools.Bin, CLIConfigFile: cliConfig, WorkDir: o.workDir,
		Timeouts:         engine.Timeouts{Init: time.Minute, Plan: 2 * time.Minute, Apply: 2 * time.Minute, Destroy: 2 * time.Minute},
		CLIMaxCPUSeconds: o.cliMaxCPU, ArtifactQuota: &bus.ArtifactQuota{Bytes: o.artifactQuota},
	}, o.lockTTL, h.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	reg := prometheus.NewRegistry()
	bm, err := bus.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := applier.New(t.Context(), applier.Config{JS: js, Store: set.Store, Engines: set.Engines, Holder: o.holder, Kube: o.kube, Identities: o.identities, Credentials: o.credentials,
		Logger: h.log.With("replica", o.holder), Registerer: reg, BusMetrics: bm, Concurrency: o.concurrency,
		DrainTimeout: o.drainTimeout, NakBackoff: bus.Backoff{Base: 200 * time.Millisecond, Max: 2 * time.Second}, Observe: o.observe,
		Policy: o.policy, MaxOrphanedStates: o.maxOrphaned})
	if err != nil {
		t.Fatal(err)
	}
	stop := h.run(t, "applier "+o.holder, svc.Run)
	return &replica{svc: svc, store: set.Store, backend: set.Backend, reg: reg, stop: stop}
}

func envelope(ns, name, uid string, gen int64, typ, trigger string) *lavav1.Envelope {
	id := eventid.ID(uid, gen, typ, trigger)
	return &lavav1.Envelope{EventId: id, OccurredAt: timestamppb.Now(), Source: "watcher",
		Resource: &lavav1.ResourceRef{Namespace: ns, Name: name, Uid: uid}, Generation: gen, CorrelationId: id, Trigger: trigger}
}

// observe publishes a ResourceObserved as the watcher does.
func (h *harness) observe(ns, name string, gen int64, spec *lavav1.ArchitectureSpec) {
	h.t.Helper()
	h.observeUID(ns, name, "uid-"+name, gen, spec)
}

// observeUID is observe for an object with the given uid.
func (h *harness) observeUID(ns, name, uid string, gen int64, spec *lavav1.ArchitectureSpec) {
	h.t.Helper()
	ev := &lavav1.ResourceObserved{
		Envelope: envelope(ns, name, uid, gen, "lava.v1.ResourceObserved", eventid.GenerationTrigger(gen)),
		Spec:     spec, Remediation: &lavav1.RemediationPolicy{}, Dependencies: &lavav1.DependencyState{Ready: true},
	}
	if _, err := h.pub.PublishEvent(h.t.Context(), ev); err != nil {
		h.t.Fatal(err)
	}
}

// deletion publishes a DeletionRequested as the watcher does.
func (h *harness) deletion(ns, name string, gen int64, policy lavav1.DeletionPolicy, eng lavav1.Engine) {
	h.t.Helper()
	ev := &lavav1.DeletionRequested{
		Envelope:       envelope(ns, name, "uid-"+name, gen, "lava.v1.DeletionRequested", eventid.GenerationTrigger(gen)),
		DeletionPolicy: policy, Engine: eng,
	}
	if _, err := h.pub.PublishEvent(h.t.Context(), ev); err != nil {
		h.t.Fatal(err)
	}
}

// events returns the captured events of type T about ns/name.
func events[T bus.Event](h *harness, ns, name string) []T {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []T
	for _, c := range h.msgs {
		if ev, ok := c.event.(T); ok {
			r := ev.GetEnvelope().GetResource()
			if r.GetNamespace() == ns && r.GetName() == name {
				out = append(out, ev)
			}
		}
	}
	return out
}

// await waits up to d for an event of type T about ns/name satisfying ok. A Failed of the
// resource that ok does not expect ends the wait early with its reason.
func await[T bus.Event](h *harness, ns, name string, d time.Duration, ok func(T) bool) T {
	h.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, ev := range events[T](h, ns, name) {
			if ok == nil || ok(ev) {
				return ev
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	var zero T
	h.t.Fatalf("no matching %T for %s/%s within %s; events:\n%s", zero, ns, name, d, h.describe(ns, name))
	return zero
}

func gen[T bus.Event](g int64) func(T) bool {
	return func(ev T) bool { return ev.GetEnvelope().GetGeneration() == g }
}

// describe lists the resource's events, for failure messages.
func (h *harness) describe(ns, name string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, c := range h.msgs {
		if c.event == nil || c.event.GetEnvelope().GetResource().GetName() != name || c.event.GetEnvelope().GetResource().GetNamespace() != ns {
			continue
		}
		b.WriteString(c.subject)
		if f, ok := c.event.(*lavav1.Failed); ok {
			b.WriteString(" " + f.GetReason() + ": " + f.GetMessage())
		}
		b.WriteString("\n")
	}
	return b.String()
}

// leaks returns where secret appears: captured message bytes or the logs.
func (h *harness) leaks(secret string) []string {
	var where []string
	h.mu.Lock()
	for _, c := range h.msgs {
		if bytes.Contains(c.data, []byte(secret)) {
			where = append(where, c.subject)
		}
	}
	h.mu.Unlock()
	if strings.Contains(h.logs.String(), secret) {
		where = append(where, "logs")
	}
	return where
}

// stateOf reads a resource's state record.
func (h *harness) stateOf(r *replica, ns, name string) state.Record {
	h.t.Helper()
	rec, err := r.store.Get(h.t.Context(), state.Key{Namespace: ns, Name: name})
	if err != nil {
		h.t.Fatalf("state of %s/%s: %v", ns, name, err)
	}
	return rec
}

// record returns the applier's record of ns/name once ok holds for it, reading it again for up
// to 30 s: a handler saves the record after it published its events, so a test that saw an
// event may read the record before it is saved. On timeout the test fails with the last read.
func (h *harness) record(ns, name string, ok func(*readmodel.Record) bool) *readmodel.Record {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec, err := readmodel.Load(h.t.Context(), h.js, ns, name)
		if err != nil {
			h.t.Fatal(err)
		}
		if ok(rec) {
			return rec
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the applier's record of %s/%s after 30s: %+v", ns, name, rec)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
