//go:build integration

package natstest_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

func TestRunBinary_restartKeepsStreams(t *testing.T) {
	t.Parallel()
	b := natstest.RunBinary(t, t.TempDir())
	ctx := t.Context()
	_, js := b.Connect(t)
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "t.x", []byte("x")); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("after restart the stream holds %d messages, want 1", info.State.Msgs)
	}
}
