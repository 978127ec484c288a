package bus_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lava-operator/lava/internal/platform/bus"
)

// Holders on separate connections race for one resource's lease; at no time do two hold it.
func TestLeases_twoHoldersNeverHoldOneLease(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	ctx := t.Context()
	reg := prometheus.NewRegistry()
	m, err := bus.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	var holding, overlaps, acquired atomic.Int32
	var wg sync.WaitGroup
	for h := range 4 {
		_, hjs := natsConnect(t, js)
		leases, err := bus.NewLeases(ctx, hjs, "holder-"+itoa(h), m)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for range 40 {
				lease, err := leases.Acquire(ctx, "infra", "web.prod")
				if errors.Is(err, bus.ErrLeaseHeld) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if holding.Add(1) > 1 {
					overlaps.Add(1)
				}
				acquired.Add(1)
				time.Sleep(time.Millisecond)
				holding.Add(-1)
				if err := lease.Release(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if overlaps.Load() != 0 {
		t.Fatalf("%d overlapping holds", overlaps.Load())
	}
	if a := metricValue(t, reg, "lava_bus_lease_acquired_total", nil); a != float64(acquired.Load()) || a == 0 {
		t.Errorf("lease_acquired_total %v, acquisitions %d", a, acquired.Load())
	}
	if metricValue(t, reg, "lava_bus_lease_contended_total", nil) == 0 {
		t.Error("no contention recorded; the holders did not race")
	}
	if metricValue(t, reg, "lava_bus_leases_held", nil) != 0 {
		t.Error("leases_held is not back to 0")
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) != 0 {
		t.Errorf("metric lint: %v %v", problems, err)
	}
}

// A holder that stops renewing loses the lease after the bucket TTL; another takes it; the
// old holder's renew and release then fail with ErrLeaseLost and leave the new lease alone.
func TestLeases_expiryAndTakeover(t *testing.T) {
	t.Parallel()
	opts := testTopology
	opts.LeaseTTL = time.Second
	_, js := startBus(t, opts)
	ctx := t.Context()
	a, err := bus.NewLeases(ctx, js, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, bjs := natsConnect(t, js)
	b, err := bus.NewLeases(ctx, bjs, "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	la, err := a.Acquire(ctx, "infra", "vpc")
	if err != nil {
		t.Fatal(err)
	}
	if err := la.Renew(ctx); err != nil {
		t.Fatalf("renew while held: %v", err)
	}
	if _, err := b.Acquire(ctx, "infra", "vpc"); !errors.Is(err, bus.ErrLeaseHeld) {
		t.Fatalf("b acquired a held lease: %v", err)
	}
	var lb *bus.Lease
	eventually(t, 10*time.Second, "the lease to expire", func() bool {
		lb, err = b.Acquire(ctx, "infra", "vpc")
		return err == nil
	})
	if la.Valid() {
		t.Fatal("a still believes it holds the lease after b acquired it")
	}
	if err := la.Renew(ctx); !errors.Is(err, bus.ErrLeaseLost) {
		t.Fatalf("a renewed a lost lease: %v", err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatalf("release after loss: %v", err)
	}
	if err := lb.Renew(ctx); err != nil {
		t.Fatalf("b's lease was disturbed by a: %v", err)
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx, "infra", "vpc"); err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
}

// Hold renews while fn runs longer than the TTL, and cancels fn when the lease is taken away.
func TestLeases_holdRenewsAndCancelsOnLoss(t *testing.T) {
	t.Parallel()
	opts := testTopology
	opts.LeaseTTL = time.Second
	_, js := startBus(t, opts)
	ctx := t.Context()
	ls, err := bus.NewLeases(ctx, js, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := bus.NewLeases(ctx, js, "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	err = ls.Hold(ctx, "infra", "long", func(ctx context.Context) error {
		time.Sleep(2500 * time.Millisecond) // 2.5 TTLs
		if _, err := other.Acquire(ctx, "infra", "long"); !errors.Is(err, bus.ErrLeaseHeld) {
			t.Errorf("lease not held after 2.5 TTLs of renewal: %v", err)
		}
		return ctx.Err()
	})
	if err != nil {
		t.Fatalf("Hold: %v", err)
	}

	kv, err := js.KeyValue(ctx, bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	err = ls.Hold(ctx, "infra", "stolen", func(fctx context.Context) error {
		// An operator deletes the lease: the next renewal finds it gone.
		if err := kv.Purge(ctx, bus.ResourceKey("infra", "stolen")); err != nil {
			return err
		}
		<-fctx.Done()
		return context.Cause(fctx)
	})
	if !errors.Is(err, bus.ErrLeaseLost) {
		t.Fatalf("Hold with a stolen lease: %v, want ErrLeaseLost", err)
	}
}

func TestWatermarks_olderGenerationIsStaleAndSurvivesRebind(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	ctx := t.Context()
	wm, err := bus.NewWatermarks(ctx, js, bus.ServiceApplier, nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		gen  int64
		want bool
	}{{3, true}, {3, true}, {2, false}, {5, true}, {4, false}, {1, false}, {5, true}, {6, true}}
	for _, s := range steps {
		got, err := wm.Advance(ctx, "infra", "web.prod", s.gen)
		if err != nil || got != s.want {
			t.Fatalf("Advance(%d) = %v, %v; want %v", s.gen, got, err, s.want)
		}
	}
	// Another service's watermark and another resource are independent.
	synth, err := bus.NewWatermarks(ctx, js, bus.ServiceSynth, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := synth.Advance(ctx, "infra", "web.prod", 1); !ok || err != nil {
		t.Fatalf("synth's watermark: %v %v", ok, err)
	}
	if ok, err := wm.Advance(ctx, "infra", "web-prod", 1); !ok || err != nil {
		t.Fatalf("another resource: %v %v", ok, err)
	}
	// A new process (new binding, new connection) sees the same watermark.
	_, js2 := natsConnect(t, js)
	again, err := bus.NewWatermarks(ctx, js2, bus.ServiceApplier, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g, _, err := again.Get(ctx, "infra", "web.prod"); g != 6 || err != nil {
		t.Fatalf("watermark after rebind %d, %v; want 6", g, err)
	}
	// Concurrent advances from many replicas end at the maximum.
	var wg sync.WaitGroup
	for g := int64(7); g <= 30; g++ {
		wg.Go(func() {
			if _, err := again.Advance(ctx, "infra", "race", g); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if g, _, _ := again.Get(ctx, "infra", "race"); g != 30 {
		t.Fatalf("after concurrent advances: %d, want 30", g)
	}
}

// A panicking fn still releases the lease.
func TestLeases_holdReleasesOnPanic(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	ctx := t.Context()
	ls, err := bus.NewLeases(ctx, js, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not propagate")
			}
		}()
		_ = ls.Hold(ctx, "infra", "boom", func(context.Context) error { panic("handler bug") })
	}()
	lease, err := ls.Acquire(ctx, "infra", "boom")
	if err != nil {
		t.Fatalf("lease still held after the panic: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
