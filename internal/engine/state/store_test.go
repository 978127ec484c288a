package state_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// clock is a settable test clock.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func newStore(t *testing.T, opts state.Options) (*state.Store, *clock) {
	t.Helper()
	_, js := tofutest.JetStream(t)
	kv := tofutest.StateBucket(t, js)
	c := &clock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	if opts.Now == nil {
		opts.Now = c.now
	}
	return state.NewStore(kv, tofutest.NewArtifacts(t, js), opts), c
}

func body(lineage string, serial int) []byte {
	return fmt.Appendf(nil, `{"version":4,"terraform_version":"1.12.6","serial":%d,"lineage":%q,"outputs":{},"resources":[]}`, serial, lineage)
}

var key = state.Key{Namespace: "team-a", Name: "web.prod"}

func TestStore_Put_serialAndLineage(t *testing.T) {
	s, _ := newStore(t, state.Options{})
	ctx := t.Context()
	if _, err := s.Get(ctx, key); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("Get of a new key: %v, want ErrNotFound", err)
	}
	tests := []struct {
		name    string
		body    []byte
		wantErr error
		serial  uint64
	}{
		{"first state", body("L1", 1), nil, 1},
		{"serial grows", body("L1", 3), nil, 3},
		{"same serial again", body("L1", 3), nil, 3},
		{"serial goes backwards", body("L1", 2), state.ErrConflict, 3},
		{"lineage changes", body("L2", 9), state.ErrConflict, 3},
		{"not state v4", []byte(`{"version":3,"serial":9,"lineage":"L1"}`), state.ErrInvalidState, 3},
		{"not json", []byte(`nope`), state.ErrInvalidState, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Put(ctx, key, tt.body, "")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Put: %v, want %v", err, tt.wantErr)
			}
			r, got, err := s.Body(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if r.Serial != tt.serial || r.Lineage != "L1" || string(got) != string(body("L1", int(tt.serial))) {
				t.Fatalf("after Put: serial %d lineage %s body %s", r.Serial, r.Lineage, got)
			}
		})
	}
}

func TestStore_Lock(t *testing.T) {
	alive := atomic.Bool{}
	alive.Store(true)
	s, c := newStore(t, state.Options{LockTTL: time.Minute,
		HolderAlive: func(context.Context, string) (bool, error) { return alive.Load(), nil }})
	ctx := t.Context()

	l, err := s.Lock(ctx, key, state.Lock{ID: "a", Holder: "replica-1", Operation: "OperationTypeApply"})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Created.Equal(c.now()) {
		t.Errorf("lock created %v, want the store's clock %v", l.Created, c.now())
	}
	if _, err := s.Lock(ctx, key, state.Lock{ID: "a", Holder: "replica-1"}); err != nil {
		t.Errorf("re-lock with the same id: %v", err)
	}
	var le *state.LockedError
	if _, err := s.Lock(ctx, key, state.Lock{ID: "b", Holder: "replica-2"}); !errors.As(err, &le) || le.Lock.ID != "a" || le.Lock.Holder != "replica-1" {
		t.Fatalf("second lock: %v, want LockedError naming lock a of replica-1", err)
	}
	if _, err := s.Put(ctx, key, body("L1", 1), "b"); !errors.Is(err, state.ErrLocked) {
		t.Fatalf("Put under another lock id: %v, want ErrLocked", err)
	}
	if _, err := s.Put(ctx, key, body("L1", 1), ""); !errors.Is(err, state.ErrLocked) {
		t.Fatalf("Put without the lock: %v, want ErrLocked", err)
	}
	if _, err := s.Put(ctx, key, body("L1", 1), "a"); err != nil {
		t.Fatalf("Put by the holder: %v", err)
	}

	c.advance(2 * time.Minute)
	if _, err := s.Lock(ctx, key, state.Lock{ID: "b", Holder: "replica-2"}); !errors.Is(err, state.ErrLocked) {
		t.Fatalf("lock past its TTL with a live holder: %v, want ErrLocked", err)
	}
	c.advance(-2 * time.Minute) // the lock is young again: a gone holder loses it whatever its age
	alive.Store(false)
	if _, err := s.Lock(ctx, key, state.Lock{ID: "b", Holder: "replica-2"}); err != nil {
		t.Fatalf("take-over of a young lock whose holder is gone: %v", err)
	}
	if err := s.Unlock(ctx, key, "a", false); !errors.As(err, &le) || le.Lock.ID != "b" {
		t.Fatalf("unlock with the old id: %v, want LockedError naming b", err)
	}
	r, err := s.Get(ctx, key)
	if err != nil || r.Lock == nil || r.Lock.ID != "b" || r.Serial != 1 {
		t.Fatalf("record %+v, %v: want lock b and serial 1 kept", r, err)
	}
	if err := s.Unlock(ctx, key, "b", false); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(ctx, key, "b", false); err != nil {
		t.Errorf("unlock of an unlocked state: %v", err)
	}
	if _, err := s.Lock(ctx, key, state.Lock{ID: "c", Holder: "cli"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(ctx, key, "", true); err != nil {
		t.Fatalf("forced unlock: %v", err)
	}
	if r, _ := s.Get(ctx, key); r.Lock != nil {
		t.Fatalf("lock %+v survived a forced unlock", r.Lock)
	}
}

func TestStore_Lock_noHolderCheck(t *testing.T) {
	s, c := newStore(t, state.Options{LockTTL: time.Minute})
	ctx := t.Context()
	if _, err := s.Lock(ctx, key, state.Lock{ID: "a", Holder: "x"}); err != nil {
		t.Fatal(err)
	}
	c.advance(59 * time.Second)
	if _, err := s.Lock(ctx, key, state.Lock{ID: "b", Holder: "y"}); !errors.Is(err, state.ErrLocked) {
		t.Fatalf("lock before its TTL: %v, want ErrLocked", err)
	}
	c.advance(2 * time.Second)
	if _, err := s.Lock(ctx, key, state.Lock{ID: "b", Holder: "y"}); err != nil {
		t.Fatalf("lock after its TTL: %v", err)
	}
}

// TestStore_Lock_holderJudgement: a holder the HolderAlive check cannot judge keeps its lock
// for LockTTL; a check that fails keeps the lock held whatever its age.
func TestStore_Lock_holderJudgement(t *testing.T) {
	verdict := atomic.Value{}
	verdict.Store(state.ErrHolderUnknown)
	s, c := newStore(t, state.Options{LockTTL: time.Minute, HolderAlive: func(context.Context, string) (bool, error) {
		return true, verdict.Load().(error)
	}})
	ctx := t.Context()
	if _, err := s.Lock(ctx, key, state.Lock{ID: "a", Holder: "cli"}); err != nil {
		t.Fatal(err)
	}
	c.advance(59 * time.Second)
	if _, err := s.Lock(ctx, key, state.Lock{ID: "b", Holder: "y"}); !errors.Is(err, state.ErrLocked) {
		t.Fatalf("unknown holder's lock before its TTL: %v, want ErrLocked", err)
	}
	verdict.Store(errors.New("lava-leases unreachable"))
	c.advance(time.Hour)
	if _, err := s.Lock(ctx, key, state.Lock{ID: "b", Holder: "y"}); !errors.Is(err, state.ErrLocked) {
		t.Fatalf("lock whose holder cannot be checked: %v, want ErrLocked", err)
	}
	verdict.Store(state.ErrHolderUnknown)
	if _, err := s.Lock(ctx, key, state.Lock{ID: "b", Holder: "y"}); err != nil {
		t.Fatalf("unknown holder's lock after its TTL: %v", err)
	}
}

func TestStore_Lock_concurrent(t *testing.T) {
	s, _ := newStore(t, state.Options{})
	ctx := t.Context()
	var wg sync.WaitGroup
	var won atomic.Int32
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			_, err := s.Lock(ctx, key, state.Lock{ID: fmt.Sprint(i), Holder: fmt.Sprint("h", i)})
			switch {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, state.ErrLocked):
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if won.Load() != 1 {
		t.Fatalf("%d lockers won, want exactly 1", won.Load())
	}
}

func TestStore_Forget(t *testing.T) {
	s, _ := newStore(t, state.Options{})
	ctx := t.Context()
	if _, err := s.Put(ctx, key, body("L1", 4), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lock(ctx, key, state.Lock{ID: "a", Holder: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, key); !errors.Is(err, state.ErrLocked) {
		t.Fatalf("Forget of a locked state: %v, want ErrLocked", err)
	}
	if err := s.Unlock(ctx, key, "a", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.History(ctx, key); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("History before Forget: %v, want ErrNotFound", err)
	}
	if err := s.Forget(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, key); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("Get after Forget: %v, want ErrNotFound", err)
	}
	h, err := s.History(ctx, key)
	if err != nil || h.Record.Serial != 4 || h.Record.Lineage != "L1" || h.Record.Digest == "" {
		t.Fatalf("History after Forget: %+v, %v", h, err)
	}
	// A new state can start afresh (a new lineage) after a destroy.
	if _, err := s.Put(ctx, key, body("L2", 1), ""); err != nil {
		t.Fatalf("Put after Forget: %v", err)
	}
	if err := s.Forget(ctx, state.Key{Namespace: "x", Name: "never"}); err != nil {
		t.Fatalf("Forget of an unknown key: %v", err)
	}
}

// TestStore_Restore: a body the store held before becomes the current state again whatever
// the current lineage and serial (after the record was forgotten, or replaced by another
// lineage or an older serial), keeping the intents and the orphan mark; a current body of
// another digest is kept as the replaced record; restoring the current body writes nothing; a
// locked state and an unknown digest are refused.
func TestStore_Restore(t *testing.T) {
	s, _ := newStore(t, state.Options{})
	ctx := t.Context()
	applied, err := s.Put(ctx, key, body("L1", 3), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, key); err != nil {
		t.Fatal(err)
	}
	rec, replaced, err := s.Restore(ctx, key, applied.Digest)
	if err != nil || replaced != nil || rec.Digest != applied.Digest || rec.Serial != 3 || rec.Lineage != "L1" {
		t.Fatalf("restore of a forgotten state: %+v replaced %+v %v", rec, replaced, err)
	}
	if _, err := s.Replaced(ctx, key); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Replaced after restoring over nothing: %v, want ErrNotFound", err)
	}
	if _, replaced, err := s.Restore(ctx, key, applied.Digest); err != nil || replaced != nil {
		t.Errorf("restoring the current body: replaced %+v %v, want nothing", replaced, err)
	}

	// Another lineage (which Put refuses over an existing state) is replaced, and kept.
	if err := s.Forget(ctx, key); err != nil {
		t.Fatal(err)
	}
	other, err := s.Put(ctx, key, body("L2", 9), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddIntents(ctx, key, "", []state.Intent{{Address: "x.y", Type: "x", Name: "y"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Orphan(ctx, key, "uid-old"); err != nil {
		t.Fatal(err)
	}
	rec, replaced, err = s.Restore(ctx, key, applied.Digest)
	if err != nil || replaced == nil || replaced.Digest != other.Digest || rec.Lineage != "L1" || rec.Serial != 3 ||
		len(rec.Intents) != 1 || rec.OrphanedBy != "uid-old" {
		t.Fatalf("restore over another lineage: %+v replaced %+v %v; want L1 serial 3 with the intent and the orphan mark kept", rec, replaced, err)
	}
	if rep, err := s.Replaced(ctx, key); err != nil || rep.Record.Digest != other.Digest || rep.Record.Lineage != "L2" {
		t.Errorf("the replaced record: %+v %v, want the L2 state", rep, err)
	}
	if got, err := s.Get(ctx, key); err != nil || got.Digest != applied.Digest {
		t.Errorf("record after the restore: %+v %v", got, err)
	}

	// A locked state is never restored; neither is a body the store does not hold.
	if _, err := s.Lock(ctx, key, state.Lock{ID: "l1", Holder: "h"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Restore(ctx, key, other.Digest); !errors.Is(err, state.ErrLocked) {
		t.Errorf("restore of a locked state: %v, want ErrLocked", err)
	}
	if err := s.Unlock(ctx, key, "l1", false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Restore(ctx, key, strings.Repeat("0", 64)); err == nil {
		t.Error("a digest the store does not hold was restored")
	}
}

func TestKey(t *testing.T) {
	tests := []struct {
		in      string
		wantErr bool
	}{
		{"default/web", false},
		{"team-a/web.prod.v2", false},
		{"default", true},
		{"Default/web", true},
		{"default/web..x", true},
		{"a.b/web", true},
		{"default/", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			k, err := state.ParseKey(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseKey(%q) = %v, %v", tt.in, k, err)
			}
			if err == nil && k.String() != tt.in {
				t.Fatalf("String() = %q, want %q", k.String(), tt.in)
			}
		})
	}
}
