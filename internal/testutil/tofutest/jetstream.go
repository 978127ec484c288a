package tofutest

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"lukechampine.com/blake3"
)

// JetStream starts an in-process nats-server with JetStream on a random loopback port (store
// in t.TempDir()) and returns a connected client; both stop at cleanup.
func JetStream(t testing.TB) (*server.Server, jetstream.JetStream) {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server: not ready after 10s")
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatalf("nats connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return srv, js
}

// ObjectArtifacts is an artifact store over a JetStream object store: the digest is the
// lowercase hex BLAKE3-256 of the content and the object's name. It satisfies
// state.Artifacts; internal/bus has the production one.
type ObjectArtifacts struct {
	OS jetstream.ObjectStore
}

// NewArtifacts creates the object store "lava-artifacts" on js.
func NewArtifacts(t testing.TB, js jetstream.JetStream) *ObjectArtifacts {
	t.Helper()
	os, err := js.CreateOrUpdateObjectStore(t.Context(), jetstream.ObjectStoreConfig{Bucket: "lava-artifacts"})
	if err != nil {
		t.Fatalf("object store: %v", err)
	}
	return &ObjectArtifacts{OS: os}
}

// Put stores r's bytes under their digest (idempotent).
func (a *ObjectArtifacts) Put(ctx context.Context, r io.Reader) (string, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("artifacts: read: %w", err)
	}
	sum := blake3.Sum256(b)
	d := hex.EncodeToString(sum[:])
	if _, err := a.OS.GetInfo(ctx, d); err == nil {
		return d, nil
	}
	if _, err := a.OS.Put(ctx, jetstream.ObjectMeta{Name: d}, bytes.NewReader(b)); err != nil {
		return "", fmt.Errorf("artifacts: put %s: %w", d, err)
	}
	return d, nil
}

// Get returns the bytes stored under digest.
func (a *ObjectArtifacts) Get(ctx context.Context, digest string) (io.ReadCloser, error) {
	r, err := a.OS.Get(ctx, digest)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("artifacts: %s: not found", digest)
	}
	if err != nil {
		return nil, fmt.Errorf("artifacts: get %s: %w", digest, err)
	}
	return r, nil
}
