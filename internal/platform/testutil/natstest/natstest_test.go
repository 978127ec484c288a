package natstest_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

func TestRunJetStream(t *testing.T) {
	t.Parallel()
	s := natstest.RunJetStream(t)
	ctx := t.Context()
	if _, err := s.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	_, js2 := s.Connect(t)
	if _, err := js2.Publish(ctx, "t.x", []byte("x")); err != nil {
		t.Fatalf("publish from a second connection: %v", err)
	}
	info, err := s.JetStream().AccountInfo(ctx)
	if err != nil || info.Streams != 1 {
		t.Fatalf("account info %+v, %v", info, err)
	}
}

func TestServer_DialInProcess(t *testing.T) {
	t.Parallel()
	s := natstest.RunJetStream(t)
	nc, js, err := s.DialInProcess()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.JetStream().Publish(t.Context(), "t.x", []byte("x")); err != nil {
		t.Fatalf("publish over TCP into a stream made in-process: %v", err)
	}
}
