package attest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/readmodel"
)

// TestStore_cacheWindow: a chain appended to for longer than CacheWindow remembers only the
// receipts of the window (and the one before it), not MaxLookback of them (so attest's memory
// stays flat in the soak of docs/operations.md); an event redelivered from before the
// window is still found as a duplicate, by reading the older receipts back from the stream.
func TestStore_cacheWindow(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	js := srv.JetStream()
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{BackOff: []time.Duration{5 * time.Second}}); err != nil {
		t.Fatalf("EnsureTopology: %v", err)
	}
	start := time.Now()
	clock := start
	const step, window, n = 10 * time.Second, 2 * time.Minute, 100
	store := NewStore(js, StoreOptions{Now: func() time.Time { return clock }, CacheWindow: window})
	ref := &lavav1.ResourceRef{Namespace: "ns", Name: "r", Uid: "uid-r"}
	req := func(i int) AppendRequest {
		pc := &lavav1.PhaseChanged{
			Envelope: &lavav1.Envelope{EventId: fmt.Sprintf("%064x", i+1), Source: "watcher", Resource: ref, Generation: 1},
			From:     lavav1.Phase_PHASE_PENDING, To: lavav1.Phase_PHASE_SYNTHESIZED, Reason: "Synthesized",
			SourceDigest: strings.Repeat("a", 64), TerraformJsonDigest: strings.Repeat("b", 64),
		}
		return AppendRequest{Resource: ref, Generation: 1, EventID: pc.GetEnvelope().GetEventId(), Kind: readmodel.KindOutcome,
			Payload: readmodel.OutcomeFromPhaseChanged(pc), NotBefore: clock}
	}
	first, err := store.Append(t.Context(), req(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i++ {
		clock = clock.Add(step)
		if _, err := store.Append(t.Context(), req(i)); err != nil {
			t.Fatal(err)
		}
	}
	tl := store.cached(bus.ReceiptSubject("ns", "r"))
	if tl == nil {
		t.Fatal("the chain's tail is not cached")
	}
	if max := int(window/step) + 2; len(tl.recent) > max {
		t.Errorf("the cached tail remembers %d receipts after %d appends %v apart, want at most %d (the window of %v)", len(tl.recent), n, step, max, window)
	}
	again := req(0)
	again.NotBefore = start
	a, err := store.Append(t.Context(), again)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Duplicate || a.StreamSeq != first.StreamSeq {
		t.Errorf("the first event redelivered %v later: duplicate %v at stream sequence %d, want the receipt at %d", clock.Sub(start), a.Duplicate, a.StreamSeq, first.StreamSeq)
	}
}
