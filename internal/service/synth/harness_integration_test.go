//go:build integration

package synth_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/timestamppb"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/service/synth"
)

// syncBuffer is a log sink safe for concurrent writers.
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

// captured is one message seen on "lava.>".
type captured struct {
	subject string
	data    []byte
	event   bus.Event
}

// harness is a real JetStream with Lava's topology and a running synth service; every message
// published on "lava.>" is captured.
type harness struct {
	t    *testing.T
	js   jetstream.JetStream
	pub  *bus.Publisher
	logs *syncBuffer
	key  []byte

	mu   sync.Mutex
	msgs []captured
}

func newHarness(t *testing.T, kube client.Reader) *harness {
	t.Helper()
	return newHarnessConfig(t, func(c *synth.Config) { c.Kube = kube })
}

// newHarnessConfig is newHarness with the synth Config set by with.
func newHarnessConfig(t *testing.T, with func(*synth.Config)) *harness {
	t.Helper()
	return newHarnessOn(t, natstest.RunJetStream(t), with)
}

// newHarnessOn is newHarnessConfig on the server srv.
func newHarnessOn(t *testing.T, srv *natstest.Server, with func(*synth.Config)) *harness {
	t.Helper()
	js := srv.JetStream()
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, js: js, pub: bus.NewPublisher(js), logs: &syncBuffer{}, key: []byte(rand.Text() + rand.Text())[:32]}
	sub, err := srv.Conn().Subscribe("lava.>", func(m *nats.Msg) {
		c := captured{subject: m.Subject, data: append([]byte(nil), m.Data...)}
		if mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(m.Header.Get(bus.HeaderSchema))); err == nil {
			ev := mt.New().Interface()
			if proto.Unmarshal(m.Data, ev) == nil {
				c.event, _ = ev.(bus.Event)
			}
		}
		h.mu.Lock()
		h.msgs = append(h.msgs, c)
		h.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	log := slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := synth.Config{JS: js, BindingsKey: h.key, Logger: log}
	with(&cfg)
	svc, err := synth.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("synth Run: %v", err)
		}
	})
	return h
}

// observe publishes a ResourceObserved as the watcher would and returns it.
func (h *harness) observe(ns, name, uid string, gen int64, spec *lavav1.ArchitectureSpec) *lavav1.ResourceObserved {
	h.t.Helper()
	trig := eventid.GenerationTrigger(gen)
	id := eventid.ID(uid, gen, "lava.v1.ResourceObserved", trig)
	ev := &lavav1.ResourceObserved{
		Envelope: &lavav1.Envelope{EventId: id, OccurredAt: timestamppb.Now(), Source: "watcher",
			Resource: &lavav1.ResourceRef{Namespace: ns, Name: name, Uid: uid}, Generation: gen, CorrelationId: id, Trigger: trig},
		Spec:         spec,
		Remediation:  &lavav1.RemediationPolicy{},
		Dependencies: &lavav1.DependencyState{Ready: true},
	}
	if _, err := h.pub.PublishEvent(h.t.Context(), ev); err != nil {
		h.t.Fatal(err)
	}
	return ev
}

// await waits for the first captured event of type T about (ns, name, gen) satisfying ok.
func await[T bus.Event](h *harness, ns, name string, gen int64) T {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		for _, c := range h.msgs {
			if ev, ok := c.event.(T); ok {
				env := ev.GetEnvelope()
				if env.GetResource().GetNamespace() == ns && env.GetResource().GetName() == name && env.GetGeneration() == gen {
					h.mu.Unlock()
					return ev
				}
			}
		}
		h.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	var zero T
	h.t.Fatalf("no %T for %s/%s generation %d within 30s; seen:\n%s", zero, ns, name, gen, h.seen())
	return zero
}

// outcome waits for the Synthesized or Failed of (ns, name, gen).
func (h *harness) outcome(ns, name string, gen int64) (*lavav1.Synthesized, *lavav1.Failed) {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		for _, c := range h.msgs {
			env := envOf(c.event)
			if env.GetResource().GetNamespace() != ns || env.GetResource().GetName() != name || env.GetGeneration() != gen {
				continue
			}
			switch ev := c.event.(type) {
			case *lavav1.Synthesized:
				h.mu.Unlock()
				return ev, nil
			case *lavav1.Failed:
				h.mu.Unlock()
				return nil, ev
			}
		}
		h.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Fatalf("no outcome for %s/%s generation %d within 30s; seen:\n%s\nlog (the end):\n%s", ns, name, gen, h.seen(), tail(h.logs.String(), 4000))
	return nil, nil
}

func envOf(ev bus.Event) *lavav1.Envelope {
	if ev == nil {
		return nil
	}
	return ev.GetEnvelope()
}

func (h *harness) seen() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, c := range h.msgs {
		b.WriteString(c.subject + "\n")
	}
	return b.String()
}

// count returns how many captured messages are on subject.
func (h *harness) count(subject string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.msgs {
		if c.subject == subject {
			n++
		}
	}
	return n
}

// leaks returns where secret appears: in a captured message's bytes or in the logs.
func (h *harness) leaks(secret string) []string {
	var where []string
	h.mu.Lock()
	for _, c := range h.msgs {
		if bytes.Contains(c.data, []byte(secret)) {
			where = append(where, c.subject)
		}
	}
	h.mu.Unlock()
	if strings.Contains(h.logs.String(), secret) {
		where = append(where, "logs")
	}
	return where
}

// artifact reads an artifact's bytes.
func (h *harness) artifact(digest string) []byte {
	h.t.Helper()
	art, err := bus.NewArtifacts(h.t.Context(), h.js)
	if err != nil {
		h.t.Fatal(err)
	}
	rc, err := art.Get(h.t.Context(), digest)
	if err != nil {
		h.t.Fatal(err)
	}
	defer rc.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(rc); err != nil && !errors.Is(err, context.Canceled) {
		h.t.Fatal(err)
	}
	return b.Bytes()
}

// tail returns at most the last n bytes of s.
func tail(s string, n int) string { return s[max(0, len(s)-n):] }
