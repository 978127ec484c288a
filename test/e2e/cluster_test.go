//go:build e2e

package e2e_test

import (
	"context"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/test/e2e/harness"
)

// flagClusterObjects is the size of TestCluster_killServerThenMetaLeader: 40 in `make test`,
// 200 (the full-size run) with `make test-e2e-cluster` or -cluster.objects=200.
var flagClusterObjects = flag.Int("cluster.objects", 40, "LavaArchitectures in TestCluster_killServerThenMetaLeader")

// clusterSource is one object of the cluster run: a testkit_file whose Create takes {delay} ms
// (so applies are in flight when a server dies) and counts itself in kit.txt.creates, and a
// built-in terraform_data, on the embedded engine.
const clusterSource = `(deflava-architecture cluster-kit
  :inputs ((:dir "/tmp") (:delay "0"))
  :providers ((testkit :source "example/testkit"))
  :resources ((testkit-file "kit" :filename "{dir}/kit.txt" :content "kit\n" :create-delay-ms "{delay}")
              (terraform-data "marker" :input "{dir}")))
`

// TestCluster_killServerThenMetaLeader runs the whole installation on a three-server JetStream
// cluster (routes on loopback, every stream, KV bucket and object store at R3, every service
// given the URL list) and, while N LavaArchitectures reconcile, SIGKILLs one server that is not
// the JetStream meta leader, starts it again, then SIGKILLs the meta leader and starts it again.
// Asserted: the topology is R3 on three peers; both kills happen while objects are still in
// flight; every object reaches Applied; every testkit_file was created exactly once (the
// provider's create counter); every receipt chain verifies; no consumer is left with pending or
// unacknowledged messages; no service process died.
func TestCluster_killServerThenMetaLeader(t *testing.T) {
	n := *flagClusterObjects
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Minute)
	defer cancel()
	// Drift is left out: its first scans (5m after each apply) are not part of this run.
	var services []string
	for _, s := range harness.Services() {
		if s != harness.Drift {
			services = append(services, s)
		}
	}
	env := harness.Start(t, harness.Options{NATSServers: 3, Services: services, TestkitMirror: true})
	kc := newClient(t, env.Kubeconfig)
	js, err := jetstream.New(env.ConnectAs(t, bus.IdentityBootstrap))
	if err != nil {
		t.Fatal(err)
	}
	checkR3(ctx, t, js)

	const ns = "cluster"
	root := env.Files(t)
	start := time.Now()
	createKits(ctx, t, kc, ns, root, n, 1500*time.Millisecond)
	applied := func() (int, string) { return countApplied(ctx, kc, ns, n) }
	waitApplied := func(min int, d time.Duration) int {
		t.Helper()
		var got int
		poll(ctx, t, env, d, func() (bool, string) {
			var why string
			got, why = applied()
			return got >= min, why
		})
		return got
	}
	kill := func(what string, s *natstest.Binary) {
		t.Helper()
		got, why := applied()
		if got >= n {
			t.Fatalf("%s: the run was over before the kill (%s): too few objects to test a loss mid-run", what, why)
		}
		at := time.Now()
		s.Kill()
		t.Logf("%.1fs: SIGKILL %s (%s), %s", at.Sub(start).Seconds(), s.Name(), what, why)
		// The two survivors keep a quorum: work goes on while the server is down.
		more := waitApplied(got+1, 5*time.Minute)
		t.Logf("  next Applied %.1fs after the kill (%d Applied)", time.Since(at).Seconds(), more)
		down := time.Now()
		s.Start()
		t.Logf("  %s back and current after %.1fs down", s.Name(), time.Since(down).Seconds())
	}

	waitApplied(max(n/5, 1), 10*time.Minute)
	leader, err := env.NATS.MetaLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var other *natstest.Binary
	for _, s := range env.NATS.Nodes {
		if s != leader {
			other = s
			break
		}
	}
	kill("a server that is not the meta leader", other)
	leader, err = env.NATS.MetaLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	kill("the JetStream meta leader", leader)
	if next, err := env.NATS.MetaLeader(30 * time.Second); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("meta leader after the second kill: %s", next.Name())
	}
	waitApplied(n, 15*time.Minute)
	t.Logf("%d objects Applied %.1fs after the first create, across two server losses", n, time.Since(start).Seconds())

	// Nothing applied twice: every testkit_file was created once.
	once := checkCreatedOnce(t, root, n)
	t.Logf("creates per testkit_file: %d of %d exactly once", once, n)

	// Nothing lost from the receipts: every chain verifies. A read that the cluster does not
	// answer ("no responders": the ephemeral consumer of the read not yet placed) is tried
	// again, at most twice, and counted; a chain that does not verify fails at once.
	verifyChains(ctx, t, env, ns, n)

	// No message stuck: every consumer drains.
	checkDrained(ctx, t, env, js, services, 2*time.Minute)
	if err := env.Dead(); err != nil {
		t.Errorf("a process died during the run: %v", err)
	}
}

// checkR3 fails unless every stream of the topology, including the KV buckets' and object
// stores' streams, is at three replicas with two peers besides its leader.
func checkR3(ctx context.Context, t *testing.T, js jetstream.JetStream) {
	t.Helper()
	var names []string
	kinds := map[string]int{}
	for info := range js.ListStreams(ctx).Info() {
		names = append(names, info.Config.Name)
		switch {
		case strings.HasPrefix(info.Config.Name, "KV_"):
			kinds["kv"]++
		case strings.HasPrefix(info.Config.Name, "OBJ_"):
			kinds["object"]++
		default:
			kinds["stream"]++
		}
		if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			t.Errorf("stream %s: %d replicas, cluster %+v; want R3 on three servers", info.Config.Name, info.Config.Replicas, info.Cluster)
		}
	}
	sort.Strings(names)
	want := bus.Declare(bus.TopologyOptions{Replicas: 3})
	if kinds["stream"] != len(want.Streams) || kinds["kv"] != len(want.KeyValues) || kinds["object"] != len(want.ObjectStores) {
		t.Errorf("cluster holds %v (%v), want %d streams, %d KV buckets, %d object stores", kinds, names,
			len(want.Streams), len(want.KeyValues), len(want.ObjectStores))
	}
	t.Logf("topology at R3: %d streams, %d KV buckets, %d object stores", kinds["stream"], kinds["kv"], kinds["object"])
}

// verifyChains runs `lava receipts verify` for kit-000..kit-<n-1> in ns: each chain must verify
// (signatures required, attest's key pinned). A read the cluster does not answer ("no
// responders") is tried again after 2s, at most twice; the number of such retries is logged.
func verifyChains(ctx context.Context, t *testing.T, env *harness.Env, ns string, n int) {
	t.Helper()
	re := regexp.MustCompile(`: ok \([1-9][0-9]* receipts?`)
	retried := 0
	for i := range n {
		r := ns + "/" + fmt.Sprintf("kit-%03d", i)
		for attempt := 0; ; attempt++ {
			out, err := env.Lava(ctx, "receipts", "verify", r, "--nats-url", env.NATSURL, "--require-signatures", "--public-key", env.PublicKeyFile)
			if err == nil && re.MatchString(out) {
				break
			}
			if err != nil && strings.Contains(err.Error(), "no responders") && attempt < 2 {
				retried++
				time.Sleep(2 * time.Second)
				continue
			}
			t.Errorf("%s: lava receipts verify: %q %v", r, out, err)
			break
		}
	}
	t.Logf("receipt chains: %d verified; %d reads retried after \"no responders\"", n, retried)
}

// checkDrained polls for at most d until every durable consumer of services (named after the
// service) on every stream has nothing pending and nothing unacknowledged, failing the test
// with the ones that do not.
func checkDrained(ctx context.Context, t *testing.T, env *harness.Env, js jetstream.JetStream, services []string, d time.Duration) {
	t.Helper()
	poll(ctx, t, env, d, func() (bool, string) {
		var stuck []string
		for name := range js.StreamNames(ctx).Name() {
			s, err := js.Stream(ctx, name)
			if err != nil {
				return false, err.Error()
			}
			for ci := range s.ListConsumers(ctx).Info() {
				if !slices.Contains(services, ci.Name) {
					continue // a durable of a service the run does not start
				}
				if ci.NumPending != 0 || ci.NumAckPending != 0 {
					stuck = append(stuck, fmt.Sprintf("%s/%s pending %d, unacked %d", name, ci.Name, ci.NumPending, ci.NumAckPending))
				}
			}
		}
		return len(stuck) == 0, "consumers not drained: " + strings.Join(stuck, "; ")
	})
}
