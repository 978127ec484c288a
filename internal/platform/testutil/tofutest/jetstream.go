package tofutest

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

// JetStream starts an in-process nats-server with JetStream ([natstest.RunJetStream]) and
// returns it with its connected client; both stop at cleanup.
func JetStream(t testing.TB) (*natstest.Server, jetstream.JetStream) {
	t.Helper()
	s := natstest.RunJetStream(t)
	return s, s.JetStream()
}

// StateBucket creates the KV bucket lava-state on js as the topology declares it
// ([bus.Declare], one replica) and returns it: what state.NewStore reads and writes.
func StateBucket(t testing.TB, js jetstream.JetStream) jetstream.KeyValue {
	t.Helper()
	for _, cfg := range bus.Declare(bus.TopologyOptions{}).KeyValues {
		if cfg.Bucket == bus.BucketState {
			kv, err := js.CreateKeyValue(t.Context(), cfg)
			if err != nil {
				t.Fatalf("state bucket: %v", err)
			}
			return kv
		}
	}
	t.Fatalf("the topology declares no bucket %s", bus.BucketState)
	return nil
}

// ObjectArtifacts is the production artifact store ([bus.Artifacts]: BLAKE3-256 hex digests
// over the "lava-artifacts" object store); it satisfies state.Artifacts.
type ObjectArtifacts struct {
	*bus.Artifacts
}

// NewArtifacts creates the object store "lava-artifacts" on js and returns the artifact
// store over it.
func NewArtifacts(t testing.TB, js jetstream.JetStream) *ObjectArtifacts {
	t.Helper()
	if _, err := js.CreateOrUpdateObjectStore(t.Context(), jetstream.ObjectStoreConfig{Bucket: bus.ObjectStoreArtifacts}); err != nil {
		t.Fatalf("object store: %v", err)
	}
	a, err := bus.NewArtifacts(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	return &ObjectArtifacts{Artifacts: a}
}

// StateBus starts an in-process nats-server with Lava's whole topology ([bus.EnsureTopology])
// and returns it with its lava-state bucket and its artifact store: what state.NewStore takes.
// Any error fails t; the server stops at cleanup.
func StateBus(t testing.TB) (*natstest.Server, jetstream.KeyValue, *bus.Artifacts) {
	t.Helper()
	srv := natstest.RunJetStream(t)
	js := srv.JetStream()
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), bus.BucketState)
	if err != nil {
		t.Fatal(err)
	}
	art, err := bus.NewArtifacts(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	return srv, kv, art
}
