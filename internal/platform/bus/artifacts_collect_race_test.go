package bus_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/platform/bus"
)

// deleteHook is a real object store that runs before() ahead of each Delete: the moment after a
// collection's re-check of the object's time and before its deletion.
type deleteHook struct {
	jetstream.ObjectStore
	before func(name string)
}

func (d deleteHook) Delete(ctx context.Context, name string) error {
	d.before(name)
	return d.ObjectStore.Delete(ctx, name)
}

// updateHook is a real object store that runs entered() as each UpdateMeta starts.
type updateHook struct {
	jetstream.ObjectStore
	entered func()
}

func (u updateHook) UpdateMeta(ctx context.Context, name string, meta jetstream.ObjectMeta) error {
	u.entered()
	return u.ObjectStore.UpdateMeta(ctx, name, meta)
}

// readBack reads digest with a bound (a broken artifact's read blocks until ctx ends).
func readBack(ctx context.Context, store *bus.Artifacts, digest string) ([]byte, error) {
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rc, err := store.Get(rctx, digest)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// TestArtifacts_refreshDuringCollectKeepsTheArtifact: a PutBytes of content whose artifact is
// old and unreferenced finds it present and only refreshes its time. If that refresh lands after
// a collection re-checked the time and before it deletes (the window between Collect's GetInfo
// and its Delete), PutBytes returns the digest as stored while the artifact is deleted: the
// caller (Store.Commit, a plan's review body) records a reference to nothing.
func TestArtifacts_refreshDuringCollectKeepsTheArtifact(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	ctx := t.Context()
	writer, err := bus.NewArtifacts(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	collector, err := bus.NewArtifacts(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("refreshed while collected "), 10000) // several chunks
	digest, err := writer.PutBytes(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // older than the collection's MinAge below
	var putErr error
	refreshed := false
	bus.WrapObjectStoreForTest(collector, func(o jetstream.ObjectStore) jetstream.ObjectStore {
		return deleteHook{ObjectStore: o, before: func(name string) {
			if name != digest || refreshed {
				return
			}
			refreshed = true
			_, putErr = writer.PutBytes(ctx, data) // another replica stores the same content now
		}}
	})
	if _, err := collector.Collect(ctx, bus.CollectOptions{MinAge: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if !refreshed {
		t.Fatal("the collection never deleted the artifact: the test exercised nothing")
	}
	if putErr != nil {
		t.Logf("PutBytes failed (%v): the caller retries, nothing is lost", putErr)
		return
	}
	got, err := readBack(ctx, writer, digest)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("PutBytes returned %s without error during a collection, then reading it: %d bytes, %v; want the %d bytes put",
			digest, len(got), err, len(data))
	}
}

// TestArtifacts_refreshRacingCollectNeverBreaksTheArtifact: the object store's UpdateMeta (the
// refresh) is a read of the object's info and then a write of that info; a collection's Delete
// that lands between the two (its delete marker, then the chunks purged) is overwritten by the
// refresh's write of the live info. The name then stands on purged chunks, and every later
// PutBytes or Put of the content finds it present and only refreshes it: the artifact stays
// broken (reads time out) until an operator deletes it, the symptom docs/operations.md
// ("A broken artifact after a lost NATS server") describes. The race is timed over a sweep of
// delays between the refresh's start and the deletion.
func TestArtifacts_refreshRacingCollectNeverBreaksTheArtifact(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	ctx := t.Context()
	for trial := range 60 {
		// The deletion starts first and the refresh delay later: the refresh reads the live info
		// before the delete marker is written and writes it back after (delay under one round
		// trip).
		delay := time.Duration(trial%30) * 25 * time.Microsecond
		writer, err := bus.NewArtifacts(ctx, js)
		if err != nil {
			t.Fatal(err)
		}
		collector, err := bus.NewArtifacts(ctx, js)
		if err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte(fmt.Sprintf("trial %d ", trial)), 30000)
		digest, err := writer.PutBytes(ctx, data)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
		release := make(chan struct{})
		bus.WrapObjectStoreForTest(writer, func(o jetstream.ObjectStore) jetstream.ObjectStore {
			return updateHook{ObjectStore: o, entered: func() {
				select {
				case <-release:
				case <-time.After(5 * time.Second):
				}
			}}
		})
		bus.WrapObjectStoreForTest(collector, func(o jetstream.ObjectStore) jetstream.ObjectStore {
			return deleteHook{ObjectStore: o, before: func(name string) {
				if name != digest {
					return
				}
				go func() {
					time.Sleep(delay)
					close(release)
				}()
			}}
		})
		putDone := make(chan error, 1)
		go func() {
			_, err := writer.PutBytes(ctx, data)
			putDone <- err
		}()
		if _, err := collector.Collect(ctx, bus.CollectOptions{MinAge: 10 * time.Millisecond,
			Keep: func(d string) bool { return d != digest }}); err != nil {
			t.Fatal(err)
		}
		<-putDone
		// Whatever the race did, storing the content again must leave it readable.
		plain, err := bus.NewArtifacts(ctx, js)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := plain.PutBytes(ctx, data); err != nil {
			t.Fatalf("trial %d (delay %v): PutBytes after the race: %v", trial, delay, err)
		}
		got, err := readBack(ctx, plain, digest)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("trial %d (delay %v): the artifact after a refresh raced a collection and a new PutBytes of the same content: %d bytes, %v; want the %d bytes put (the name stands on purged chunks)",
				trial, delay, len(got), err, len(data))
		}
	}
}

// TestArtifacts_putRacingCollect: PutBytes of content whose artifact is old and unreferenced,
// started while a collection is about to delete that artifact (from its Keep callback, after
// it listed the store), at delays swept over a few round trips. Whatever the interleaving: a
// PutBytes that returns the digest leaves the content readable under it, and a PutBytes of the
// same content afterwards always leaves it readable (never a name on purged chunks).
func TestArtifacts_putRacingCollect(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	ctx := t.Context()
	store, err := bus.NewArtifacts(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	lost, broken := 0, 0
	for trial := range 80 {
		delay := time.Duration(trial%40) * 50 * time.Microsecond
		data := bytes.Repeat([]byte(fmt.Sprintf("race %d ", trial)), 30000)
		digest, err := store.PutBytes(ctx, data)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
		putDone := make(chan error, 1)
		keep := func(d string) bool {
			if d == digest {
				go func() {
					time.Sleep(delay)
					_, err := store.PutBytes(ctx, data)
					putDone <- err
				}()
			}
			return false
		}
		if _, err := store.Collect(ctx, bus.CollectOptions{MinAge: 10 * time.Millisecond, Keep: keep}); err != nil {
			t.Fatal(err)
		}
		if err := <-putDone; err == nil {
			if got, err := readBack(ctx, store, digest); err != nil || !bytes.Equal(got, data) {
				lost++
				t.Errorf("trial %d (delay %v): PutBytes returned the digest while a collection ran, then reading it: %d bytes, %v",
					trial, delay, len(got), err)
			}
		}
		if _, err := store.PutBytes(ctx, data); err != nil {
			t.Fatalf("trial %d: PutBytes after the race: %v", trial, err)
		}
		if got, err := readBack(ctx, store, digest); err != nil || !bytes.Equal(got, data) {
			broken++
			t.Errorf("trial %d (delay %v): after a PutBytes of the same content the artifact reads %d bytes, %v (a name on purged chunks)",
				trial, delay, len(got), err)
		}
	}
	t.Logf("%d lost, %d broken in 80 trials", lost, broken)
}

// TestArtifacts_collectEndsWhileRefreshed: a collection lists lava-artifacts while another
// writer refreshes an artifact (a PutBytes of content already stored: the object store
// rewrites that object's meta message with a subject rollup). Every collection must end: the
// applier's collection loop runs under the service's context, with no deadline, so a listing
// that waits forever stops the collection of every artifact for good. Each trial is bounded by
// 15 s here (a listing takes milliseconds).
func TestArtifacts_collectEndsWhileRefreshed(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	ctx := t.Context()
	store, err := bus.NewArtifacts(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	for trial := range 80 {
		data := bytes.Repeat([]byte(fmt.Sprintf("listed %d ", trial)), 30000)
		digest, err := store.PutBytes(ctx, data)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = store.PutBytes(ctx, data)
		}()
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, err = store.Collect(cctx, bus.CollectOptions{MinAge: 10 * time.Millisecond, Keep: func(d string) bool { return d != digest }})
		cancel()
		<-done
		if err != nil {
			t.Fatalf("trial %d: a collection while an artifact was refreshed: %v", trial, err)
		}
	}
}
