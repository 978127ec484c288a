package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/readmodel"
)

func TestStateCmd(t *testing.T) {
	b := newStateBus(t)
	srv, store := b.srv, b.store
	key := state.Key{Namespace: "infra", Name: "prod-vpc"}
	orphan := state.Key{Namespace: "infra", Name: "kept"}
	if _, err := store.Put(t.Context(), orphan, []byte(`{"version":4,"serial":7,"lineage":"L","resources":[]}`), ""); err != nil {
		t.Fatal(err)
	}
	if err := store.Orphan(t.Context(), orphan, "uid-old"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Lock(t.Context(), key, state.Lock{ID: "lock-1", Holder: "applier-dead/x@infra.prod-vpc", Operation: "OperationTypeApply"}); err != nil {
		t.Fatal(err)
	}
	interrupted := state.Key{Namespace: "infra", Name: "half"}
	if _, err := store.AddIntents(t.Context(), interrupted, "", []state.Intent{
		{Address: "testkit_legacy_file.a", Type: "testkit_legacy_file", Name: "a", Provider: `provider["registry.opentofu.org/example/testkit"]`},
		{Address: `testkit_legacy_file.b["k"]`, Type: "testkit_legacy_file", Name: "b", IndexKey: "k", Provider: `provider["registry.opentofu.org/example/testkit"]`},
		{Address: "testkit_legacy_file.c", Type: "testkit_legacy_file", Name: "c", Provider: `provider["registry.opentofu.org/example/testkit"]`},
		{Address: "testkit_file.d", Type: "testkit_file", Name: "d", Provider: `provider["registry.opentofu.org/example/testkit"]`,
			Identity: json.RawMessage(`{"path":"/srv/hunter2-secret-name"}`), IdentitySensitive: true},
		{Address: "testkit_file.e", Type: "testkit_file", Name: "e", Provider: `provider["registry.opentofu.org/example/testkit"]`,
			Identity: json.RawMessage(`{"path":"/srv/plain-name"}`)},
	}); err != nil {
		t.Fatal(err)
	}
	lava := func(args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), append(args, "--nats-url", srv.URL()), strings.NewReader(""), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"show locked", []string{"state", "show", "infra/prod-vpc"}, exitOK, `"holder": "applier-dead/x@infra.prod-vpc"`, ""},
		{"unlock", []string{"state", "unlock", "infra/prod-vpc"}, exitOK, `unlocked infra/prod-vpc (lock lock-1 held by "applier-dead/x@infra.prod-vpc"`, ""},
		{"unlock again", []string{"state", "unlock", "infra/prod-vpc"}, exitOK, "infra/prod-vpc is not locked", ""},
		{"show unlocked", []string{"state", "show", "infra/prod-vpc"}, exitOK, `"resource": "infra/prod-vpc"`, ""},
		{"show unknown", []string{"state", "show", "infra/none"}, exitInvalid, "", "no state for infra/none"},
		{"bad key", []string{"state", "unlock", "no-slash"}, exitUsage, "", "is not NAMESPACE/NAME"},
		{"show orphaned", []string{"state", "show", "infra/kept"}, exitOK, `"orphanedBy": "uid-old"`, ""},
		{"adopt", []string{"state", "adopt", "infra/kept"}, exitOK, "adopted infra/kept (serial 7, orphaned by uid uid-old", ""},
		{"adopt again", []string{"state", "adopt", "infra/kept"}, exitOK, "infra/kept is not orphaned", ""},
		{"show intents", []string{"state", "show", "infra/half"}, exitOK, `"address": "testkit_legacy_file.a"`, ""},
		{"show a plain identity", []string{"state", "show", "infra/half"}, exitOK, `"path": "/srv/plain-name"`, ""},
		{"show a sensitive identity masked", []string{"state", "show", "infra/half"}, exitOK, `"identity": "(sensitive value)"`, ""},
		{"forget-intent without address", []string{"state", "forget-intent", "infra/half"}, exitUsage, "", "or pass --all"},
		{"forget-intent unknown", []string{"state", "forget-intent", "infra/half", "x.y"}, exitInvalid, "", "infra/half has no create intent for x.y"},
		{"forget-intent one", []string{"state", "forget-intent", "infra/half", "testkit_legacy_file.a"}, exitOK, "forgot the create intent of testkit_legacy_file.a in infra/half", ""},
		{"forget-intent all", []string{"state", "forget-intent", "infra/half", "--all"}, exitOK, `forgot the create intent of testkit_legacy_file.b["k"] in infra/half`, ""},
		{"forget-intent none left", []string{"state", "forget-intent", "infra/half", "--all"}, exitOK, "infra/half has no create intents", ""},
	}
	if _, out, _ := lava("state", "show", "infra/half"); strings.Contains(out, "hunter2") {
		t.Fatalf("state show printed a sensitive identity:\n%s", out)
	}
	for _, tt := range tests {
		// Sequential: each step sees the previous one's effect.
		code, out, errOut := lava(tt.args...)
		if code != tt.wantCode || !strings.Contains(out, tt.wantOut) || !strings.Contains(errOut, tt.wantErr) {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q; want exit %d, stdout containing %q, stderr containing %q",
				tt.name, code, out, errOut, tt.wantCode, tt.wantOut, tt.wantErr)
		}
	}
	rec, err := store.Get(t.Context(), key)
	if err != nil || rec.Lock != nil {
		t.Fatalf("after unlock: record %+v, %v; want no lock", rec, err)
	}
	if rec, err := store.Get(t.Context(), orphan); err != nil || rec.OrphanedBy != "" || rec.Serial != 7 {
		t.Fatalf("after adopt: record %+v, %v; want the state kept without the orphan mark", rec, err)
	}
	if rec, err := store.Get(t.Context(), interrupted); err != nil || len(rec.Intents) != 0 {
		t.Fatalf("after forget-intent --all: record %+v, %v; want no intents", rec, err)
	}
	if _, out, _ := lava("state", "show", "infra/prod-vpc"); strings.Contains(out, `"lock"`) {
		t.Fatalf("show after unlock still prints a lock: %s", out)
	}
}

// TestStateRestoreCmd: `lava state restore` puts back the state body the last apply left after
// the state record was deleted, replaced by another lineage or rolled back, keeping what it
// replaced (shown by `lava state show` as "replaced"); it refuses a state a later operation
// wrote (same lineage, later serial) unless forced, a locked state, and an object whose record
// names no body.
func TestStateRestoreCmd(t *testing.T) {
	b := newStateBus(t)
	srv, kv, store := b.srv, b.kv, b.store
	ctx := t.Context()
	lava := func(args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(ctx, append(args, "--nats-url", srv.URL()), strings.NewReader(""), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	expect := func(what string, wantCode int, wantOut, wantErr string, args ...string) {
		t.Helper()
		code, out, errOut := lava(args...)
		if code != wantCode || !strings.Contains(out, wantOut) || !strings.Contains(errOut, wantErr) {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q; want exit %d, stdout containing %q, stderr containing %q",
				what, code, out, errOut, wantCode, wantOut, wantErr)
		}
	}
	body := func(lineage string, serial int) []byte {
		return fmt.Appendf(nil, `{"version":4,"serial":%d,"lineage":%q,"resources":[]}`, serial, lineage)
	}
	key := state.Key{Namespace: "infra", Name: "lost"}
	stateKey := "state." + bus.ResourceKey(key.Namespace, key.Name)
	applied, err := store.Put(ctx, key, body("L", 3), "")
	if err != nil {
		t.Fatal(err)
	}
	record := func(last *readmodel.LastApplied) {
		t.Helper()
		b, err := json.Marshal(readmodel.Record{UID: "uid-lost", Last: last})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, readmodel.RecordKey(key.Namespace, key.Name), b); err != nil {
			t.Fatal(err)
		}
	}
	digestOf := func() string {
		t.Helper()
		rec, err := store.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return rec.Digest
	}

	expect("no apply recorded", exitInvalid, "", "infra/lost has no apply recorded", "state", "restore", "infra/lost")
	record(&readmodel.LastApplied{PlanID: "p1", StateSerial: 3, StateLineage: "L"})
	expect("no body digest recorded", exitInvalid, "", "give its digest with --digest", "state", "restore", "infra/lost")
	expect("a bad digest", exitInvalid, "", "want 64 lowercase hex digits", "state", "restore", "infra/lost", "--digest", "xyz")
	record(&readmodel.LastApplied{PlanID: "p1", StateSerial: 3, StateLineage: "L", StateDigest: applied.Digest})

	// The record deleted out of band (`nats kv del`).
	if err := kv.Delete(ctx, stateKey); err != nil {
		t.Fatal(err)
	}
	expect("restore a deleted state", exitOK, "restored infra/lost to serial 3 of lineage L (body "+applied.Digest+")", "",
		"state", "restore", "infra/lost")
	if digestOf() != applied.Digest {
		t.Fatal("the deleted state was not restored")
	}
	expect("restore again", exitOK, "infra/lost already holds that state (serial 3 of lineage L)", "", "state", "restore", "infra/lost")

	// Another lineage put in its place.
	if err := kv.Delete(ctx, stateKey); err != nil {
		t.Fatal(err)
	}
	other, err := store.Put(ctx, key, body("L2", 9), "")
	if err != nil {
		t.Fatal(err)
	}
	expect("restore over another lineage", exitOK, "replaced serial 9 of lineage L2 (body "+other.Digest+")", "", "state", "restore", "infra/lost")
	expect("show the replaced record", exitOK, `"replaced": {`, "", "state", "show", "infra/lost")
	if rep, err := store.Replaced(ctx, key); err != nil || rep.Record.Digest != other.Digest {
		t.Fatalf("replaced record %+v %v, want the L2 state's", rep, err)
	}

	// A later serial of the same lineage is a later operation's work: not restored unless forced.
	later, err := store.Put(ctx, key, body("L", 5), "")
	if err != nil {
		t.Fatal(err)
	}
	expect("a later serial", exitInvalid, "", "infra/lost holds serial 5 of lineage L, later than the serial 3 to restore", "state", "restore", "infra/lost")
	if digestOf() != later.Digest {
		t.Fatal("a refused restore changed the state")
	}
	// A locked state: an operation is running.
	if _, err := store.Lock(ctx, key, state.Lock{ID: "l1", Holder: "someone"}); err != nil {
		t.Fatal(err)
	}
	expect("a locked state", exitInvalid, "", `is locked by "someone"`, "state", "restore", "infra/lost", "--force")
	if err := store.Unlock(ctx, key, "l1", false); err != nil {
		t.Fatal(err)
	}
	expect("a later serial, forced", exitOK, "replaced serial 5 of lineage L", "", "state", "restore", "infra/lost", "--force")
	if digestOf() != applied.Digest {
		t.Fatal("the forced restore did not restore the last applied state")
	}
}

// TestStatePullPushCmd: `lava state pull` writes the stored body byte for byte (mode 0600 to a
// file); `lava state push` takes a state file, refusing bad input, another lineage and an
// older serial unless forced, and a locked state, each with an error naming what it wanted.
func TestStatePullPushCmd(t *testing.T) {
	b := newStateBus(t)
	srv, store := b.srv, b.store
	ctx := t.Context()
	dir := t.TempDir()
	lava := func(stdin string, args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(ctx, append(args, "--nats-url", srv.URL()), strings.NewReader(stdin), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	expect := func(what string, wantCode int, wantOut, wantErr string, args ...string) {
		t.Helper()
		code, out, errOut := lava("", args...)
		if code != wantCode || !strings.Contains(out, wantOut) || !strings.Contains(errOut, wantErr) {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q; want exit %d, stdout containing %q, stderr containing %q",
				what, code, out, errOut, wantCode, wantOut, wantErr)
		}
	}
	file := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stateFile := func(lineage string, serial int) string {
		return fmt.Sprintf(`{"version":4,"terraform_version":"1.12.6","serial":%d,"lineage":%q,"outputs":{},"resources":[]}`, serial, lineage)
	}
	key := state.Key{Namespace: "infra", Name: "moved"}
	if _, err := store.Put(ctx, key, []byte(stateFile("L", 3)), ""); err != nil {
		t.Fatal(err)
	}

	expect("pull of no state", exitInvalid, "", "no state for infra/none", "state", "pull", "infra/none")
	code, out, errOut := lava("", "state", "pull", "infra/moved")
	if code != exitOK || out != stateFile("L", 3) {
		t.Fatalf("pull to stdout: exit %d, stdout %q, stderr %q; want the stored body", code, out, errOut)
	}
	pulled := filepath.Join(dir, "pulled.tfstate")
	if err := os.WriteFile(pulled, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	expect("pull to a file", exitOK, "wrote serial 3 of lineage L of infra/moved to "+pulled, "", "state", "pull", "infra/moved", "-o", pulled)
	if got, err := os.ReadFile(pulled); err != nil || string(got) != stateFile("L", 3) {
		t.Fatalf("pulled file %q %v", got, err)
	}
	if fi, err := os.Stat(pulled); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("pulled file mode %v %v, want 0600", fi.Mode(), err)
	}

	expect("push of no JSON", exitInvalid, "", "want the JSON OpenTofu writes with tofu state pull: version 4",
		"state", "push", "infra/moved", file("bad.json", "not json"))
	expect("push of version 3", exitInvalid, "", "format version 3, want 4", "state", "push", "infra/moved",
		file("v3.json", `{"version":3,"serial":4,"lineage":"L"}`))
	expect("push of a missing file", exitInvalid, "", "no such file", "state", "push", "infra/moved", filepath.Join(dir, "none"))
	expect("push of another lineage", exitInvalid, "", "the file's lineage is L2, the state's is L: it is another state; want lineage L",
		"state", "push", "infra/moved", file("l2.json", stateFile("L2", 9)))
	expect("push of an older serial", exitInvalid, "", "want a serial later than 3 (--force-lineage replaces another lineage, --force an older serial)",
		"state", "push", "infra/moved", file("old.json", stateFile("L", 2)))
	if _, err := store.Lock(ctx, key, state.Lock{ID: "l1", Holder: "applier-1"}); err != nil {
		t.Fatal(err)
	}
	expect("push to a locked state", exitInvalid, "", `is locked by "applier-1"`, "state", "push", "infra/moved", file("l4.json", stateFile("L", 4)))
	if err := store.Unlock(ctx, key, "l1", false); err != nil {
		t.Fatal(err)
	}
	if rec, err := store.Get(ctx, key); err != nil || rec.Serial != 3 || rec.Pushed != nil {
		t.Fatalf("refused pushes changed the record: %+v %v", rec, err)
	}
	expect("push of a later serial", exitOK, "pushed serial 4 of lineage L to infra/moved", "", "state", "push", "infra/moved", file("l4.json", stateFile("L", 4)))
	expect("push again", exitOK, "infra/moved already holds that state (serial 4 of lineage L)", "", "state", "push", "infra/moved", file("l4.json", stateFile("L", 4)))
	if code, out, errOut := lava(stateFile("L2", 1), "state", "push", "infra/moved", "-", "--force-lineage"); code != exitOK ||
		!strings.Contains(out, "replaced serial 4 of lineage L") {
		t.Fatalf("forced push of another lineage from stdin: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	rec, err := store.Get(ctx, key)
	if err != nil || rec.Lineage != "L2" || rec.Pushed == nil || rec.Pushed.Digest != rec.Digest {
		t.Fatalf("after the forced push: %+v %v; want lineage L2 marked pushed", rec, err)
	}
	expect("show the push mark", exitOK, `"pushed": {`, "", "state", "show", "infra/moved")
}
