package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

// syncBuffer is a bytes.Buffer safe for the command's goroutines and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// eventsRun is `lava events` running in the background until stop.
type eventsRun struct {
	stdout, stderr syncBuffer
	cancel         context.CancelFunc
	done           chan int
}

func startEvents(t *testing.T, args ...string) *eventsRun {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &eventsRun{cancel: cancel, done: make(chan int, 1)}
	go func() {
		r.done <- run(ctx, append([]string{"events"}, args...), strings.NewReader(""), &r.stdout, &r.stderr)
	}()
	t.Cleanup(cancel)
	return r
}

// waitFor waits until stdout has every want, failing after 10s.
func (r *eventsRun) waitFor(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := r.stdout.String()
		missing := ""
		for _, w := range want {
			if !strings.Contains(out, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stdout lacks %q after 10s:\n%s\nstderr:\n%s", missing, out, r.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop interrupts the command and returns its exit code.
func (r *eventsRun) stop(t *testing.T) int {
	t.Helper()
	r.cancel()
	select {
	case code := <-r.done:
		return code
	case <-time.After(10 * time.Second):
		t.Fatal("lava events did not stop within 10s of its context's cancellation")
		return -1
	}
}

func env(ns, name string, gen int64, n int) *lavav1.Envelope {
	return &lavav1.Envelope{
		EventId: fmt.Sprintf("%064x", n), Source: "test", Generation: gen,
		Resource: &lavav1.ResourceRef{Namespace: ns, Name: name, Uid: "uid-" + name},
	}
}

// publishLifecycle publishes, through the services' publisher, a lifecycle of ns/name: a
// Planned, an Applied, a PhaseChanged, a drift scan with a finding and a protojson anomaly.
func publishLifecycle(t *testing.T, pub *bus.Publisher, ns, name string, base int) {
	t.Helper()
	plan := strings.Repeat("ab", 32)
	sum := &lavav1.ChangeSummary{Add: 3}
	ref := &lavav1.ResourceRef{Namespace: ns, Name: name, Uid: "uid-" + name}
	events := []bus.Event{
		&lavav1.Planned{Envelope: env(ns, name, 2, base+1), PlanId: plan, Summary: sum, AwaitingApproval: true},
		&lavav1.Applied{Envelope: env(ns, name, 2, base+2), PlanId: plan, Summary: sum, StateSerial: 7},
		&lavav1.PhaseChanged{Envelope: env(ns, name, 2, base+3), From: lavav1.Phase_PHASE_PLANNED, To: lavav1.Phase_PHASE_APPLIED, Reason: "ApplySucceeded"},
		&lavav1.DriftScanned{Envelope: env(ns, name, 2, base+4), MaxSeverity: lavav1.Severity_SEVERITY_FUNCTIONAL,
			Findings: []*lavav1.DriftFinding{{Address: "aws_vpc.main", Attribute: "cidr_block", Severity: lavav1.Severity_SEVERITY_FUNCTIONAL}}},
		&lavav1.Failed{Envelope: env(ns, name, 2, base+5), Stage: lavav1.Stage_STAGE_APPLY, Reason: "ApplyFailed",
			Message: "error: quota exceeded\n  on main.tf.json line 3", Retryable: true, Attempt: 2},
		&lavav1.AnomalyDetected{Envelope: env(ns, name, 2, base+6), Source: ref, Kind: lavav1.AnomalyKind_ANOMALY_KIND_APPLY_FAILURE,
			Severity: lavav1.Severity_SEVERITY_CRITICAL, Message: "apply of " + name + " failed", Count: 3, Fingerprint: "fp-" + name},
	}
	for _, ev := range events {
		if _, err := pub.PublishEvent(t.Context(), ev); err != nil {
			t.Fatalf("publish %T: %v", ev, err)
		}
	}
}

// TestEvents_followsOneResource replays (--since) and then follows the phase events and
// anomalies of one resource from a real JetStream server, decoding binary protobuf and
// protojson into one line each, and leaves other resources' events out.
func TestEvents_followsOneResource(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	js := srv.JetStream()
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	pub := bus.NewPublisher(js)
	publishLifecycle(t, pub, "infra", "vpc", 0)
	publishLifecycle(t, pub, "infra", "other", 100)

	r := startEvents(t, "infra/vpc", "--since", "1h", "--nats-url", srv.URL())
	r.waitFor(t,
		"TIME", "OBJECT", "MESSAGE",
		"infra/vpc                      Normal  Planned         generation 2: plan abababababab: 3 to add, 0 to change, 0 to destroy; awaiting approval",
		"Normal  Applied         generation 2: plan abababababab: 3 to add, 0 to change, 0 to destroy; state serial 7",
		"Normal  PhaseChanged    generation 2: Planned -> Applied: ApplySucceeded",
		"Warning DriftScanned    generation 2: 1 finding, max severity functional",
		"Warning Failed          generation 2: apply ApplyFailed: error: quota exceeded ; on main.tf.json line 3 (retryable, attempt 2)",
		"Warning Anomaly         generation 2: critical apply_failure: apply of vpc failed (seen 3 times)",
	)
	// A live event after the replay is followed.
	if _, err := pub.PublishEvent(t.Context(), &lavav1.Destroyed{Envelope: env("infra", "vpc", 3, 50), DestroyedCount: 4}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "Normal  Destroyed       generation 3: destroyed 4 resources")
	if code := r.stop(t); code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, r.stderr.String())
	}
	out := r.stdout.String()
	if strings.Contains(out, "infra/other") || strings.Contains(out, "apply of other") {
		t.Errorf("the events of infra/other are printed for infra/vpc:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1+7 {
		t.Errorf("%d lines, want a header and 7 events:\n%s", len(lines), out)
	}
	for _, l := range lines[1:] {
		if _, err := time.Parse(time.RFC3339, strings.Fields(l)[0]); err != nil {
			t.Errorf("line does not start with an RFC 3339 time: %q", l)
		}
	}
	if r.stderr.String() != "" {
		t.Errorf("stderr: %s", r.stderr.String())
	}
}

// TestEvents_allResourcesOnlyNew follows every resource; without --since, events stored
// before the command started are not printed; an undecodable message is reported on stderr and
// does not stop the command.
func TestEvents_allResourcesOnlyNew(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	js := srv.JetStream()
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	pub := bus.NewPublisher(js)
	if _, err := pub.PublishEvent(t.Context(), &lavav1.Applied{Envelope: env("old", "one", 1, 900), PlanId: "old-plan"}); err != nil {
		t.Fatal(err)
	}
	r := startEvents(t, "--nats-url", srv.URL())
	r.waitFor(t, "TIME")
	if _, err := js.Publish(t.Context(), bus.PhaseSubject("infra", "bad", bus.EventApplied), []byte("not protobuf")); err != nil {
		t.Fatal(err)
	}
	publishLifecycle(t, pub, "infra", "vpc", 0)
	publishLifecycle(t, pub, "apps", "db", 100)
	r.waitFor(t, "infra/vpc", "apps/db", "apply of vpc failed", "apply of db failed")
	// The two streams are followed independently: wait for all 12 lines before stopping.
	for deadline := time.Now().Add(10 * time.Second); strings.Count(r.stdout.String(), "\n") < 1+12 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if code := r.stop(t); code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, r.stderr.String())
	}
	out := r.stdout.String()
	if strings.Contains(out, "old/one") {
		t.Errorf("an event stored before the command started is printed without --since:\n%s", out)
	}
	if got := strings.Count(out, "\n"); got != 1+12 {
		t.Errorf("%d lines, want a header and 12 events:\n%s", got, out)
	}
	if !strings.Contains(r.stderr.String(), "no Lava-Schema header") {
		t.Errorf("stderr does not report the undecodable message: %q", r.stderr.String())
	}
}

// TestEvents_serverLost: the command ends with exit code 3 when the server goes away, and a
// server that cannot be reached at all is exit code 3 too.
func TestEvents_serverLost(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	if err := bus.EnsureTopology(t.Context(), srv.JetStream(), bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	r := startEvents(t, "--nats-url", srv.URL())
	r.waitFor(t, "TIME")
	srv.Shutdown()
	select {
	case code := <-r.done:
		if code != exitUnavail {
			t.Fatalf("exit %d after the server went away, want %d; stderr:\n%s", code, exitUnavail, r.stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("lava events still runs 15s after its server went away")
	}
	if code, _, stderr := runLava(t, "", "events", "--nats-url", srv.URL()); code != exitUnavail {
		t.Fatalf("no server: exit %d, want %d; stderr:\n%s", code, exitUnavail, stderr)
	}
}
