package bus_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

func TestConnect(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	nc, js, err := bus.Connect(bus.ConnectOptions{URL: srv.URL(), Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := js.AccountInfo(t.Context()); err != nil {
		t.Fatalf("jetstream over the new connection: %v", err)
	}
	for _, bad := range []bus.ConnectOptions{
		{},
		{URL: srv.URL(), CredsFile: filepath.Join(t.TempDir(), "missing.creds")},
		{URL: "nats://127.0.0.1:1"},
	} {
		if nc, _, err := bus.Connect(bad); err == nil {
			nc.Close()
			t.Errorf("Connect(%+v) succeeded", bad)
		}
	}
}

// A first connection that waits for its server names why the server did not answer, not
// only that none did: a Job's log then says what to fix.
func TestConnect_waitNamesTheLastFailure(t *testing.T) {
	t.Parallel()
	var waited []error
	nc, _, err := bus.Connect(bus.ConnectOptions{URL: "nats://127.0.0.1:1", Name: "test", Wait: 2500 * time.Millisecond,
		OnWait: func(err error) { waited = append(waited, err) }})
	if err == nil {
		nc.Close()
		t.Fatal("Connect to a port nothing listens on succeeded")
	}
	if !strings.Contains(err.Error(), "no server answered within 2.5s") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Connect: %v, want it to name the wait and the refused connection", err)
	}
	if len(waited) != 1 || waited[0] == nil {
		t.Errorf("OnWait called with %v, want once with the first attempt's error", waited)
	}
}
