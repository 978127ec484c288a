package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/natsauth"
	"github.com/lava-operator/lava/internal/up"
)

// TestNATSCmd_credentialsAuthorizationBootstrap runs the setup an installation does: create the
// identities, print the server's authorization block, start a real nats-server from a
// configuration that includes it, create the topology with the bootstrap identity, then read
// state with lava up's state directory layout (its bootstrap seed) and fail without it.
func TestNATSCmd_credentialsAuthorizationBootstrap(t *testing.T) {
	t.Parallel()
	stateDir := t.TempDir()
	creds := filepath.Join(stateDir, up.DirNATSCredentials)

	code, out, errOut := runLava(t, "", "nats", "credentials", creds)
	if code != exitOK {
		t.Fatalf("nats credentials: exit %d: %s", code, errOut)
	}
	for _, id := range bus.Identities() {
		if !strings.Contains(out, id+" U") {
			t.Errorf("nats credentials output lacks %s's public key:\n%s", id, out)
		}
	}
	code, block, errOut := runLava(t, "", "nats", "authorization", creds)
	if code != exitOK {
		t.Fatalf("nats authorization: exit %d: %s", code, errOut)
	}
	for _, id := range bus.Identities() {
		seed, err := os.ReadFile(filepath.Join(creds, id+".nk"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(block, strings.TrimSpace(string(seed))) {
			t.Fatalf("the authorization block contains %s's seed", id)
		}
	}
	// The official NATS chart's values: the same users and encryption at rest, no seed
	// (internal/platform/natsauth TestEncryptionAtRest runs a nats-server on them).
	code, values, errOut := runLava(t, "", "nats", "authorization", creds, "--nats-chart-values", "--js-key-secret", "js-key")
	if code != exitOK {
		t.Fatalf("nats authorization --nats-chart-values: exit %d: %s", code, errOut)
	}
	keys, err := natsauth.PublicKeysDir(creds, bus.Identities()...)
	if err != nil {
		t.Fatal(err)
	}
	want, err := natsauth.ChartValuesYAML(bus.Declare(bus.TopologyOptions{}), keys, natsauth.ChartOptions{KeySecret: "js-key"})
	if err != nil {
		t.Fatal(err)
	}
	if values != want {
		t.Errorf("--nats-chart-values printed\n%s\nwant\n%s", values, want)
	}
	for _, id := range bus.Identities() {
		seed, _ := os.ReadFile(filepath.Join(creds, id+".nk"))
		if strings.Contains(values, strings.TrimSpace(string(seed))) {
			t.Fatalf("the NATS chart values contain %s's seed", id)
		}
	}
	conf := filepath.Join(t.TempDir(), "nats.conf")
	text := "listen: \"127.0.0.1:-1\"\njetstream { store_dir: \"" + filepath.Join(t.TempDir(), "js") + "\" }\n" + block
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("nats-server rejects the printed block: %v", err)
	}
	opts.NoLog, opts.NoSigs = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	url := srv.ClientURL()

	// A service identity may not create the topology; the bootstrap identity may.
	code, _, errOut = runLava(t, "", "nats", "bootstrap", "--nats-url", url, "--nats-identity", bus.ServiceApplier,
		"--nats-nkey", filepath.Join(creds, "applier.nk"), "--timeout", "2s")
	if code == exitOK {
		t.Fatal("the applier's identity created the topology")
	}
	if !strings.Contains(errOut, "bus: ensure stream") {
		t.Errorf("refused bootstrap: %s, want the failed step named", errOut)
	}
	code, out, errOut = runLava(t, "", "nats", "bootstrap", "--nats-url", url, "--state-dir", stateDir)
	if code != exitOK || !strings.Contains(out, "ensured object store lava-artifacts") {
		t.Fatalf("nats bootstrap: exit %d\n%s\n%s", code, out, errOut)
	}

	// The state command finds the credentials in the state directory.
	code, _, errOut = runLava(t, "", "state", "show", "infra/none", "--nats-url", url, "--state-dir", stateDir)
	if code != exitInvalid || !strings.Contains(errOut, "no state for infra/none") {
		t.Errorf("state show with lava up's credentials: exit %d: %s", code, errOut)
	}
	code, _, errOut = runLava(t, "", "state", "show", "infra/none", "--nats-url", url, "--state-dir", t.TempDir())
	if code != exitUnavail || !strings.Contains(strings.ToLower(errOut), "authorization") {
		t.Errorf("state show without credentials: exit %d: %s; want %d and an authorization error", code, errOut, exitUnavail)
	}
}

// TestNATSCmd_bootstrapWaitsForTheServer starts `lava nats bootstrap` before its server
// listens: it says it is waiting and creates the topology once the server is up, within
// --timeout (a new pod's first connections may be refused by a NetworkPolicy controller that
// has not seen it yet). With no server at all it gives up after --timeout (exit 3), naming the
// last attempt's failure.
func TestNATSCmd_bootstrapWaitsForTheServer(t *testing.T) {
	freePort := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	port, store := freePort(), t.TempDir()
	started := make(chan *server.Server, 1)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: store, NoLog: true, NoSigs: true})
		if err != nil {
			t.Error(err)
			started <- nil
			return
		}
		srv.Start()
		started <- srv
	}()
	code, out, errOut := runLava(t, "", "nats", "bootstrap", "--nats-url", fmt.Sprintf("nats://127.0.0.1:%d", port), "--timeout", "30s")
	if srv := <-started; srv != nil {
		defer srv.Shutdown()
	}
	if code != exitOK || !strings.Contains(out, "ensured object store lava-artifacts") || !strings.Contains(errOut, "waiting for a NATS server") {
		t.Fatalf("nats bootstrap started before its server: exit %d\n%s\n%s", code, out, errOut)
	}

	start := time.Now()
	code, _, errOut = runLava(t, "", "nats", "bootstrap", "--nats-url", fmt.Sprintf("nats://127.0.0.1:%d", freePort()), "--timeout", "2s")
	if took := time.Since(start); code != exitUnavail || took < 2*time.Second || took > 10*time.Second ||
		!strings.Contains(errOut, "no server answered within 2s: dial tcp") || !strings.Contains(errOut, "connection refused") || strings.Contains(errOut, "lava up") {
		t.Errorf("nats bootstrap without a server: exit %d after %s: %s; want %d after about 2s, naming the refused connection (and no word of lava up)", code, took.Round(time.Millisecond), errOut, exitUnavail)
	}
}
