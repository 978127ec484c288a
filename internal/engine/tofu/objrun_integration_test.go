//go:build (integration || terraform) && linux

package tofu

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// TestObjectDir_recoverErrored stores the errored.tfstate of a dead applier's CLI run only when
// nothing else can have written the state since the run began, as the stored serial + 1; every
// other errored.tfstate is kept aside as conflict-*.tfstate with an ERROR, and the stored state
// is left as it was (real JetStream state store).
func TestObjectDir_recoverErrored(t *testing.T) {
	body := func(lineage string, serial int) []byte {
		return fmt.Appendf(nil, `{"version":4,"terraform_version":"1.12.6","serial":%d,"lineage":%q,"outputs":{},"resources":[]}`, serial, lineage)
	}
	for _, tc := range []struct {
		name string
		// stored is the state before the run ("" lineage: none); written by another holder
		// after the run began when otherWrote.
		storedLineage string
		storedSerial  int
		otherWrote    bool
		// runHolds: the run's lock is still on the record.
		runHolds      bool
		erroredLin    string
		erroredSerial int
		wantSerial    uint64 // 0: moved aside
	}{
		{name: "no stored state", erroredLin: "L", erroredSerial: 1, runHolds: true, wantSerial: 1},
		{name: "same lineage, run's lock", storedLineage: "L", storedSerial: 4, runHolds: true, erroredLin: "L", erroredSerial: 5, wantSerial: 5},
		{name: "same serial, run's lock", storedLineage: "L", storedSerial: 5, runHolds: true, erroredLin: "L", erroredSerial: 5, wantSerial: 6},
		{name: "lock taken over, state unchanged", storedLineage: "L", storedSerial: 4, erroredLin: "L", erroredSerial: 5, wantSerial: 5},
		{name: "another lineage", storedLineage: "L", storedSerial: 4, runHolds: true, erroredLin: "M", erroredSerial: 9},
		{name: "older serial", storedLineage: "L", storedSerial: 7, runHolds: true, erroredLin: "L", erroredSerial: 5},
		{name: "another holder wrote since", storedLineage: "L", storedSerial: 4, otherWrote: true, erroredLin: "L", erroredSerial: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, js := tofutest.JetStream(t)
			kv := tofutest.StateBucket(t, js)
			art := tofutest.NewArtifacts(t, js)
			var logs bytes.Buffer
			store := state.NewStore(kv, art, state.Options{HolderAlive: func(_ context.Context, h string) (bool, error) {
				return h != "dead-applier", nil
			}})
			e, err := New(Config{Bin: "tofu", MirrorDir: t.TempDir(), BackendURL: "http://127.0.0.1:1", Store: store,
				Artifacts: art, WorkDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.Close() })
			key := state.Key{Namespace: "default", Name: "files"}
			ctx := t.Context()
			var start string
			if tc.storedLineage != "" {
				rec, err := store.Put(ctx, key, body(tc.storedLineage, tc.storedSerial-1), "")
				if err != nil {
					t.Fatal(err)
				}
				start = rec.Digest
			}
			if _, err := store.Lock(ctx, key, state.Lock{ID: "run-lock", Holder: "dead-applier"}); err != nil {
				t.Fatal(err)
			}
			if tc.storedLineage != "" {
				// The run's periodic write, or another holder's after taking the lock over.
				id := "run-lock"
				if tc.otherWrote {
					id = "other"
					if _, err := store.Lock(ctx, key, state.Lock{ID: id, Holder: "other-replica"}); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := store.Put(ctx, key, body(tc.storedLineage, tc.storedSerial), id); err != nil {
					t.Fatal(err)
				}
				if !tc.otherWrote && !tc.runHolds {
					start = mustGet(t, store, key).Digest
				}
				if tc.otherWrote {
					if err := store.Unlock(ctx, key, id, false); err != nil {
						t.Fatal(err)
					}
				}
			}
			if !tc.runHolds && !tc.otherWrote {
				// A plan of another replica took the dead run's lock over and released it.
				if err := store.Unlock(ctx, key, "", true); err != nil {
					t.Fatal(err)
				}
			}
			before := mustGet(t, store, key)

			o := &objectDir{e: e, key: key, path: e.objectPath(key)}
			if err := os.MkdirAll(o.runDir(), 0o700); err != nil {
				t.Fatal(err)
			}
			// A run record of a process that ended (pid 1 never started at that time).
			if err := o.writePID(pidRecord{PID: 1, Start: 1<<63 - 1, Op: "apply", Holder: "dead-applier", StartDigest: start}); err != nil {
				t.Fatal(err)
			}
			errored := body(tc.erroredLin, tc.erroredSerial)
			if err := os.WriteFile(filepath.Join(o.runDir(), erroredState), errored, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := o.recover(ctx, "next-replica"); err != nil {
				t.Fatalf("recover: %v", err)
			}
			after, got, err := store.Body(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			conflicts, _ := filepath.Glob(filepath.Join(o.path, "conflict-*.tfstate"))
			if _, err := os.Stat(o.runDir()); !os.IsNotExist(err) {
				t.Errorf("run directory left: %v", err)
			}
			if tc.wantSerial == 0 {
				// Untouched, the dead run's lock included (the next plan takes it over).
				if after.Digest != before.Digest || after.Serial != before.Serial || (after.Lock == nil) != (before.Lock == nil) {
					t.Errorf("the stored state changed from %+v to %+v", before, after)
				}
				if len(conflicts) != 1 {
					t.Fatalf("conflict files %v, want one", conflicts)
				}
				if kept, _ := os.ReadFile(conflicts[0]); !bytes.Equal(kept, errored) {
					t.Errorf("kept aside %q, want the errored.tfstate %q", kept, errored)
				}
				if !strings.Contains(logs.String(), "level=ERROR") {
					t.Errorf("no ERROR logged:\n%s", logs.String())
				}
				return
			}
			if after.Lock != nil {
				t.Errorf("lock left: %+v", after.Lock)
			}
			h, err := state.ParseHeader(got)
			if err != nil {
				t.Fatal(err)
			}
			if len(conflicts) != 0 || after.Serial != tc.wantSerial || h.Serial != tc.wantSerial || h.Lineage != tc.erroredLin {
				t.Errorf("stored %+v (body serial %d lineage %s), conflicts %v; want serial %d", after, h.Serial, h.Lineage,
					conflicts, tc.wantSerial)
			}
		})
	}
}

func mustGet(t *testing.T, s *state.Store, key state.Key) state.Record {
	t.Helper()
	r, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAlive: a process is alive only under its own start time (a reused pid is not).
func TestAlive(t *testing.T) {
	st, start, err := procStat(os.Getpid())
	if err != nil || st == "Z" {
		t.Fatalf("procStat(self) = %q, %d, %v", st, start, err)
	}
	if !alive(os.Getpid(), start) {
		t.Error("this process is not alive under its own start time")
	}
	if alive(os.Getpid(), start+1) {
		t.Error("this process is alive under another start time")
	}
}
