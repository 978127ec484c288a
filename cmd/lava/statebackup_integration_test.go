//go:build integration

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

// envNATSCLI names the nats command line the backup test runs (make tools-natscli).
const envNATSCLI = "LAVA_NATS_CLI_BIN"

// TestStateBackup_natsStreamBackupRestore runs docs/operations.md's backup of the whole bus with
// the real nats command line: an object applied on one server; `nats stream backup` of
// KV_lava-state, then OBJ_lava-artifacts; a fresh server that has neither; `nats stream restore`
// of both, then Lava's bootstrap (bus.EnsureTopology keeps what they hold); the restored record
// names the same serial, lineage and body, and a plan of the same configuration changes nothing.
func TestStateBackup_natsStreamBackupRestore(t *testing.T) {
	bin := os.Getenv(envNATSCLI)
	if bin == "" {
		t.Fatalf("$%s is not set: build the nats command line with `make tools-natscli` and run the tests through make", envNATSCLI)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("nats command line %s: %v (make tools-natscli)", bin, err)
	}
	ctx := t.Context()
	key := state.Key{Namespace: "infra", Name: "web"}
	home := t.TempDir() // no nats context of the machine's user is read
	nats := func(url string, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append([]string{"--server", url}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("nats %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
	}

	first := newStateBus(t)
	if p := statefilePlan(t, first, key); !p.HasChanges {
		t.Fatalf("first plan: %+v, want changes", p.Summary)
	}
	rec, err := first.store.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	stateDir, artDir := filepath.Join(dir, "lava-state"), filepath.Join(dir, "lava-artifacts")
	nats(first.srv.URL(), "stream", "backup", "KV_"+bus.BucketState, stateDir)
	nats(first.srv.URL(), "stream", "backup", "OBJ_"+bus.ObjectStoreArtifacts, artDir)

	// A new server without Lava's streams: restored first, then bootstrapped.
	fresh := natstest.RunJetStream(t)
	nats(fresh.URL(), "stream", "restore", stateDir)
	nats(fresh.URL(), "stream", "restore", artDir)
	if err := bus.EnsureTopology(ctx, fresh.JetStream(), bus.TopologyOptions{}); err != nil {
		t.Fatalf("bootstrap after the restore: %v", err)
	}
	restored := stateBusOn(t, fresh)
	got, err := restored.store.Get(ctx, key)
	if err != nil || got.Serial != rec.Serial || got.Lineage != rec.Lineage || got.Digest != rec.Digest {
		t.Fatalf("restored record %+v (%v), want serial %d of lineage %s, body %s", got, err, rec.Serial, rec.Lineage, rec.Digest)
	}
	if p := statefilePlan(t, restored, key); p.HasChanges {
		t.Fatalf("plan against the restored bus: %+v, want no changes", p.Summary)
	}
}
