package bus_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

func TestEnsureTopology_createsEverythingAsDeclared(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, bus.TopologyOptions{})
	ctx := t.Context()
	decl := bus.Declare(bus.TopologyOptions{})

	for _, want := range decl.Streams {
		s, err := js.Stream(ctx, want.Name)
		if err != nil {
			t.Fatalf("stream %s: %v", want.Name, err)
		}
		got := s.CachedInfo().Config
		if diff := cmp.Diff(want.Subjects, got.Subjects); diff != "" {
			t.Errorf("%s subjects (-want +got):\n%s", want.Name, diff)
		}
		if got.Retention != want.Retention || got.MaxMsgsPerSubject != want.MaxMsgsPerSubject ||
			got.MaxAge != want.MaxAge || got.Replicas != 1 || got.Duplicates != 10*time.Minute {
			t.Errorf("%s: config %+v, want %+v", want.Name, got, want)
		}
	}
	// Spot checks of docs/architecture.md section 3.
	checks := []struct {
		stream string
		ok     func(jetstream.StreamConfig) bool
	}{
		{bus.StreamResources, func(c jetstream.StreamConfig) bool {
			return c.Retention == jetstream.LimitsPolicy && c.MaxMsgsPerSubject == 16
		}},
		{bus.StreamCommands, func(c jetstream.StreamConfig) bool { return c.Retention == jetstream.WorkQueuePolicy }},
		{bus.StreamAnomalies, func(c jetstream.StreamConfig) bool {
			return c.Retention == jetstream.LimitsPolicy && c.MaxAge == 30*24*time.Hour
		}},
		{bus.StreamReceipts, func(c jetstream.StreamConfig) bool {
			return c.Retention == jetstream.LimitsPolicy && c.MaxAge == 0 && c.MaxMsgs == -1 && c.MaxBytes == -1 &&
				c.MaxMsgsPerSubject == -1 && c.DenyDelete && c.DenyPurge
		}},
	}
	for _, c := range checks {
		s, err := js.Stream(ctx, c.stream)
		if err != nil {
			t.Fatal(err)
		}
		if !c.ok(s.CachedInfo().Config) {
			t.Errorf("%s: config %+v does not match docs/architecture.md section 3", c.stream, s.CachedInfo().Config)
		}
	}

	services := map[string]bool{}
	for _, want := range decl.Consumers {
		c, err := js.Consumer(ctx, want.Stream, want.Config.Durable)
		if err != nil {
			t.Fatalf("consumer %s/%s: %v", want.Stream, want.Config.Durable, err)
		}
		got := c.CachedInfo().Config
		if diff := cmp.Diff(want.Config.FilterSubjects, got.FilterSubjects); diff != "" {
			t.Errorf("%s/%s filters (-want +got):\n%s", want.Stream, want.Config.Durable, diff)
		}
		if got.AckPolicy != jetstream.AckExplicitPolicy || got.MaxDeliver != 10 || got.AckWait != 30*time.Second {
			t.Errorf("%s/%s: config %+v", want.Stream, want.Config.Durable, got)
		}
		if !slices.Contains(bus.Services(), got.Durable) {
			t.Errorf("consumer %q is not named after a service", got.Durable)
		}
		services[got.Durable] = true
	}
	for _, svc := range bus.Services() {
		if !services[svc] {
			t.Errorf("service %s has no consumer", svc)
		}
	}

	for _, want := range decl.KeyValues {
		kv, err := js.KeyValue(ctx, want.Bucket)
		if err != nil {
			t.Fatalf("kv %s: %v", want.Bucket, err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.TTL() != want.TTL {
			t.Errorf("kv %s TTL %v, want %v", want.Bucket, st.TTL(), want.TTL)
		}
	}
	leases, err := js.KeyValue(ctx, bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := leases.Status(ctx); st.TTL() != 30*time.Second {
		t.Errorf("lava-leases TTL = %v, want the 30s default", st.TTL())
	}
	windows, err := js.KeyValue(ctx, bus.BucketAnomalyWindows)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := windows.Status(ctx); st.TTL() != time.Hour || st.History() != 1 {
		t.Errorf("lava-anomaly-windows TTL %v history %d, want 1h (2 x the 10m default window, at least 1h) and 1", st.TTL(), st.History())
	}
	if _, err := js.KeyValue(ctx, bus.BucketAnomalyProgress); err != nil {
		t.Errorf("lava-anomaly-progress: %v", err)
	}
	// The anomaly service's reader of LAVA_ANOMALIES starts at the stream's end on creation.
	ac, err := js.Consumer(ctx, bus.StreamAnomalies, bus.ServiceAnomaly)
	if err != nil {
		t.Fatal(err)
	}
	if got := ac.CachedInfo().Config.DeliverPolicy; got != jetstream.DeliverNewPolicy {
		t.Errorf("anomaly consumer on LAVA_ANOMALIES: deliver policy %v, want new", got)
	}
	if c, _ := decl.Consumer(bus.StreamAnomalies, bus.ServiceAttest); c.Config.DeliverPolicy != jetstream.DeliverAllPolicy {
		t.Errorf("attest consumer on LAVA_ANOMALIES: deliver policy %v, want all (every anomaly gets a receipt)", c.Config.DeliverPolicy)
	}
	if _, err := js.ObjectStore(ctx, bus.ObjectStoreArtifacts); err != nil {
		t.Errorf("object store: %v", err)
	}
}

func TestEnsureTopology_idempotentAndUpdatesInPlace(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, bus.TopologyOptions{})
	ctx := t.Context()
	pub := bus.NewPublisher(js)
	if _, err := pub.PublishEvent(ctx, synthesized("infra", "web.prod", 1, genTrigger(1))); err != nil {
		t.Fatal(err)
	}
	// Second run, same options: no error, nothing lost.
	if err := bus.EnsureTopology(ctx, js, bus.TopologyOptions{}); err != nil {
		t.Fatalf("EnsureTopology again: %v", err)
	}
	// Third run with changed options: updated in place.
	changed := bus.TopologyOptions{LeaseTTL: 45 * time.Second, MaxDeliver: 7, BackOff: []time.Duration{5 * time.Second, 20 * time.Second}, DuplicateWindow: 3 * time.Minute}
	if err := bus.EnsureTopology(ctx, js, changed); err != nil {
		t.Fatalf("EnsureTopology with changed options: %v", err)
	}
	s, err := js.Stream(ctx, bus.StreamPhases)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("LAVA_PHASES has %d messages after the updates, want 1", info.State.Msgs)
	}
	if info.Config.Duplicates != 3*time.Minute {
		t.Errorf("duplicate window %v, want 3m", info.Config.Duplicates)
	}
	c, err := js.Consumer(ctx, bus.StreamPhases, bus.ServiceApplier)
	if err != nil {
		t.Fatal(err)
	}
	ci, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ci.Config.MaxDeliver != 7 || ci.Config.AckWait != 5*time.Second || len(ci.Config.BackOff) != 2 {
		t.Errorf("consumer not updated: %+v", ci.Config)
	}
	if ci.NumPending != 1 {
		t.Errorf("consumer lost its position: %d pending, want 1", ci.NumPending)
	}
	kv, err := js.KeyValue(ctx, bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.TTL() != 45*time.Second {
		t.Errorf("lava-leases TTL %v, want 45s", st.TTL())
	}
}

// Every replica of every service runs EnsureTopology at start-up, at the same time.
func TestEnsureTopology_concurrentReplicas(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	errs := make(chan error, 6)
	for range 6 {
		_, js := srv.Connect(t)
		go func() { errs <- bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}) }()
	}
	for range 6 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent EnsureTopology: %v", err)
		}
	}
	names := srv.JetStream().StreamNames(t.Context())
	n := 0
	for range names.Name() {
		n++
	}
	// Streams, KV buckets and object stores are all streams.
	decl := bus.Declare(bus.TopologyOptions{})
	if want := len(decl.Streams) + len(decl.KeyValues) + len(decl.ObjectStores); n != want {
		t.Errorf("%d streams after concurrent creation, want %d", n, want)
	}
}

func TestAnomalyWindowsTTL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		window, want time.Duration
	}{
		{0, time.Hour},
		{10 * time.Minute, time.Hour},
		{30 * time.Minute, time.Hour},
		{45 * time.Minute, 90 * time.Minute},
		{2 * time.Hour, 4 * time.Hour},
	}
	for _, tt := range tests {
		if got := bus.AnomalyWindowsTTL(tt.window); got != tt.want {
			t.Errorf("AnomalyWindowsTTL(%v) = %v, want %v", tt.window, got, tt.want)
		}
		var ttl time.Duration
		for _, kv := range bus.Declare(bus.TopologyOptions{AnomalyWindow: tt.window}).KeyValues {
			if kv.Bucket == bus.BucketAnomalyWindows {
				ttl = kv.TTL
			}
		}
		if ttl != tt.want {
			t.Errorf("Declare(AnomalyWindow %v): lava-anomaly-windows TTL %v, want %v", tt.window, ttl, tt.want)
		}
	}
}
