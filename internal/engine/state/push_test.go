package state_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine/state"
)

// TestCheckPush: a pushed body continues the state (same lineage, later serial) unless
// forced; any body may replace no state, and the current body is always accepted.
func TestCheckPush(t *testing.T) {
	t.Parallel()
	cur := state.Record{Serial: 5, Lineage: "L1", Digest: "d5"}
	tests := []struct {
		name    string
		cur     state.Record
		h       state.Header
		digest  string
		opts    state.PushOptions
		wantErr string
	}{
		{"no state", state.Record{}, state.Header{Version: 4, Serial: 1, Lineage: "L9"}, "x", state.PushOptions{}, ""},
		{"later serial", cur, state.Header{Version: 4, Serial: 6, Lineage: "L1"}, "d6", state.PushOptions{}, ""},
		{"the current body", cur, state.Header{Version: 4, Serial: 5, Lineage: "L1"}, "d5", state.PushOptions{}, ""},
		{"same serial, other contents", cur, state.Header{Version: 4, Serial: 5, Lineage: "L1"}, "other", state.PushOptions{},
			"the file holds serial 5 of lineage L1, the state serial 5; want a serial later than 5"},
		{"older serial", cur, state.Header{Version: 4, Serial: 2, Lineage: "L1"}, "d2", state.PushOptions{},
			"want a serial later than 5"},
		{"older serial, forced", cur, state.Header{Version: 4, Serial: 2, Lineage: "L1"}, "d2", state.PushOptions{Serial: true}, ""},
		{"other lineage", cur, state.Header{Version: 4, Serial: 9, Lineage: "L2"}, "e9", state.PushOptions{},
			"the file's lineage is L2, the state's is L1: it is another state; want lineage L1"},
		{"other lineage, --force does not do", cur, state.Header{Version: 4, Serial: 9, Lineage: "L2"}, "e9", state.PushOptions{Serial: true},
			"want lineage L1"},
		{"other lineage, forced", cur, state.Header{Version: 4, Serial: 1, Lineage: "L2"}, "e1", state.PushOptions{Lineage: true}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := state.CheckPush(key, tt.cur, tt.h, tt.digest, tt.opts)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, state.ErrConflict) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want ErrConflict containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestRecord_PushedUnapplied: the push mark holds while the record's body is the pushed one
// and the last apply left another.
func TestRecord_PushedUnapplied(t *testing.T) {
	t.Parallel()
	mark := &state.Pushed{Digest: "p", At: time.Unix(1, 0)}
	tests := []struct {
		name    string
		rec     state.Record
		applied string
		want    bool
	}{
		{"pushed, never applied", state.Record{Digest: "p", Pushed: mark}, "", true},
		{"pushed over an applied body", state.Record{Digest: "p", Pushed: mark}, "a", true},
		{"applied without a change since", state.Record{Digest: "p", Pushed: mark}, "p", false},
		{"another body written since", state.Record{Digest: "q", Pushed: mark}, "", false},
		{"never pushed", state.Record{Digest: "p"}, "", false},
		{"no body", state.Record{Pushed: mark}, "", false},
	}
	for _, tt := range tests {
		if got := tt.rec.PushedUnapplied(tt.applied); got != tt.want {
			t.Errorf("%s: PushedUnapplied = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestStore_Push: the checks of CheckPush, against the record read under compare-and-set; a
// locked state and a body that is not state v4 are refused; a replaced body is kept as a
// restore keeps it; the push mark is left and a later write of another body ends it.
func TestStore_Push(t *testing.T) {
	s, _ := newStore(t, state.Options{})
	ctx := t.Context()
	for name, b := range map[string][]byte{
		"not json":      []byte("nope"),
		"version 3":     []byte(`{"version":3,"serial":1,"lineage":"L1"}`),
		"no lineage":    []byte(`{"version":4,"serial":1}`),
		"bad resources": []byte(`{"version":4,"serial":1,"lineage":"L1","resources":{}}`),
	} {
		if _, _, err := s.Push(ctx, key, b, state.PushOptions{Lineage: true, Serial: true}); !errors.Is(err, state.ErrInvalidState) {
			t.Errorf("push of a body %s: %v, want ErrInvalidState", name, err)
		}
	}
	if _, err := s.Get(ctx, key); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("a refused push wrote a record: %v", err)
	}

	rec, replaced, err := s.Push(ctx, key, body("L1", 4), state.PushOptions{})
	if err != nil || replaced != nil || rec.Serial != 4 || rec.Lineage != "L1" || rec.Pushed == nil || rec.Pushed.Digest != rec.Digest {
		t.Fatalf("push over no state: %+v replaced %+v %v; want serial 4 of L1 marked pushed", rec, replaced, err)
	}
	first := rec
	if again, replaced, err := s.Push(ctx, key, body("L1", 4), state.PushOptions{}); err != nil || replaced != nil || again.Revision != first.Revision {
		t.Errorf("push of the current body: %+v replaced %+v %v; want nothing written", again, replaced, err)
	}
	for name, tc := range map[string]struct {
		b    []byte
		opts state.PushOptions
	}{
		"an older serial":       {body("L1", 3), state.PushOptions{}},
		"another lineage":       {body("L2", 9), state.PushOptions{Serial: true}},
		"the same serial again": {[]byte(`{"version":4,"serial":4,"lineage":"L1","resources":[],"outputs":{"o":{"value":1,"type":"number"}}}`), state.PushOptions{}},
	} {
		if _, _, err := s.Push(ctx, key, tc.b, tc.opts); !errors.Is(err, state.ErrConflict) {
			t.Errorf("push of %s: %v, want ErrConflict", name, err)
		}
	}
	if got, err := s.Get(ctx, key); err != nil || got.Digest != first.Digest {
		t.Fatalf("a refused push changed the record: %+v %v", got, err)
	}

	if _, err := s.Lock(ctx, key, state.Lock{ID: "l1", Holder: "applier"}); err != nil {
		t.Fatal(err)
	}
	var locked *state.LockedError
	if _, _, err := s.Push(ctx, key, body("L1", 5), state.PushOptions{}); !errors.As(err, &locked) || locked.Lock.ID != "l1" {
		t.Errorf("push to a locked state: %v, want a LockedError naming lock l1", err)
	}
	if err := s.Unlock(ctx, key, "l1", false); err != nil {
		t.Fatal(err)
	}

	rec, replaced, err = s.Push(ctx, key, body("L2", 1), state.PushOptions{Lineage: true})
	if err != nil || replaced == nil || replaced.Digest != first.Digest || rec.Lineage != "L2" || rec.Pushed == nil {
		t.Fatalf("forced push of another lineage: %+v replaced %+v %v", rec, replaced, err)
	}
	if rep, err := s.Replaced(ctx, key); err != nil || rep.Record.Digest != first.Digest {
		t.Errorf("the replaced record: %+v %v, want the first push's", rep, err)
	}
	// An engine's write of the same body keeps the mark; one of another body ends it.
	if rec, err = s.Put(ctx, key, body("L2", 1), ""); err != nil || rec.Pushed == nil {
		t.Errorf("Put of the pushed body: %+v %v, want the mark kept", rec, err)
	}
	if rec, err = s.Put(ctx, key, body("L2", 2), ""); err != nil || rec.Pushed != nil {
		t.Errorf("Put of a later body: %+v %v, want the mark gone", rec, err)
	}
}
