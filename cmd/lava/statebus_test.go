package main

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// stateBus is a JetStream server with Lava's topology, and the state store over its lava-state
// bucket and artifact store, as the state and plan commands read them.
type stateBus struct {
	srv   *natstest.Server
	kv    jetstream.KeyValue
	art   *bus.Artifacts
	store *state.Store
}

// newStateBus starts the server (stopped with the test) and opens the buckets; any error fails
// the test.
func newStateBus(t *testing.T) stateBus {
	t.Helper()
	srv, kv, art := tofutest.StateBus(t)
	return stateBus{srv: srv, kv: kv, art: art, store: state.NewStore(kv, art, state.Options{})}
}

// stateBusOn opens the buckets of srv, whose topology exists already (restored, bootstrapped);
// any error fails the test.
func stateBusOn(t *testing.T, srv *natstest.Server) stateBus {
	t.Helper()
	kv, err := srv.JetStream().KeyValue(t.Context(), bus.BucketState)
	if err != nil {
		t.Fatal(err)
	}
	art, err := bus.NewArtifacts(t.Context(), srv.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	return stateBus{srv: srv, kv: kv, art: art, store: state.NewStore(kv, art, state.Options{})}
}
