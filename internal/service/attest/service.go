package attest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/timestamppb"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/telemetry/logattr"
	"github.com/lava-operator/lava/internal/readmodel"
)

// EventReceiptAppended is the last token of the subject ReceiptAppended is published on:
// lava.v1.phase.<ns>.<name>.receipt_appended (LAVA_PHASES, where the watcher reads it).
const EventReceiptAppended = bus.EventReceiptAppended

// ServiceOptions configures a [Service]. The zero value is valid.
type ServiceOptions struct {
	// Concurrency bounds the events handled at once per consumer. Default 8.
	Concurrency int
	// Logger receives Info logs per receipt and the bus's Warn logs. Default: discard.
	Logger *slog.Logger
	// BusMetrics, if set, counts consumed messages.
	BusMetrics *bus.Metrics
	// OnPoison, if set, is called for each terminated message (bus.ConsumeOptions.OnPoison).
	OnPoison func(ctx context.Context, r bus.PoisonReport)
	// Now is the clock of ReceiptAppended's occurred_at; default time.Now.
	Now func() time.Time
}

// Service is the attest service: it consumes PhaseChanged (failures included) and
// TickReported (one per viggy pass, failed ones included) from LAVA_PHASES and AnomalyDetected from LAVA_ANOMALIES with the durable consumer "attest",
// appends one receipt per event to the resource's chain ([Store.Append]) and publishes
// ReceiptAppended with the new head.
type Service struct {
	js    jetstream.JetStream
	store *Store
	pub   *bus.Publisher
	opts  ServiceOptions

	mu           sync.Mutex
	phasesStream jetstream.Stream
}

// NewService returns a Service appending through store.
func NewService(js jetstream.JetStream, store *Store, opts ServiceOptions) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Service{js: js, store: store, pub: bus.NewPublisher(js), opts: opts}
}

// Run consumes both streams until ctx is cancelled, then drains in-flight events (bus.Consume)
// and returns nil. The consumers must exist (bus.EnsureTopology).
func (s *Service) Run(ctx context.Context) error {
	err := pipeline.Consumer{
		// A resource's receipts are appended in the order of its transitions: OrderKey
		// within this process, Handle's catch-up across replicas.
		JS: s.js, Service: bus.ServiceAttest, Concurrency: s.opts.Concurrency, OrderKey: bus.ResourceOrderKey,
		Logger: s.opts.Logger, Metrics: s.opts.BusMetrics, Publisher: s.pub, OnPoison: s.opts.OnPoison,
	}.Consume(ctx, s.Handle, bus.StreamPhases, bus.StreamAnomalies)
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("attest: consume: %w", err)
	}
	return nil
}

// Handle is the bus.Handler of both consumers: [Service.Record] of the message's event with
// its store time as the duplicate search bound. An event of LAVA_PHASES is appended in that
// stream's order: the receipts of the resource's earlier PhaseChanged and TickReported that its
// chain does not hold yet are appended first, read from LAVA_PHASES by subject
// ([AppendRequest].Earlier; docs/design/0018-receipt-order-across-replicas.md), so any number of
// replicas and handlers keep a chain in the order of the resource's transitions. A malformed
// event (no resource, unexpected type) is permanent (terminated); anything else is retried.
func (s *Service) Handle(ctx context.Context, m *bus.Message) error {
	req, err := request(m.Event, m.Published)
	if err == nil && m.Stream == bus.StreamPhases && m.StreamSeq > 0 {
		req.PhasesSeq = m.StreamSeq
		req.Earlier = s.earlier(req.Resource, m.StreamSeq)
	}
	if err == nil {
		_, err = s.record(ctx, m.Event.GetEnvelope(), req)
	}
	if errors.Is(err, ErrInvalidRequest) || errors.Is(err, readmodel.ErrPayloadKind) {
		return bus.Permanent(err)
	}
	return err
}

// earlier returns the [AppendRequest].Earlier of an event of res stored at LAVA_PHASES stream
// sequence before: the resource's PhaseChanged and TickReported stored after sequence after
// and before it, read with the stream's next-message-by-subject get (one cursor per subject,
// run at once, at most bus.PhaseHistoryPerSubject events each, merged in stream order). An event that does not decode, or has no receipt, is left out (its
// own delivery terminates it).
func (s *Service) earlier(res *lavav1.ResourceRef, before uint64) func(ctx context.Context, after uint64) ([]AppendRequest, error) {
	return func(ctx context.Context, after uint64) ([]AppendRequest, error) {
		stream, err := s.phases(ctx)
		if err != nil {
			return nil, err
		}
		// One cursor per subject, both at once: the common case is one get each.
		subjects := []string{bus.EventPhaseChanged, bus.EventTickReported}
		found := make([][]AppendRequest, len(subjects))
		g, gctx := errgroup.WithContext(ctx)
		for i, event := range subjects {
			subject := bus.PhaseSubject(res.GetNamespace(), res.GetName(), event)
			g.Go(func() error {
				for seq := after + 1; seq < before && len(found[i]) < bus.PhaseHistoryPerSubject; {
					raw, err := stream.GetMsg(gctx, seq, jetstream.WithGetMsgSubject(subject))
					if errors.Is(err, jetstream.ErrMsgNotFound) {
						return nil
					}
					if err != nil {
						return fmt.Errorf("read %s from stream sequence %d: %w", subject, seq, err)
					}
					if raw.Sequence >= before {
						return nil
					}
					seq = raw.Sequence + 1
					m := &bus.Message{Subject: raw.Subject, Header: raw.Header, Data: raw.Data, Stream: bus.StreamPhases, StreamSeq: raw.Sequence, Published: raw.Time}
					if bus.DecodeBody(nil, m) != nil {
						continue
					}
					req, err := request(m.Event, m.Published)
					if err != nil || req.Resource.GetNamespace() != res.GetNamespace() || req.Resource.GetName() != res.GetName() {
						continue
					}
					req.PhasesSeq = raw.Sequence
					found[i] = append(found[i], req)
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		out := slices.Concat(found...)
		slices.SortFunc(out, func(a, b AppendRequest) int { return cmp.Compare(a.PhasesSeq, b.PhasesSeq) })
		return out, nil
	}
}

// phases returns the LAVA_PHASES stream handle, looked up once.
func (s *Service) phases(ctx context.Context) (jetstream.Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.phasesStream != nil {
		return s.phasesStream, nil
	}
	st, err := s.js.Stream(ctx, bus.StreamPhases)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", bus.StreamPhases, err)
	}
	s.phasesStream = st
	return st, nil
}

// request is the append request of one event; other types than PhaseChanged, TickReported and
// AnomalyDetected wrap [ErrInvalidRequest].
func request(ev bus.Event, notBefore time.Time) (AppendRequest, error) {
	env := ev.GetEnvelope()
	req := AppendRequest{
		Resource:   env.GetResource(),
		Generation: env.GetGeneration(),
		EventID:    env.GetEventId(),
		NotBefore:  notBefore,
	}
	switch e := ev.(type) {
	case *lavav1.PhaseChanged:
		req.Kind, req.Payload = readmodel.KindOutcome, readmodel.OutcomeFromPhaseChanged(e)
	case *lavav1.TickReported:
		req.Kind, req.Payload = readmodel.KindOutcome, readmodel.OutcomeFromTick(e)
	case *lavav1.AnomalyDetected:
		if req.Resource.GetName() == "" {
			req.Resource = e.GetSource()
		}
		p, err := readmodel.AnomalyFromDetected(e)
		if err != nil {
			return req, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
		req.Kind, req.Payload = readmodel.KindAnomaly, p
	default:
		return req, fmt.Errorf("%w: no receipt for %s", ErrInvalidRequest, eventid.Type(ev))
	}
	return req, nil
}

// record appends req (of the event with envelope env) and publishes ReceiptAppended.
func (s *Service) record(ctx context.Context, env *lavav1.Envelope, req AppendRequest) (*Appended, error) {
	a, err := s.store.Append(ctx, req)
	if err != nil {
		return nil, err
	}
	res := req.Resource
	log := s.opts.Logger.With(logattr.Resource(res.GetNamespace(), res.GetName()), logattr.EventID(req.EventID))
	if a.Duplicate {
		log.Debug("attest: event already recorded", "sequence", a.Receipt.GetSequence())
	} else {
		log.Info("attest: receipt appended", "sequence", a.Receipt.GetSequence(), "kind", req.Kind,
			"content_hash", readmodel.Hex(a.Receipt.GetContentHash()), "conflicts", a.Conflicts)
	}
	if err := s.publishAppended(ctx, env, res, a.Receipt); err != nil {
		return nil, err
	}
	return a, nil
}

// publishAppended publishes ReceiptAppended for a receipt of the event with envelope cause.
func (s *Service) publishAppended(ctx context.Context, cause *lavav1.Envelope, res *lavav1.ResourceRef, r *lavav1.Receipt) error {
	trigger := eventid.CauseTrigger(cause.GetEventId())
	ev := &lavav1.ReceiptAppended{
		Envelope: &lavav1.Envelope{
			EventId:       eventid.ID(res.GetUid(), cause.GetGeneration(), "lava.v1.ReceiptAppended", trigger),
			OccurredAt:    timestamppb.New(s.opts.Now()),
			Source:        bus.ServiceAttest,
			Resource:      &lavav1.ResourceRef{Namespace: res.GetNamespace(), Name: res.GetName(), Uid: res.GetUid()},
			Generation:    cause.GetGeneration(),
			CorrelationId: cause.GetCorrelationId(),
			Trigger:       trigger,
		},
		Sequence:    r.GetSequence(),
		ContentHash: r.GetContentHash(),
		Kind:        r.GetKind(),
		KeyId:       r.GetSignature().GetKeyId(),
	}
	subject := bus.PhaseSubject(res.GetNamespace(), res.GetName(), EventReceiptAppended)
	if _, err := s.pub.Publish(ctx, subject, ev); err != nil {
		return fmt.Errorf("attest: publish receipt_appended: %w", err)
	}
	return nil
}
