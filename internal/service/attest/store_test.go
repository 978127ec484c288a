package attest_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/readmodel"
	"github.com/lava-operator/lava/internal/readmodel/receipttest"
	"github.com/lava-operator/lava/internal/service/attest"
)

// startBus starts an in-process JetStream server with Lava's topology.
func startBus(t testing.TB) *natstest.Server {
	t.Helper()
	srv := natstest.RunJetStream(t)
	if err := bus.EnsureTopology(t.Context(), srv.JetStream(), bus.TopologyOptions{BackOff: []time.Duration{5 * time.Second}}); err != nil {
		t.Fatalf("EnsureTopology: %v", err)
	}
	return srv
}

// request is the append request of the n-th PhaseChanged of a resource.
func request(ns, name string, phase lavav1.Phase, n int) attest.AppendRequest {
	pc := receipttest.PhaseChanged(ns, name, lavav1.Phase_PHASE_UNSPECIFIED, phase, n)
	return attest.AppendRequest{
		Resource: pc.GetEnvelope().GetResource(), Generation: 1, EventID: pc.GetEnvelope().GetEventId(),
		Kind: readmodel.KindOutcome, Payload: readmodel.OutcomeFromPhaseChanged(pc),
	}
}

func readChain(t testing.TB, js jetstream.JetStream, ns, name string) []*lavav1.Receipt {
	t.Helper()
	chain, err := readmodel.ReadChain(t.Context(), js, ns, name, readmodel.VerifyOptions{})
	if err != nil {
		t.Fatalf("ReadChain %s/%s: %v", ns, name, err)
	}
	return chain.Receipts
}

// TestStore_lifecycle: a full lifecycle appended through the store reads back as a signed
// chain that verifies with the signer's key and signatures required; an unknown resource has an
// empty chain.
func TestStore_lifecycle(t *testing.T) {
	t.Parallel()
	srv := startBus(t)
	s := receipttest.Signer(t)
	store := attest.NewStore(srv.JetStream(), attest.StoreOptions{Signer: s})
	var appended []*lavav1.Receipt
	for i, phase := range receipttest.Lifecycle {
		a, err := store.Append(t.Context(), request("infra", "web.prod", phase, i))
		if err != nil {
			t.Fatalf("append %v: %v", phase, err)
		}
		if a.Duplicate || a.Receipt.GetSequence() != uint64(i) {
			t.Fatalf("append %v: duplicate %v sequence %d", phase, a.Duplicate, a.Receipt.GetSequence())
		}
		appended = append(appended, a.Receipt)
	}
	chain := readChain(t, srv.JetStream(), "infra", "web.prod")
	if len(chain) != len(receipttest.Lifecycle) {
		t.Fatalf("read %d receipts, want %d", len(chain), len(receipttest.Lifecycle))
	}
	for i := range chain {
		if !proto.Equal(chain[i], appended[i]) {
			t.Fatalf("receipt %d read back differs from the appended one", i)
		}
		if got := chain[i].GetPayload().GetOutcome().GetPhase(); got != receipttest.Lifecycle[i] {
			t.Fatalf("receipt %d phase %v, want %v", i, got, receipttest.Lifecycle[i])
		}
	}
	if res := readmodel.Verify(chain, readmodel.VerifyOptions{RequireSignatures: true, PublicKey: s.PublicKey()}); !res.OK() {
		t.Fatalf("receipttest.Lifecycle chain: %v", receipttest.Messages(res))
	}
	if c := readChain(t, srv.JetStream(), "infra", "other"); len(c) != 0 {
		t.Fatalf("unknown resource has %d receipts", len(c))
	}
	// Another resource's chain is independent: it starts at 0 from genesis.
	a, err := store.Append(t.Context(), request("infra", "web-prod", lavav1.Phase_PHASE_PENDING, 100))
	if err != nil || a.Receipt.GetSequence() != 0 || !bytes.Equal(a.Receipt.GetPrevHash(), readmodel.Genesis()) {
		t.Fatalf("second chain: %v %v", a, err)
	}
}

// TestStore_redelivery: recording the same event again appends nothing, whether the store
// remembers the tail, a new store (a restarted replica) walks back to it, or only JetStream's
// duplicate window (Nats-Msg-Id) knows it.
func TestStore_redelivery(t *testing.T) {
	t.Parallel()
	srv := startBus(t)
	js := srv.JetStream()
	store := attest.NewStore(js, attest.StoreOptions{})
	first, err := store.Append(t.Context(), request("ns", "r", lavav1.Phase_PHASE_PENDING, 0))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 4; i++ {
		if _, err := store.Append(t.Context(), request("ns", "r", lavav1.Phase_PHASE_SYNTHESIZED, i)); err != nil {
			t.Fatal(err)
		}
	}
	stores := map[string]*attest.Store{
		"same store":                store,
		"restarted replica":         attest.NewStore(js, attest.StoreOptions{}),
		"lookback 1 (msg id only)":  attest.NewStore(js, attest.StoreOptions{MaxLookback: 1}),
		"not before (bounded walk)": attest.NewStore(js, attest.StoreOptions{}),
		"far future bound, msg id":  attest.NewStore(js, attest.StoreOptions{}),
	}
	for name, st := range stores {
		req := request("ns", "r", lavav1.Phase_PHASE_PENDING, 0)
		switch name {
		case "not before (bounded walk)":
			req.NotBefore = time.Now().Add(-time.Hour)
		case "far future bound, msg id":
			req.NotBefore = time.Now().Add(time.Hour)
		}
		a, err := st.Append(t.Context(), req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !a.Duplicate || a.StreamSeq != first.StreamSeq || !proto.Equal(a.Receipt, first.Receipt) {
			t.Fatalf("%s: duplicate %v, stream seq %d (want %d)", name, a.Duplicate, a.StreamSeq, first.StreamSeq)
		}
	}
	chain := readChain(t, js, "ns", "r")
	if len(chain) != 4 {
		t.Fatalf("chain has %d receipts after redeliveries, want 4", len(chain))
	}
	if res := readmodel.Verify(chain, readmodel.VerifyOptions{}); !res.OK() {
		t.Fatal(receipttest.Messages(res))
	}
}

// TestStore_concurrentReplicas: two attest replicas (two stores on two connections) appending
// to the same resources at once produce one unforked chain per resource: sequences 0..N-1,
// valid links, every event exactly once.
func TestStore_concurrentReplicas(t *testing.T) {
	t.Parallel()
	srv := startBus(t)
	_, js2 := srv.Connect(t)
	reg := newRegistry(t)
	stores := []*attest.Store{
		attest.NewStore(srv.JetStream(), attest.StoreOptions{Signer: receipttest.Signer(t), Metrics: reg.metrics}),
		attest.NewStore(js2, attest.StoreOptions{Signer: receipttest.Signer(t), Metrics: reg.metrics}),
	}
	const resources, perResource, workers = 3, 60, 4
	var wg sync.WaitGroup
	errs := make(chan error, resources*perResource*2)
	for r := range resources {
		for w := range workers {
			wg.Go(func() {
				// Each worker of each replica appends every event of its share; both replicas
				// get every event (as after a redelivery to the other replica).
				for i := w; i < perResource; i += workers {
					for _, st := range []*attest.Store{stores[w%2], stores[(w+1)%2]} {
						if _, err := st.Append(t.Context(), request("load", fmt.Sprintf("res-%d", r), lavav1.Phase_PHASE_APPLIED, i)); err != nil {
							errs <- err
						}
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
	for r := range resources {
		chain := readChain(t, srv.JetStream(), "load", fmt.Sprintf("res-%d", r))
		if len(chain) != perResource {
			t.Fatalf("res-%d has %d receipts, want %d (one per event)", r, len(chain), perResource)
		}
		seen := map[string]bool{}
		for i, rc := range chain {
			id := receipttest.PayloadEventID(rc.GetPayload())
			if seen[id] {
				t.Fatalf("res-%d: event %s recorded twice (receipt %d)", r, id, i)
			}
			seen[id] = true
		}
		if res := readmodel.Verify(chain, readmodel.VerifyOptions{RequireSignatures: true, PublicKey: receipttest.Signer(t).PublicKey()}); !res.OK() {
			t.Fatalf("res-%d forked or broken: %v", r, receipttest.Messages(res))
		}
	}
	t.Logf("append conflicts retried: %v", reg.counter(t, "lava_attest_append_conflicts_total"))
}

// TestStore_invalid: requests without a resource, an event id or a matching payload are
// rejected before anything is written.
func TestStore_invalid(t *testing.T) {
	t.Parallel()
	srv := startBus(t)
	store := attest.NewStore(srv.JetStream(), attest.StoreOptions{})
	good := request("ns", "r", lavav1.Phase_PHASE_PENDING, 0)
	tests := map[string]func(r *attest.AppendRequest){
		"no namespace": func(r *attest.AppendRequest) { r.Resource = &lavav1.ResourceRef{Name: "r"} },
		"no event id":  func(r *attest.AppendRequest) { r.EventID = "" },
		"kind":         func(r *attest.AppendRequest) { r.Kind = readmodel.KindAnomaly },
	}
	for name, mutate := range tests {
		req := good
		mutate(&req)
		if _, err := store.Append(t.Context(), req); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if c := readChain(t, srv.JetStream(), "ns", "r"); len(c) != 0 {
		t.Fatalf("invalid requests wrote %d receipts", len(c))
	}
}

// eventually polls cond every 10ms until it holds or within passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// run runs f in the background until the test ends, failing the test if it returns an error.
func run(t *testing.T, f func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("background run: %v", err)
		}
	})
}

// TestReadChain_long: a chain longer than one fetch batch reads back whole and in order, and a
// receipt survives a protojson round trip unchanged and still verifying (upstream: receipt JSON
// round trip).
func TestReadChain_long(t *testing.T) {
	t.Parallel()
	srv := startBus(t)
	store := attest.NewStore(srv.JetStream(), attest.StoreOptions{Signer: receipttest.Signer(t)})
	const n = 700
	for i := range n {
		if _, err := store.Append(t.Context(), request("long", "chain", lavav1.Phase_PHASE_APPLIED, i)); err != nil {
			t.Fatal(err)
		}
	}
	chain := readChain(t, srv.JetStream(), "long", "chain")
	if len(chain) != n {
		t.Fatalf("read %d receipts, want %d", len(chain), n)
	}
	stream, err := srv.JetStream().Stream(t.Context(), bus.StreamReceipts)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers != 0 {
		t.Fatalf("reading left %d consumers on %s", info.State.Consumers, bus.StreamReceipts)
	}
	if res := readmodel.Verify(chain, readmodel.VerifyOptions{RequireSignatures: true}); !res.OK() {
		t.Fatal(receipttest.Messages(res)[:1])
	}
	b, err := protojson.Marshal(chain[n-1])
	if err != nil {
		t.Fatal(err)
	}
	back := &lavav1.Receipt{}
	if err := protojson.Unmarshal(b, back); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(back, chain[n-1]) {
		t.Fatal("protojson round trip changed the receipt")
	}
	chain[n-1] = back
	if res := readmodel.Verify(chain[n-2:], readmodel.VerifyOptions{}); len(res.Failures) != 3 {
		// A suffix is not a chain: its sequences do not start at 0 and its first receipt links
		// to one it does not hold.
		t.Fatalf("suffix: %v", receipttest.Messages(res))
	}
	if res := readmodel.Verify(chain, readmodel.VerifyOptions{RequireSignatures: true}); !res.OK() {
		t.Fatal(receipttest.Messages(res))
	}
}
