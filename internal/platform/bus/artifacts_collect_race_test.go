package bus_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/platform/bus"
)

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

// TestArtifacts_putRacingCollect: PutBytes of content whose artifact is old and unreferenced,
// started while a collection is about to delete that artifact (from its Keep callback, after
// it listed the store), at delays swept over a few round trips. Whatever the interleaving: a
// PutBytes that returns the digest leaves the content readable under it, and a PutBytes of the
// same content afterwards always leaves it readable (never a name on purged chunks).
func TestArtifacts_putRacingCollect(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store, _ := newArtifacts(t)
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
	ctx := t.Context()
	store, _ := newArtifacts(t)
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
