package bus_test

import (
	"path/filepath"
	"testing"

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
