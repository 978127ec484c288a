//go:build integration

package bus_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

// On a 3-server JetStream cluster with 3 replicas, a key-value read right after a write sees
// that write, from every server a client may be connected to: the buckets' reads go to the
// stream leader (no direct gets, which a follower answers from what it has applied so far;
// with them, 83 of these 900 reads returned an older revision when this test was written).
func TestEnsureTopology_kvReadsSeeTheirWrites(t *testing.T) {
	t.Parallel()
	c := natstest.RunCluster(t, natstest.ClusterConfig{})
	ctx := t.Context()
	opts := testTopology
	opts.Replicas = 3
	_, js := c.Nodes[0].Connect(t)
	for range 2 { // again, as every bootstrap does: the setting stays
		if err := bus.EnsureTopology(ctx, js, opts); err != nil {
			t.Fatal(err)
		}
	}
	for _, cfg := range bus.Declare(opts).KeyValues {
		s, err := js.Stream(ctx, "KV_"+cfg.Bucket)
		if err != nil {
			t.Fatal(err)
		}
		if s.CachedInfo().Config.AllowDirect {
			t.Errorf("bucket %s allows direct gets: a follower may answer a read with a value older than the reader's own write", cfg.Bucket)
		}
	}
	// A writer on each server, each its own key: write, read at once, many times.
	stale := 0
	for i, n := range c.Nodes {
		nc, err := nats.Connect(n.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		njs, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		kv, err := njs.KeyValue(ctx, bus.BucketState)
		if err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("k%d", i)
		rev, err := kv.Create(ctx, key, []byte("0"))
		if err != nil {
			t.Fatal(err)
		}
		for j := 1; j <= 300; j++ {
			if rev, err = kv.Update(ctx, key, []byte(strconv.Itoa(j)), rev); err != nil {
				t.Fatal(err)
			}
			e, err := kv.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if e.Revision() != rev {
				stale++
			}
		}
	}
	if stale > 0 {
		t.Errorf("%d of 900 reads right after a write returned an older revision", stale)
	}
}
