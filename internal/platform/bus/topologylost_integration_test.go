//go:build integration

package bus_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

// The server comes back with an empty store (an emptyDir lost with its pods): the consumer is
// gone without its deletion being announced, and every pull fails with "no heartbeat" or "no
// responders". Consume returns an error naming the missing consumer and stream (the service
// exits and, restarted, its topology check names everything missing) instead of pulling in
// vain while the service looks healthy. A consumer deleted while its service runs ends Consume
// with the same error.
func TestConsume_topologyLostEndsConsumeNamingIt(t *testing.T) {
	t.Parallel()
	store := t.TempDir()
	srv := natstest.RunBinary(t, store)
	ctx := t.Context()
	_, js := srv.Connect(t)
	if err := bus.EnsureTopology(ctx, js, testTopology); err != nil {
		t.Fatal(err)
	}
	_, cjs := srv.Connect(t)
	done := make(chan error, 1)
	go func() {
		done <- bus.Consume(ctx, cjs, applierPhases(nil), func(context.Context, *bus.Message) error { return nil })
	}()
	time.Sleep(500 * time.Millisecond) // pulling

	srv.Stop()
	entries, err := os.ReadDir(store)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(store, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	srv.Start()
	select {
	case err := <-done:
		want := "consumer " + bus.ServiceApplier + " on " + bus.StreamPhases
		if !errors.Is(err, bus.ErrTopologyMissing) || !strings.Contains(err.Error(), want) {
			t.Errorf("Consume after the store was lost: %v, want %v naming %q", err, bus.ErrTopologyMissing, want)
		}
		t.Logf("Consume ended %s after the server came back empty: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(30 * time.Second):
		t.Fatal("Consume still pulls 30s after the server came back without its consumer")
	}

	// Deleted while it runs.
	if err := bus.EnsureTopology(ctx, js, testTopology); err != nil {
		t.Fatal(err)
	}
	go func() {
		done <- bus.Consume(ctx, cjs, applierPhases(nil), func(context.Context, *bus.Message) error { return nil })
	}()
	time.Sleep(500 * time.Millisecond)
	if err := js.DeleteConsumer(ctx, bus.StreamPhases, bus.ServiceApplier); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, bus.ErrTopologyMissing) {
			t.Errorf("Consume after its consumer was deleted: %v, want %v", err, bus.ErrTopologyMissing)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Consume still pulls 30s after its consumer was deleted")
	}
}
