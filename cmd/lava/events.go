package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
)

const eventsLong = `Events follows the phase events (stream LAVA_PHASES: Synthesized, Planned, Applied, Failed,
Destroyed, PhaseChanged, DriftScanned, TickReported, ReceiptAppended) and the anomalies (stream
LAVA_ANOMALIES, protojson AnomalyDetected) of the LavaArchitecture NS/NAME, or of every one
without an argument, and prints one line per event until interrupted (Ctrl-C), as
"flux events --watch" and "nats sub" do:

  TIME                  OBJECT          TYPE     EVENT          MESSAGE
  2026-12-01T20:10:03Z  infra/vpc       Normal   Applied        plan 1a2b3c4d5e6f: 3 to add, 0 to change, 0 to destroy; state serial 1
  2026-12-01T20:11:40Z  infra/vpc       Warning  Anomaly        critical drift: ...

TIME is when the stream stored the event (UTC). Lines of the two streams are each in stream
order; a phase event and an anomaly stored in the same instant may print in either order.
Without --since only events stored from now on are printed; --since 1h first replays the
events of the last hour. Event bodies never carry secret values (docs/events.md).

The NATS server is ` + natsURLHelp + `.
The command creates ordered (ephemeral) consumers and needs read access to both streams.`

func newEventsCmd() *cobra.Command {
	var (
		nf    natsFlags
		since time.Duration
	)
	cmd := &cobra.Command{
		Use:     "events [NS/NAME]",
		Short:   "Follow the phase events and anomalies of one LavaArchitecture or of all",
		Long:    eventsLong,
		Example: "  lava events infra/prod-vpc --since 30m\n  lava events --nats-url nats://nats.lava-system:4222",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var f eventsFilter
			if len(args) == 1 {
				ns, name, err := parseResource(args[0])
				if err != nil {
					return err
				}
				f = eventsFilter{namespace: ns, name: name}
			}
			if since < 0 {
				return fmt.Errorf("--since %s: want a positive duration", since)
			}
			nc, js, err := nf.connect()
			if err != nil {
				return err
			}
			defer nc.Close()
			lost := make(chan struct{})
			var once sync.Once
			nc.SetClosedHandler(func(*nats.Conn) { once.Do(func() { close(lost) }) })
			var start time.Time
			if since > 0 {
				start = time.Now().Add(-since)
			}
			return followEvents(cmd.Context(), js, lost, f, start, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	nf.register(cmd)
	cmd.Flags().DurationVar(&since, "since", 0, "first replay the events stored in this `DURATION` before now (e.g. 30m, 2h); 0: only new events")
	return cmd
}

// eventsFilter selects one resource; the zero value selects every resource.
type eventsFilter struct{ namespace, name string }

func (f eventsFilter) all() bool { return f.namespace == "" }

// phaseSubject is the LAVA_PHASES filter subject of f.
func (f eventsFilter) phaseSubject() string {
	if f.all() {
		return bus.PrefixPhase + ">"
	}
	return bus.PhaseSubject(f.namespace, f.name, "*")
}

// match reports whether an anomaly about ref is f's (anomaly subjects carry no resource name,
// so anomalies are filtered here).
func (f eventsFilter) match(ref *lavav1.ResourceRef) bool {
	return f.all() || (ref.GetNamespace() == f.namespace && ref.GetName() == f.name)
}

// followEvents prints the events of f stored at or after start (zero: from now on) until ctx is
// cancelled, which ends it without error, or lost is closed (the connection closed: an
// [unavailableError]). Undecodable messages are reported on stderr and skipped.
func followEvents(ctx context.Context, js jetstream.JetStream, lost <-chan struct{}, f eventsFilter, start time.Time, stdout, stderr io.Writer) error {
	var mu sync.Mutex
	out := func(w io.Writer, line string) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = io.WriteString(w, line+"\n")
	}
	streams := []struct{ stream, subject string }{
		{bus.StreamPhases, f.phaseSubject()},
		{bus.StreamAnomalies, bus.PrefixAnomaly + ">"},
	}
	// Events wait for the header: with --since the consumers deliver stored events at once.
	header := make(chan struct{})
	var headerOnce sync.Once
	openHeader := func() { headerOnce.Do(func() { close(header) }) }
	var stops []func()
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	defer openHeader() // no callback stays blocked after an error
	for _, s := range streams {
		cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{s.subject}, DeliverPolicy: jetstream.DeliverNewPolicy}
		if !start.IsZero() {
			st := start
			cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &st
		}
		cons, err := js.OrderedConsumer(ctx, s.stream, cfg)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return unavailable(fmt.Errorf("follow %s: %w", s.stream, err))
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			<-header
			msg := &bus.Message{Subject: m.Subject(), Header: m.Headers(), Data: m.Data(), Stream: s.stream}
			if md, err := m.Metadata(); err == nil {
				msg.StreamSeq, msg.Published = md.Sequence.Stream, md.Timestamp
			}
			if err := bus.DecodeBody(nil, msg); err != nil {
				out(stderr, fmt.Sprintf("lava: %s seq %d on %s: %v", s.stream, msg.StreamSeq, msg.Subject, err))
				return
			}
			if a, ok := msg.Event.(*lavav1.AnomalyDetected); ok && !f.match(anomalyResource(a)) {
				return
			}
			out(stdout, formatEvent(msg))
		})
		if err != nil {
			return unavailable(fmt.Errorf("follow %s: %w", s.stream, err))
		}
		stops = append(stops, cc.Stop)
	}
	// The header comes once both consumers exist: every event stored from here on is printed.
	out(stdout, fmt.Sprintf(eventsLineFormat, "TIME", "OBJECT", "TYPE", "EVENT", "MESSAGE"))
	openHeader()
	select {
	case <-ctx.Done():
		return nil
	case <-lost:
		return unavailable(errors.New("the NATS connection was lost; run lava events again (--since replays what was missed)"))
	}
}

// anomalyResource is the resource an anomaly is about: source, else envelope.resource.
func anomalyResource(a *lavav1.AnomalyDetected) *lavav1.ResourceRef {
	if a.GetSource().GetName() != "" {
		return a.GetSource()
	}
	return a.GetEnvelope().GetResource()
}

// eventsLineFormat lays out TIME, OBJECT, TYPE, EVENT and MESSAGE.
const eventsLineFormat = "%-21s %-30s %-7s %-15s %s"

// Event types of a line, as Kubernetes events have them.
const (
	eventNormal  = "Normal"
	eventWarning = "Warning"
)

// formatEvent is one line for a decoded event: its storage time, the resource, Normal or
// Warning, the event's message name ("Anomaly" for anomalies) and a summary of its fields.
func formatEvent(m *bus.Message) string {
	ref := m.Envelope.GetResource()
	typ, name, text := eventNormal, string(m.Event.ProtoReflect().Descriptor().Name()), ""
	switch e := m.Event.(type) {
	case *lavav1.Synthesized:
		text = fmt.Sprintf("rendered %s: %s, gate %s %s; terraform json %s", e.GetRender().GetArchitectureName(),
			plural(int(e.GetRender().GetResourceCount()), "resource"), e.GetGate().GetGate(), passed(e.GetGate().GetPassed()), short(e.GetArtifactDigest()))
	case *lavav1.Planned:
		text = fmt.Sprintf("plan %s: %s", short(e.GetPlanId()), changes(e.GetSummary()))
		if e.GetAwaitingApproval() {
			text += "; awaiting approval"
		}
	case *lavav1.Applied:
		text = fmt.Sprintf("plan %s: %s; state serial %d", short(e.GetPlanId()), changes(e.GetSummary()), e.GetStateSerial())
	case *lavav1.Failed:
		typ = eventWarning
		text = fmt.Sprintf("%s %s: %s", enumWord(e.GetStage().String(), "STAGE_"), e.GetReason(), e.GetMessage())
		if e.GetRetryable() {
			text += fmt.Sprintf(" (retryable, attempt %d)", e.GetAttempt())
		}
	case *lavav1.Destroyed:
		text = "destroyed " + plural(int(e.GetDestroyedCount()), "resource")
		if e.GetOrphaned() {
			text = "orphaned: the infrastructure was left in place"
		}
	case *lavav1.PhaseChanged:
		if e.GetTo() == lavav1.Phase_PHASE_FAILED {
			typ = eventWarning
		}
		text = fmt.Sprintf("%s -> %s", phaseWord(e.GetFrom()), phaseWord(e.GetTo()))
		if e.GetReason() != "" {
			text += ": " + e.GetReason()
		}
		if e.GetMessage() != "" {
			text += ": " + e.GetMessage()
		}
	case *lavav1.DriftScanned:
		text = "clean"
		if n := len(e.GetFindings()); n > 0 {
			typ = eventWarning
			text = fmt.Sprintf("%s, max severity %s", plural(n, "finding"), enumWord(e.GetMaxSeverity().String(), "SEVERITY_"))
		}
	case *lavav1.TickReported:
		text = fmt.Sprintf("final phase %s, action %s", phaseWord(e.GetFinalPhase()),
			enumWord(e.GetDecision().GetAction().String(), "REMEDIATION_ACTION_"))
	case *lavav1.ReceiptAppended:
		key := e.GetKeyId()
		if key == "" {
			key = "unsigned"
		}
		text = fmt.Sprintf("receipt %d (%s), key %s", e.GetSequence(), e.GetKind(), key)
	case *lavav1.AnomalyDetected:
		typ, name, ref = eventWarning, "Anomaly", anomalyResource(e)
		kind := enumWord(e.GetKind().String(), "ANOMALY_KIND_")
		if e.GetKind() == lavav1.AnomalyKind_ANOMALY_KIND_CUSTOM {
			kind = e.GetExtensionKind()
		}
		text = fmt.Sprintf("%s %s: %s", enumWord(e.GetSeverity().String(), "SEVERITY_"), kind, e.GetMessage())
		if e.GetCount() > 1 {
			text += fmt.Sprintf(" (seen %d times)", e.GetCount())
		}
	}
	if g := m.Envelope.GetGeneration(); g != 0 && text != "" {
		text = fmt.Sprintf("generation %d: %s", g, text)
	}
	obj := ref.GetNamespace() + "/" + ref.GetName()
	if ref.GetName() == "" {
		obj = "-"
	}
	return fmt.Sprintf(eventsLineFormat, m.Published.UTC().Format(time.RFC3339), obj, typ, name, oneLine(text))
}

// short is the first 12 hex digits of a digest or plan id ("-" when empty).
func short(id string) string {
	if id == "" {
		return "-"
	}
	return id[:min(12, len(id))]
}

func passed(ok bool) string {
	if ok {
		return "passed"
	}
	return "failed"
}

// changes is tofu's "N to add, N to change, N to destroy".
func changes(s *lavav1.ChangeSummary) string {
	return fmt.Sprintf("%d to add, %d to change, %d to destroy", s.GetAdd(), s.GetChange(), s.GetDestroy())
}

// phaseWord is "Applied" for PHASE_APPLIED, as status.phase shows it.
func phaseWord(p lavav1.Phase) string {
	w := enumWord(p.String(), "PHASE_")
	if w == "" {
		return "-"
	}
	return strings.ToUpper(w[:1]) + w[1:]
}

// enumWord is an enum value's name without prefix, lowercase ("critical" for SEVERITY_CRITICAL).
func enumWord(name, prefix string) string {
	if strings.HasSuffix(name, "UNSPECIFIED") {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}

// oneLine folds a multi-line text (diagnostics) into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ; ")), " ")
}
