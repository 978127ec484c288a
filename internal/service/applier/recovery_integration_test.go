//go:build integration

package applier_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine/engines"
	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/service/applier"
)

// slowSource creates a testkit_file at once and another after {delay} ms (each counts its
// creates in <filename>.creates).
const slowSource = `(deflava-architecture slow
  :inputs ((:dir "/tmp") (:delay "0"))
  :providers ((testkit :source "example/testkit"))
  :resources ((testkit-file "fast" :filename "{dir}/fast.txt" :content "fast\n")
              (testkit-file "slow" :filename "{dir}/slow.txt" :content "slow\n" :create-delay-ms "{delay}")))
`

// TestApplier_killedMidApply kills an applier while tofu applies (its backend is closed and,
// after the drain, the apply's context cancelled: the testkit provider sleeps in slow's Create),
// then starts another replica on the same work directory (the same node). Tofu, interrupted,
// stops slow's create and, its backend gone, writes what it created (fast) to errored.tfstate
// in the object's run directory. The next replica's plan stores that errored.tfstate first; the
// state lock the dead replica left is tied to its lease, not to the lock TTL (15 minutes
// here), so it is taken over at once: the redelivered apply succeeds without ever failing
// Locked and adds only slow. Each resource was created exactly once (testkit's create counter)
// and exists once in the state.
func TestApplier_killedMidApply(t *testing.T) {
	h := newHarness(t)
	const ns, name = "demo", "killed"
	const lockTTL = state.DefaultLockTTL
	dir, work := t.TempDir(), t.TempDir()
	a := h.startApplier(applierOpts{holder: "applier-a", lockTTL: lockTTL, drainTimeout: 100 * time.Millisecond,
		testkit: true, workDir: work})
	h.observe(ns, name, 1, &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: slowSource}},
		Bindings: map[string]string{"dir": dir, "delay": "6000"}, Engine: lavav1.Engine_ENGINE_TOFU})
	key := state.Key{Namespace: ns, Name: name}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		rec, err := a.store.Get(t.Context(), key)
		_, ferr := os.Stat(filepath.Join(dir, "fast.txt"))
		if err == nil && rec.Lock != nil && ferr == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the apply never locked the state and created fast.txt; events:\n%s", h.describe(ns, name))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The replica dies: its loopback state backend goes with it, and after the 100ms drain the
	// apply's context is cancelled (tofu interrupted). Tofu can neither save to the backend nor
	// unlock.
	_ = a.backend.Close()
	a.stop()
	rec, err := a.store.Get(t.Context(), key)
	if err != nil || rec.Lock == nil || !strings.HasPrefix(rec.Lock.Holder, "applier-a~") {
		t.Fatalf("after the kill the state record is %+v (%v), want a lock left by applier-a", rec, err)
	}
	if len(events[*lavav1.Applied](h, ns, name)) != 0 || len(events[*lavav1.Failed](h, ns, name)) != 0 {
		t.Fatalf("the killed apply published an outcome:\n%s", h.describe(ns, name))
	}
	if _, err := os.Stat(filepath.Join(dir, "slow.txt")); !os.IsNotExist(err) {
		t.Fatalf("slow.txt exists although its create was interrupted (%v)", err)
	}
	leases, err := h.js.KeyValue(t.Context(), bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Get(t.Context(), bus.ResourceKey(ns, name)); err != jetstream.ErrKeyNotFound {
		t.Fatalf("lease after the kill: %v, want released", err)
	}

	// Another replica on the same node takes over the redelivered Synthesized: the lock's
	// holder no longer holds the lease, so the lock is taken over at once, far inside its
	// 15-minute TTL, to store the errored.tfstate.
	killed := time.Now()
	b := h.startApplier(applierOpts{holder: "applier-b", lockTTL: lockTTL, testkit: true, workDir: work})
	applied := await[*lavav1.Applied](h, ns, name, 2*time.Minute, nil)
	if f := events[*lavav1.Failed](h, ns, name); len(f) != 0 {
		t.Fatalf("the takeover failed first (%s: %s); want the dead holder's lock taken over at once", f[0].GetReason(), f[0].GetMessage())
	}
	if !strings.Contains(h.logs.String(), "state lock taken over") {
		t.Errorf("the take-over of applier-a's lock was not logged")
	}
	if !strings.Contains(h.logs.String(), "recovered the state a CLI run wrote to errored.tfstate") {
		t.Errorf("the recovery of the orphaned tofu's errored.tfstate was not logged")
	}
	for _, f := range []string{"fast.txt", "slow.txt"} {
		if got := readFile(t, filepath.Join(dir, f)); got != strings.TrimSuffix(f, ".txt")+"\n" {
			t.Errorf("%s = %q", f, got)
		}
	}
	for _, f := range []string{"fast.txt", "slow.txt"} {
		if got := readFile(t, filepath.Join(dir, f+".creates")); got != "1\n" {
			t.Errorf("%s created %q times, want exactly once", f, strings.TrimSpace(got))
		}
	}
	if add := applied.GetSummary().GetAdd(); add != 1 {
		t.Errorf("the plan after the recovery adds %d resources, want 1 (slow; fast is in the recovered state)", add)
	}
	final, body, err := b.store.Body(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if final.Lock != nil {
		t.Errorf("lock left after the recovery: %+v", final.Lock)
	}
	count := stateInstances(t, body)
	if len(count) != 2 || count["testkit_file.fast"] != 1 || count["testkit_file.slow"] != 1 {
		t.Errorf("state after recovery holds %v, want each resource exactly once", count)
	}
	t.Logf("recovery by applier-b %s after the kill: plan %s added %d of 2 resources", time.Since(killed).Round(time.Millisecond),
		applied.GetPlanId()[:12], applied.GetSummary().GetAdd())
}

// TestApplier_deadHolderLeaseExpires: a replica SIGKILLed mid-apply leaves both its lease
// (until the lava-leases TTL) and its state lock. A new replica waits for the lease (naks,
// no outcome), then takes the lock over at once and applies; nothing fails Locked.
func TestApplier_deadHolderLeaseExpires(t *testing.T) {
	h := newHarness(t)
	const ns, name = "demo", "sigkilled"
	dead, err := bus.NewLeases(t.Context(), h.js, "applier-dead/x1", nil)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := dead.Acquire(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	set, err := applier.OpenEngines(t.Context(), h.js, engines.Options{}, state.DefaultLockTTL, h.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	store := set.Store
	key := state.Key{Namespace: ns, Name: name}
	if _, err := store.Lock(t.Context(), key, state.Lock{ID: "dead-lock", Holder: lease.LockHolder(),
		Operation: "OperationTypeApply"}); err != nil {
		t.Fatal(err)
	}
	// While the dead replica's lease is still live, its lock is honoured.
	if _, err := store.Lock(t.Context(), key, state.Lock{ID: "probe", Holder: "probe@" + bus.ResourceKey(ns, name)}); !errors.Is(err, state.ErrLocked) {
		t.Fatalf("lock of a holder whose lease is live: %v, want ErrLocked", err)
	}
	start := time.Now()
	h.startApplier(applierOpts{holder: "applier-b", lockTTL: state.DefaultLockTTL})
	src := `(deflava-architecture one :inputs ((:v "x")) :resources ((terraform-data "d" :input "{v}")))`
	h.observe(ns, name, 1, &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: src}},
		Bindings: map[string]string{"v": "1"}, Engine: lavav1.Engine_ENGINE_EMBEDDED})
	await[*lavav1.Applied](h, ns, name, time.Minute, gen[*lavav1.Applied](1))
	took := time.Since(start)
	if f := events[*lavav1.Failed](h, ns, name); len(f) != 0 {
		t.Fatalf("Failed %s: %s; want the dead holder's lock taken over once its lease expired", f[0].GetReason(), f[0].GetMessage())
	}
	if time.Now().Before(lease.Deadline()) {
		t.Errorf("applied after %v, while the dead replica's lease (TTL %v) was still live", took, leaseTTL)
	}
	if rec, err := store.Get(t.Context(), key); err != nil || rec.Lock != nil || !rec.HasState() {
		t.Errorf("state after the take-over: %+v (%v), want a state and no lock", rec, err)
	}
	t.Logf("applied %v after the dead holder's lease was taken (lease TTL %v, lock TTL %v)", took.Round(time.Millisecond), leaseTTL, state.DefaultLockTTL)
}

// TestApplier_HolderAlive: a lock holder named after a lease is alive exactly while that
// lease, under that acquisition, is held: not after its release, not under the same replica's
// next acquisition (a lock a failed operation left is not the next one's), not under another
// replica; a holder not tied to a lease cannot be judged.
func TestApplier_HolderAlive(t *testing.T) {
	js := natstest.RunJetStream(t).JetStream()
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{LeaseTTL: leaseTTL}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	alive := applier.HolderAlive(kv)
	check := func(holder string, want bool, what string) {
		t.Helper()
		got, err := alive(t.Context(), holder)
		if err != nil || got != want {
			t.Fatalf("%s: alive(%q) = %v, %v; want %v", what, holder, got, err, want)
		}
	}
	r1, err := bus.NewLeases(t.Context(), js, "replica-1/aa", nil)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := bus.NewLeases(t.Context(), js, "replica-2/bb", nil)
	if err != nil {
		t.Fatal(err)
	}
	l1, err := r1.Acquire(t.Context(), "demo", "held")
	if err != nil {
		t.Fatal(err)
	}
	first := l1.LockHolder()
	check(first, true, "while its lease is held")
	if err := l1.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	check(first, false, "after the release")
	l2, err := r1.Acquire(t.Context(), "demo", "held")
	if err != nil {
		t.Fatal(err)
	}
	check(first, false, "under the same replica's next acquisition")
	check(l2.LockHolder(), true, "the next acquisition's own holder")
	if err := l2.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l3, err := r2.Acquire(t.Context(), "demo", "held")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l3.Release(t.Context()) }()
	check(l2.LockHolder(), false, "while another replica holds the lease")
	if _, err := alive(t.Context(), "someone at a terminal"); !errors.Is(err, state.ErrHolderUnknown) {
		t.Fatalf("a holder not tied to a lease: %v, want state.ErrHolderUnknown", err)
	}
}

// stateInstances counts the managed instances per address in a state v4 body.
func stateInstances(t *testing.T, body []byte) map[string]int {
	t.Helper()
	var st struct {
		Resources []struct {
			Mode, Type, Name string
			Instances        []json.RawMessage
		}
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range st.Resources {
		if r.Mode == "managed" {
			count[r.Type+"."+r.Name] += len(r.Instances)
		}
	}
	return count
}

// TestApplier_twoReplicas50 runs two applier replicas on 50 resources (terraform_data, the
// embedded engine): every resource is Applied exactly once and no two operations on one
// resource ever overlap; the lease metrics show no lease was lost.
func TestApplier_twoReplicas50(t *testing.T) {
	h := newHarness(t)
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	ops := map[string][]applier.Operation{}
	observe := func(o applier.Operation) {
		<-mu
		ops[o.Name] = append(ops[o.Name], o)
		mu <- struct{}{}
	}
	replicas := []*replica{
		h.startApplier(applierOpts{holder: "applier-1", concurrency: 4, observe: observe}),
		h.startApplier(applierOpts{holder: "applier-2", concurrency: 4, observe: observe}),
	}
	const n = 50
	const ns = "fleet"
	src := `(deflava-architecture one :inputs ((:v "x")) :resources ((terraform-data "d" :input "{v}")))`
	for i := range n {
		h.observe(ns, name50(i), 1, &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: src}},
			Bindings: map[string]string{"v": name50(i)}, Engine: lavav1.Engine_ENGINE_EMBEDDED})
	}
	for i := range n {
		await(h, ns, name50(i), 3*time.Minute, gen[*lavav1.Applied](1))
	}
	time.Sleep(500 * time.Millisecond)
	<-mu
	defer func() { mu <- struct{}{} }()
	byHolder := map[string]int{}
	for i := range n {
		name := name50(i)
		if a := events[*lavav1.Applied](h, ns, name); len(a) != 1 {
			t.Errorf("%s: %d Applied events, want 1", name, len(a))
		}
		list := ops[name]
		for j := range list {
			byHolder[list[j].Holder]++
			for k := j + 1; k < len(list); k++ {
				x, y := list[j], list[k]
				if x.Start.Before(y.End) && y.Start.Before(x.End) {
					t.Errorf("%s: %s by %s and %s by %s overlap", name, x.Op, x.Holder, y.Op, y.Holder)
				}
			}
		}
		if applies := countOps(list, applier.OpApply); applies != 1 {
			t.Errorf("%s: %d applies, want 1", name, applies)
		}
	}
	var acquired, contended float64
	for i, r := range replicas {
		got := map[string]float64{}
		for _, m := range []string{"lava_bus_lease_acquired_total", "lava_bus_lease_released_total", "lava_bus_lease_lost_total",
			"lava_bus_leases_held", "lava_bus_lease_contended_total"} {
			got[m] = metricValue(t, r.reg, m)
		}
		if got["lava_bus_lease_lost_total"] != 0 || got["lava_bus_leases_held"] != 0 ||
			got["lava_bus_lease_acquired_total"] != got["lava_bus_lease_released_total"] {
			t.Errorf("replica %d lease metrics %v: want none lost, none held, every acquired lease released", i+1, got)
		}
		acquired += got["lava_bus_lease_acquired_total"]
		contended += got["lava_bus_lease_contended_total"]
	}
	if acquired < n { // one lease per Synthesized at least
		t.Errorf("%v leases acquired for %d resources", acquired, n)
	}
	if len(byHolder) != 2 {
		t.Errorf("operations by replica %v: want both replicas to work", byHolder)
	}
	t.Logf("operations by replica %v; leases acquired %v, contended %v", byHolder, acquired, contended)
}

func name50(i int) string { return "r" + string(rune('a'+i/26)) + string(rune('a'+i%26)) }

func countOps(list []applier.Operation, op string) int {
	n := 0
	for _, o := range list {
		if o.Op == op && o.Err == nil {
			n++
		}
	}
	return n
}

// metricValue sums every series of a metric in reg.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// TestApplier_seedProviderUnavailable: the seed manifest with a CLI or the embedded engine
// reaches Synthesized, then fails planning with a clear provider-unavailable reason (no AWS
// provider can be installed here), never a crash or a hang.
func TestApplier_seedProviderUnavailable(t *testing.T) {
	h := newHarness(t)
	h.startApplier(applierOpts{})
	// examples/cloud/prod-vpc.yaml is the repository's copy of the seed case.
	raw, err := os.ReadFile("../../../examples/cloud/prod-vpc.yaml")
	if err != nil {
		t.Fatalf("seed case: %v", err)
	}
	var obj v1alpha1.LavaArchitecture
	if err := yaml.UnmarshalStrict(raw, &obj); err != nil {
		t.Fatal(err)
	}
	for _, eng := range []lavav1.Engine{lavav1.Engine_ENGINE_TOFU, lavav1.Engine_ENGINE_EMBEDDED} {
		name := obj.Name + "-" + pipeline.EngineName(eng)
		h.observe(obj.Namespace, name, 1, &lavav1.ArchitectureSpec{
			Source:   &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: obj.Spec.Source.Inline}},
			Bindings: obj.Spec.Bindings, Gate: obj.Spec.Gate, Engine: eng,
		})
		syn := await(h, obj.Namespace, name, time.Minute, gen[*lavav1.Synthesized](1))
		if !syn.GetGate().GetPassed() || syn.GetRender().GetResourceCount() != 1 {
			t.Errorf("%s: Synthesized = %v", name, syn)
		}
		f := await(h, obj.Namespace, name, 2*time.Minute, gen[*lavav1.Failed](1))
		if f.GetStage() != lavav1.Stage_STAGE_PLAN || f.GetReason() != "ProviderUnavailable" || f.GetRetryable() ||
			!strings.Contains(f.GetMessage(), "hashicorp/aws") || !strings.Contains(f.GetMessage(), "not available") {
			t.Errorf("%s: Failed %v %s %q (retryable %v), want PLAN ProviderUnavailable naming hashicorp/aws", name,
				f.GetStage(), f.GetReason(), f.GetMessage(), f.GetRetryable())
		}
		t.Logf("%s: %s: %s", name, f.GetReason(), f.GetMessage())
	}
}
