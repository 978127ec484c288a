package state_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lava-operator/lava/internal/engine/state"
)

// TestStore_Commit_lostLockWritesNothing: an applier's lock is taken over (its lease ended: a
// long pause, a partition from NATS), the new holder applies and unlocks, and then the first
// applier, still running, saves with the lock it held. A locked state accepts only its lock's
// writes; an unlocked one must not accept the writes of a lock that is gone either, or the
// stale applier's body (a newer serial of its own, built from the state before the takeover)
// replaces what the new holder wrote, and its intents join the record. A writer that holds no
// lock ("") is unaffected.
func TestStore_Commit_lostLockWritesNothing(t *testing.T) {
	var alive atomic.Bool
	alive.Store(true)
	s, _ := newStore(t, state.Options{HolderAlive: func(_ context.Context, holder string) (bool, error) {
		return holder != "applier-1" || alive.Load(), nil
	}})
	ctx := t.Context()
	if _, err := s.Lock(ctx, key, state.Lock{ID: "A", Holder: "applier-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, key, body("L1", 1), "A"); err != nil {
		t.Fatal(err)
	}
	alive.Store(false) // applier-1's lease ended; it runs on
	if _, err := s.Lock(ctx, key, state.Lock{ID: "B", Holder: "applier-2"}); err != nil {
		t.Fatalf("take-over: %v", err)
	}
	newer := []byte(strings.Replace(string(body("L1", 2)), `"resources":[]`, `"resources":[{"mode":"managed","type":"testkit_file","name":"made_by_b","instances":[]}]`, 1))
	if _, err := s.Put(ctx, key, newer, "B"); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(ctx, key, "B", false); err != nil {
		t.Fatal(err)
	}
	_, err := s.Commit(ctx, key, body("L1", 3), "A", nil, []state.Intent{{Address: "testkit_file.stale"}})
	if err == nil {
		t.Errorf("Commit with the lock A, which applier-2 took over and released, was accepted")
	} else if !errors.Is(err, state.ErrLocked) {
		t.Errorf("Commit with a lost lock: %v, want an error wrapping ErrLocked (retrySave gives up on it)", err)
	}
	if _, err := s.AddIntents(ctx, key, "A", []state.Intent{{Address: "testkit_file.stale2"}}); err == nil {
		t.Errorf("AddIntents with the lost lock A was accepted")
	}
	rec, b, err := s.Body(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "made_by_b") || rec.Serial != 2 || len(rec.Intents) != 0 {
		t.Errorf("record after the stale writes: serial %d, intents %v, body %s; want applier-2's serial 2 body and no intents", rec.Serial, rec.Intents, b)
	}
	// A writer without a lock still writes an unlocked state.
	if _, err := s.Put(ctx, key, body("L1", 4), ""); err != nil {
		t.Errorf("Put without a lock on an unlocked state: %v", err)
	}
}
