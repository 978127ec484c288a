//go:build integration

package natstest_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

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

// TestBinary_PID: the pid is the running nats-server's (its /proc/PID/comm), a new one after a
// restart, and 0 once the server is stopped.
func TestBinary_PID(t *testing.T) {
	t.Parallel()
	b := natstest.RunBinary(t, t.TempDir())
	comm := func(pid int) string {
		t.Helper()
		c, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(c))
	}
	first := b.PID()
	if c := comm(first); c != "nats-server" {
		t.Fatalf("PID %d is %q, want nats-server", first, c)
	}
	b.Restart()
	if second := b.PID(); second == first || comm(second) != "nats-server" {
		t.Fatalf("after a restart PID is %d (%q), want a new nats-server (before: %d)", second, comm(second), first)
	}
	b.Stop()
	if pid := b.PID(); pid != 0 {
		t.Fatalf("after Stop PID is %d, want 0", pid)
	}
}

// TestRunCluster_survivesTheMetaLeader: three servers with routes hold an R3 stream; with the
// JetStream meta leader SIGKILLed, the two others elect a new one and the stream takes
// publishes; the killed server comes back caught up.
func TestRunCluster_survivesTheMetaLeader(t *testing.T) {
	c := natstest.RunCluster(t, natstest.ClusterConfig{})
	// A JetStream API request without a deadline times out after nats.go's default 5 s; placing
	// an R3 stream on a loaded 2-core machine (other test packages running) can take longer.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// A request sent while the cluster's meta group is still settling can go unanswered (seen
	// once: 2 minutes without a reply); each attempt has 20 s, the same config is idempotent.
	var s jetstream.Stream
	for {
		actx, acancel := context.WithTimeout(ctx, 20*time.Second)
		s, err = js.CreateStream(actx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3})
		acancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		t.Logf("create the R3 stream: %v; again", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "t.x", []byte("x")); err != nil {
		t.Fatal(err)
	}
	leader, err := c.MetaLeader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	leader.Kill()
	next, err := c.MetaLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if next == leader {
		t.Fatalf("the killed server %s is still named meta leader", leader.Name())
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = js.Publish(pctx, "t.y", []byte("y"))
		pcancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish with %s down: %v", leader.Name(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	leader.Start()
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 || info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("after the meta leader's loss the stream is %+v (cluster %+v), want 2 messages at R3", info.State, info.Cluster)
	}
}
