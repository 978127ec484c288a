//go:build e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/test/e2e/harness"
	"github.com/nats-io/nats.go/jetstream"
)

// flagScaleObjects is the size of TestScaleOut_twoReplicasOfEveryService: 60 in `make test`
// (make test-e2e), 500 (the full-size run) with `make test-e2e-scale`. Both sizes catch two attest
// replicas appending out of phase order: without the ordering of
// docs/design/0018-receipt-order-across-replicas.md, 1 or 2 chains of 60 and 1 of 500 held
// SYNTHESIZED before PENDING.
var flagScaleObjects = flag.Int("scale.objects", 60, "LavaArchitectures in TestScaleOut_twoReplicasOfEveryService")

// TestScaleOut_twoReplicasOfEveryService runs two processes of every service (the watchers
// elect a leader) on N LavaArchitectures. Asserted: every object Applied; every testkit_file
// created exactly once; no lease of one resource held by two replicas at once and no state lock
// taken from a live holder (every lava-leases and lava-state entry recorded from before the run,
// the lease acquisitions seen equal to the replicas' lava_bus_lease_acquired_total, so none was
// missed); every receipt chain verifies (no fork) and its outcome phases are in pipeline order;
// both replicas of synth, applier and attest did work and exactly one watcher reconciled. The
// split per replica is logged.
func TestScaleOut_twoReplicasOfEveryService(t *testing.T) {
	n := *flagScaleObjects
	if n <= 0 {
		t.Fatalf("-scale.objects=%d: give a positive number of objects (make test-e2e-scale SCALE_OBJECTS=N)", n)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Minute)
	defer cancel()
	replicas := map[string]int{}
	for _, s := range harness.Services() {
		replicas[s] = 2
	}
	env := harness.Start(t, harness.Options{Replicas: replicas, TestkitMirror: true})
	kc := newClient(t, env.Kubeconfig)
	js, err := jetstream.New(env.ConnectAs(t, bus.IdentityBootstrap))
	if err != nil {
		t.Fatal(err)
	}
	leases := recordKV(ctx, t, js, bus.BucketLeases)
	states := recordKV(ctx, t, js, bus.BucketState)

	const ns = "scale"
	root := env.Files(t)
	start := time.Now()
	createKits(ctx, t, kc, ns, root, n, 300*time.Millisecond)
	poll(ctx, t, env, 30*time.Minute, func() (bool, string) {
		got, why := countApplied(ctx, kc, ns, n)
		return got == n, why
	})
	t.Logf("%d objects Applied %.1fs after the first create with two replicas of every service", n, time.Since(start).Seconds())
	if once := checkCreatedOnce(t, root, n); once != n {
		t.Errorf("%d of %d testkit_files created exactly once", once, n)
	}

	verifyChains(ctx, t, env, ns, n)
	checkPhaseOrder(ctx, t, env, ns, n)

	// Give the last lease releases a moment to reach the recorders.
	time.Sleep(2 * time.Second)
	acquired, overlaps := leaseOverlaps(leases.snapshot(), 30*time.Second)
	locks, takeovers := lockTakeovers(states.snapshot())
	for _, o := range overlaps {
		t.Errorf("lease overlap: %s", o)
	}
	for _, o := range takeovers {
		t.Errorf("state lock: %s", o)
	}
	metricAcquired := 0.0
	split := map[string][2]float64{}
	for _, s := range harness.Services() {
		var per [2]float64
		for k := 1; k <= 2; k++ {
			p := harness.ReplicaName(s, k)
			name, labels := "lava_bus_messages_total", map[string]string{"result": "ack"}
			if s == harness.Watcher {
				name, labels = "controller_runtime_reconcile_total", nil
			}
			v, err := metricSum(ctx, env, p, name, labels)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			per[k-1] = v
			a, err := metricSum(ctx, env, p, "lava_bus_lease_acquired_total", nil)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			metricAcquired += a
		}
		split[s] = per
		t.Logf("split %-8s replica 1: %5.0f  replica 2: %5.0f (%s)", s, per[0], per[1],
			map[bool]string{true: "reconciles", false: "messages acked"}[s == harness.Watcher])
	}
	t.Logf("leases: %d acquisitions recorded (replicas' lava_bus_lease_acquired_total %.0f), %d overlaps; state locks: %d taken, %d take-overs",
		acquired, metricAcquired, len(overlaps), locks, len(takeovers))
	if float64(acquired) != metricAcquired {
		t.Errorf("the recorder saw %d lease acquisitions, the replicas count %.0f: the lease check missed some", acquired, metricAcquired)
	}
	if locks < n {
		t.Errorf("only %d state locks recorded for %d applies", locks, n)
	}
	for _, s := range []string{harness.Synth, harness.Applier, harness.Attest} {
		if split[s][0] == 0 || split[s][1] == 0 {
			t.Errorf("%s: the work was not split: %v", s, split[s])
		}
	}
	if w := split[harness.Watcher]; (w[0] == 0) == (w[1] == 0) {
		t.Errorf("watcher: want exactly one leader reconciling, got %v", w)
	}
	if err := env.Dead(); err != nil {
		t.Errorf("a process died during the run: %v", err)
	}
}

// kvLog records every entry of a KV bucket from before the run: key, operation, value, time.
type kvLog struct {
	mu      sync.Mutex
	entries []jetstream.KeyValueEntry
}

func recordKV(ctx context.Context, t *testing.T, js jetstream.JetStream, bucket string) *kvLog {
	t.Helper()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.WatchAll(ctx, jetstream.IncludeHistory())
	if err != nil {
		t.Fatal(err)
	}
	l := &kvLog{}
	go func() {
		for e := range w.Updates() {
			if e == nil {
				continue // the end of the initial values
			}
			l.mu.Lock()
			l.entries = append(l.entries, e)
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() { _ = w.Stop() })
	return l
}

func (l *kvLog) snapshot() []jetstream.KeyValueEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.entries)
}

// leaseOverlaps walks lava-leases' entries per key: a Put of holder B while holder A's lease was
// neither deleted nor past its TTL (ttl after A's last renewal) is an overlap. It returns the
// lease acquisitions seen and the overlaps, described.
func leaseOverlaps(entries []jetstream.KeyValueEntry, ttl time.Duration) (acquired int, overlaps []string) {
	type held struct {
		holder  string
		renewed time.Time
	}
	cur := map[string]held{}
	for _, e := range entries {
		if e.Operation() != jetstream.KeyValuePut {
			delete(cur, e.Key())
			continue
		}
		var v struct {
			Holder   string    `json:"holder"`
			Acquired time.Time `json:"acquired"`
			Renewed  time.Time `json:"renewed"`
		}
		if err := json.Unmarshal(e.Value(), &v); err != nil {
			overlaps = append(overlaps, fmt.Sprintf("%s: undecodable lease %q", e.Key(), e.Value()))
			continue
		}
		prev, ok := cur[e.Key()]
		switch {
		case !ok:
			acquired++
		case prev.holder == v.Holder:
		case v.Acquired.Sub(prev.renewed) > ttl:
			acquired++ // taken after the previous holder's lease expired
		default:
			acquired++
			overlaps = append(overlaps, fmt.Sprintf("%s: %s acquired at %s while %s held it (renewed %s)", e.Key(), v.Holder,
				v.Acquired.Format(time.RFC3339Nano), prev.holder, prev.renewed.Format(time.RFC3339Nano)))
		}
		cur[e.Key()] = held{holder: v.Holder, renewed: v.Renewed}
	}
	return acquired, overlaps
}

// lockTakeovers walks lava-state's state records ("state.<ns>.<name>"; the bucket's provider
// locks and forgotten-state records are skipped) per key: a lock of holder B replacing holder A's lock
// with no unlocked record between them is a take-over (two operations on one state). It returns
// the locks taken and the take-overs, described.
func lockTakeovers(entries []jetstream.KeyValueEntry) (locks int, takeovers []string) {
	cur := map[string]string{}
	for _, e := range entries {
		if !strings.HasPrefix(e.Key(), "state.") {
			continue
		}
		if e.Operation() != jetstream.KeyValuePut {
			delete(cur, e.Key())
			continue
		}
		var rec state.Record
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			takeovers = append(takeovers, fmt.Sprintf("%s: undecodable record: %v", e.Key(), err))
			continue
		}
		h := ""
		if rec.Lock != nil {
			h = rec.Lock.Holder
		}
		prev := cur[e.Key()]
		if h != "" && prev == "" {
			locks++
		}
		if h != "" && prev != "" && h != prev {
			takeovers = append(takeovers, fmt.Sprintf("%s: locked by %s while %s held the lock", e.Key(), h, prev))
		}
		cur[e.Key()] = h
	}
	return locks, takeovers
}
