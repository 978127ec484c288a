package attest_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/readmodel"
	"github.com/lava-operator/lava/internal/readmodel/receipttest"
	"github.com/lava-operator/lava/internal/service/attest"
)

// replica is one attest process of an order test: its own NATS connection, Store and Service.
type replica struct {
	nc  *nats.Conn
	svc *attest.Service
}

// newReplica starts a replica on its own connection. onNow, if set, is called on every read of
// the replica's clock (its Store's and its Service's): the order tests close the connection
// there to kill the replica at an exact point of an append.
func newReplica(t testing.TB, srv interface {
	Connect(testing.TB) (*nats.Conn, jetstream.JetStream)
}, signer *readmodel.Signer, onNow func()) *replica {
	t.Helper()
	nc, js := srv.Connect(t)
	now := time.Now
	if onNow != nil {
		now = func() time.Time { onNow(); return time.Now() }
	}
	store := attest.NewStore(js, attest.StoreOptions{Signer: signer, Now: now})
	return &replica{nc: nc, svc: attest.NewService(js, store, attest.ServiceOptions{Concurrency: 8, Now: now})}
}

// orderFixture is a backlog of phase events (PhaseChanged and TickReported, interleaved across
// resources) and one anomaly per resource, published before any replica runs, and read back
// from their streams as the messages a consumer delivers.
type orderFixture struct {
	want    map[string][]string       // per resource: the phase events' ids in stream order
	phases  map[string][]*bus.Message // per resource: its LAVA_PHASES messages, in stream order
	anomaly map[string]*bus.Message   // per resource: its LAVA_ANOMALIES message
	names   []string
}

// newOrderFixture publishes resources × transitions phase events (every fourth a
// TickReported) and one anomaly per resource under namespace ns.
func newOrderFixture(t testing.TB, js jetstream.JetStream, ns string, resources, transitions int) *orderFixture {
	t.Helper()
	f := &orderFixture{want: map[string][]string{}, phases: map[string][]*bus.Message{}, anomaly: map[string]*bus.Message{}}
	pub := bus.NewPublisher(js)
	id := 0
	nextID := func() string { id++; return fmt.Sprintf("%s-%060x", ns, id) }
	prev := map[string]lavav1.Phase{}
	for r := range resources {
		f.names = append(f.names, fmt.Sprintf("r%d", r))
	}
	for i := range transitions {
		for _, name := range f.names {
			var ev bus.Event
			if i%4 == 3 {
				tr := receipttest.Tick(ns, name, i, lavav1.Phase_PHASE_APPLIED, lavav1.RemediationAction_REMEDIATION_ACTION_UNSPECIFIED, "")
				tr.Envelope.EventId = nextID()
				ev = tr
			} else {
				to := receipttest.Lifecycle[i%len(receipttest.Lifecycle)]
				pc := receipttest.PhaseChanged(ns, name, prev[name], to, i)
				pc.Envelope.EventId = nextID()
				prev[name] = to
				ev = pc
			}
			f.want[name] = append(f.want[name], ev.GetEnvelope().GetEventId())
			if _, err := pub.PublishEvent(t.Context(), ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range f.names {
		an := receipttest.Anomaly(ns, name, 1)
		an.Envelope.EventId = nextID()
		if _, err := pub.PublishEvent(t.Context(), an); err != nil {
			t.Fatal(err)
		}
	}
	for _, stream := range []string{bus.StreamPhases, bus.StreamAnomalies} {
		st, err := js.Stream(t.Context(), stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
			raw, err := st.GetMsg(t.Context(), seq)
			if err != nil {
				t.Fatal(err)
			}
			m := &bus.Message{Subject: raw.Subject, Header: raw.Header, Data: raw.Data, Stream: stream,
				Consumer: bus.ServiceAttest, StreamSeq: raw.Sequence, NumDelivered: 1, Published: raw.Time}
			if err := bus.DecodeBody(nil, m); err != nil {
				t.Fatal(err)
			}
			res := m.Envelope.GetResource()
			if stream == bus.StreamAnomalies {
				res = m.Event.(*lavav1.AnomalyDetected).GetSource()
			}
			if res.GetNamespace() != ns {
				continue
			}
			if stream == bus.StreamAnomalies {
				f.anomaly[res.GetName()] = m
			} else {
				f.phases[res.GetName()] = append(f.phases[res.GetName()], m)
			}
		}
	}
	return f
}

// check asserts every chain of the fixture: the receipts of the phase events in stream order
// (the order of the resource's transitions), the anomaly once, nothing twice, no foreign
// message (a fork's losing receipt would be one) and a chain that verifies.
func (f *orderFixture) check(t *testing.T, js jetstream.JetStream, ns string, signer *readmodel.Signer) {
	t.Helper()
	for _, name := range f.names {
		chain, err := readmodel.ReadChain(t.Context(), js, ns, name, readmodel.VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		seen := map[string]bool{}
		anomalies := 0
		for _, rc := range chain.Receipts {
			id := receipttest.PayloadEventID(rc.GetPayload())
			if seen[id] {
				t.Errorf("%s/%s: event %s recorded twice", ns, name, id)
			}
			seen[id] = true
			if rc.GetKind() == readmodel.KindAnomaly {
				anomalies++
				continue
			}
			got = append(got, id)
		}
		if !slices.Equal(got, f.want[name]) {
			t.Errorf("%s/%s: receipts in the order\n%v\nwant the transitions' order\n%v", ns, name, got, f.want[name])
		}
		if anomalies != 1 {
			t.Errorf("%s/%s: %d anomaly receipts, want 1", ns, name, anomalies)
		}
		if len(chain.Foreign) != 0 {
			t.Errorf("%s/%s: %d foreign messages on the chain (a fork?): %v", ns, name, len(chain.Foreign), chain.Foreign)
		}
		if res := readmodel.Verify(chain.Receipts, readmodel.VerifyOptions{RequireSignatures: true, PublicKey: signer.PublicKey()}); !res.OK() {
			t.Errorf("%s/%s: chain does not verify: %v", ns, name, receipttest.Messages(res))
		}
	}
}

// TestService_phaseOrderAcrossReplicas: three attest replicas (the real Service and Store, each
// on its own connection to a real JetStream server) are handed a resource's events in the
// worst orders a shared consumer can produce. Every chain holds its phase events' receipts in
// stream order, each once, with no fork, and verifies:
//   - reverse: each resource's events handed one by one from the last to the first, each to
//     another replica, then every event redelivered to a third;
//   - concurrent: every event of every resource handed to all three replicas at once, in a
//     random order per replica (as redeliveries after lost acks);
//   - killed: a replica handed a resource's last event has its connection closed at its k-th
//     clock read (k = 1..12: before, between and after the catch-up's appends, and after the
//     last append before the ack); the resource's events are then redelivered to the two
//     others in reverse order.
//
// On code that appends each event after the head as it comes (no catch-up), reverse and killed
// fail on their first resource.
func TestService_phaseOrderAcrossReplicas(t *testing.T) {
	t.Parallel()
	signer := receipttest.Signer(t)
	const transitions = 9

	t.Run("reverse", func(t *testing.T) {
		t.Parallel()
		srv := startBus(t)
		f := newOrderFixture(t, srv.JetStream(), "reverse", 4, transitions)
		reps := []*replica{newReplica(t, srv, signer, nil), newReplica(t, srv, signer, nil), newReplica(t, srv, signer, nil)}
		for _, name := range f.names {
			msgs := f.phases[name]
			for i := len(msgs) - 1; i >= 0; i-- {
				if err := reps[i%3].svc.Handle(t.Context(), msgs[i]); err != nil {
					t.Fatalf("%s: handle %d: %v", name, i, err)
				}
			}
			if err := reps[1].svc.Handle(t.Context(), f.anomaly[name]); err != nil {
				t.Fatal(err)
			}
			for i, m := range msgs {
				if err := reps[(i+2)%3].svc.Handle(t.Context(), m); err != nil {
					t.Fatalf("%s: redeliver %d: %v", name, i, err)
				}
			}
		}
		f.check(t, srv.JetStream(), "reverse", signer)
	})

	t.Run("concurrent", func(t *testing.T) {
		t.Parallel()
		srv := startBus(t)
		f := newOrderFixture(t, srv.JetStream(), "concurrent", 6, transitions)
		reps := []*replica{newReplica(t, srv, signer, nil), newReplica(t, srv, signer, nil), newReplica(t, srv, signer, nil)}
		var all []*bus.Message
		for _, name := range f.names {
			all = append(all, f.phases[name]...)
			all = append(all, f.anomaly[name])
		}
		var wg sync.WaitGroup
		errs := make(chan error, 3*len(all))
		for r, rep := range reps {
			order := slices.Clone(all)
			rand.New(rand.NewPCG(uint64(r), 12)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			// Four handlers per replica, as its consumer's workers.
			for w := range 4 {
				wg.Go(func() {
					for i := w; i < len(order); i += 4 {
						if err := rep.svc.Handle(t.Context(), order[i]); err != nil {
							errs <- err
						}
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		f.check(t, srv.JetStream(), "concurrent", signer)
	})

	t.Run("killed", func(t *testing.T) {
		t.Parallel()
		srv := startBus(t)
		const kills = 12
		f := newOrderFixture(t, srv.JetStream(), "killed", kills, transitions)
		survivors := []*replica{newReplica(t, srv, signer, nil), newReplica(t, srv, signer, nil)}
		partial := 0 // kills that left a catch-up half done
		for k, name := range f.names {
			var reads atomic.Int32
			var victim *replica
			victim = newReplica(t, srv, signer, func() {
				if reads.Add(1) == int32(k+1) {
					victim.nc.Close()
				}
			})
			msgs := f.phases[name]
			err := victim.svc.Handle(t.Context(), msgs[len(msgs)-1])
			left := len(readChain(t, srv.JetStream(), "killed", name))
			t.Logf("%s: replica killed at clock read %d: %d of %d receipts appended, handle returned %v", name, k+1, left, len(msgs), err)
			if left > 0 && left < len(msgs) {
				partial++
			}
			// The consumer redelivers the victim's message and the earlier ones to the others.
			for i := len(msgs) - 1; i >= 0; i-- {
				if err := survivors[i%2].svc.Handle(t.Context(), msgs[i]); err != nil {
					t.Fatalf("%s: redeliver %d: %v", name, i, err)
				}
			}
			if err := survivors[0].svc.Handle(t.Context(), f.anomaly[name]); err != nil {
				t.Fatal(err)
			}
		}
		if partial == 0 {
			t.Error("no kill left a catch-up half done: the kill points miss the middle of an append")
		}
		f.check(t, srv.JetStream(), "killed", signer)
	})
}

// TestService_catchUpSkipsMismatchedEvents: a PhaseChanged published on one resource's subject
// whose payload names another resource (which the consume loop terminates as subject_mismatch)
// is never attested by a catch-up: neither chain holds it, and the real events are in order.
func TestService_catchUpSkipsMismatchedEvents(t *testing.T) {
	t.Parallel()
	srv := startBus(t)
	js := srv.JetStream()
	signer := receipttest.Signer(t)
	pub := bus.NewPublisher(js)
	first := receipttest.PhaseChanged("tenant", "a", lavav1.Phase_PHASE_UNSPECIFIED, lavav1.Phase_PHASE_PENDING, 1)
	forged := receipttest.PhaseChanged("tenant", "b", lavav1.Phase_PHASE_UNSPECIFIED, lavav1.Phase_PHASE_APPLIED, 2)
	last := receipttest.PhaseChanged("tenant", "a", lavav1.Phase_PHASE_PENDING, lavav1.Phase_PHASE_SYNTHESIZED, 3)
	var seqs []uint64
	for _, p := range []struct {
		subject string
		ev      bus.Event
	}{
		{bus.PhaseSubject("tenant", "a", bus.EventPhaseChanged), first},
		{bus.PhaseSubject("tenant", "a", bus.EventPhaseChanged), forged},
		{bus.PhaseSubject("tenant", "a", bus.EventPhaseChanged), last},
	} {
		ack, err := pub.Publish(t.Context(), p.subject, p.ev)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	rep := newReplica(t, srv, signer, nil)
	st, err := js.Stream(t.Context(), bus.StreamPhases)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetMsg(t.Context(), seqs[2])
	if err != nil {
		t.Fatal(err)
	}
	m := &bus.Message{Subject: raw.Subject, Header: raw.Header, Data: raw.Data, Stream: bus.StreamPhases,
		Consumer: bus.ServiceAttest, StreamSeq: raw.Sequence, NumDelivered: 1, Published: raw.Time}
	if err := bus.DecodeBody(nil, m); err != nil {
		t.Fatal(err)
	}
	if err := rep.svc.Handle(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rc := range readChain(t, js, "tenant", "a") {
		got = append(got, receipttest.PayloadEventID(rc.GetPayload()))
	}
	if want := []string{first.GetEnvelope().GetEventId(), last.GetEnvelope().GetEventId()}; !slices.Equal(got, want) {
		t.Fatalf("tenant/a: receipts %v, want %v (the forged event left out)", got, want)
	}
	if b := readChain(t, js, "tenant", "b"); len(b) != 0 {
		t.Fatalf("tenant/b: %d receipts from an event on another resource's subject", len(b))
	}
}

// TestService_phaseOrderThreeConsumers: three attest services run on the shared durable
// consumers (the real consume loop, eight handlers each) over a backlog of 20 resources' events;
// every chain is in the order of its resource's transitions.
func TestService_phaseOrderThreeConsumers(t *testing.T) {
	t.Parallel()
	srv := startBus(t)
	signer := receipttest.Signer(t)
	f := newOrderFixture(t, srv.JetStream(), "fleet", 20, 9)
	for range 3 {
		rep := newReplica(t, srv, signer, nil)
		run(t, rep.svc.Run)
	}
	for _, name := range f.names {
		eventually(t, 60*time.Second, name+" attested", func() bool {
			return len(readChain(t, srv.JetStream(), "fleet", name)) >= len(f.want[name])+1
		})
	}
	// Let late duplicates settle; none may add a receipt.
	time.Sleep(500 * time.Millisecond)
	f.check(t, srv.JetStream(), "fleet", signer)
}
