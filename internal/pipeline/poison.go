package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
)

// ExtensionPoisonMessage is the extension kind of the Custom anomaly reporting a poison message
// (lowercase snake case, the subject token: lava.anomaly.functional.poison_message).
const ExtensionPoisonMessage = "poison_message"

// publishTimeout bounds one report's publish; a report made while the service drains still goes
// out.
const publishTimeout = 5 * time.Second

// PoisonReporter returns a bus.ConsumeOptions.OnPoison callback for the durable consumers of
// service: each terminated message (and each message whose last delivery expired without an
// ack) is published as an AnomalyDetected with [PoisonAnomaly], on
// lava.anomaly.functional.poison_message. A report failure is logged on log (nil: discarded);
// the message stays terminated either way. then, if any, are called after the report (for a
// caller's own callback; nil entries are skipped).
//
// A poison message that is itself a poison-message anomaly is only logged, so a consumer that
// rejects those cannot loop.
func PoisonReporter(pub *bus.Publisher, service string, log *slog.Logger, then ...func(context.Context, bus.PoisonReport)) func(context.Context, bus.PoisonReport) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(ctx context.Context, r bus.PoisonReport) {
		if s, err := bus.ParseSubject(r.Subject); err == nil && s.Kind == bus.KindAnomaly && s.AnomalyKind == ExtensionPoisonMessage {
			log.Warn("anomaly: poison-message anomaly terminated; not reported again", "stream", r.Stream,
				"consumer", r.Consumer, "subject", r.Subject, "stream_seq", r.StreamSeq)
		} else {
			an := PoisonAnomaly(service, r, time.Now())
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
			_, err := pub.PublishEvent(pctx, an)
			cancel()
			if err != nil {
				log.Warn("anomaly: report poison message", "stream", r.Stream, "consumer", r.Consumer,
					"subject", r.Subject, "stream_seq", r.StreamSeq, "error", err)
			}
		}
		for _, f := range then {
			if f != nil {
				f(ctx, r)
			}
		}
	}
}

// PoisonAnomaly is the AnomalyDetected reporting the poison message r on one of service's
// consumers: kind Custom, extension kind [ExtensionPoisonMessage], severity functional; source
// the resource of the message's envelope when it could be decoded, else the resource its
// subject names, else (an anomaly subject, an unparsable one) a source named after the subject
// with no namespace; message the termination reason and error, sanitized ([Sanitize]);
// metadata service, stream, consumer, subject, stream_seq, deliveries and reason. The message
// body is never copied. The fingerprint's discriminator is "<stream>/<consumer>/<reason>" (one
// alert per consumer, resource and reason in a window); the event id comes from the stream,
// consumer and stream sequence (trigger "poison:<stream>:<consumer>:<seq>"), so a second
// report of the same message (a redelivered advisory, another replica) is stored once.
func PoisonAnomaly(service string, r bus.PoisonReport, now time.Time) *lavav1.AnomalyDetected {
	env := r.Envelope
	res := env.GetResource()
	if res.GetNamespace() == "" || res.GetName() == "" {
		res = &lavav1.ResourceRef{Name: r.Subject}
		if s, err := bus.ParseSubject(r.Subject); err == nil && s.Namespace != "" && s.Name != "" {
			res = &lavav1.ResourceRef{Namespace: s.Namespace, Name: s.Name}
		}
	} else {
		res = &lavav1.ResourceRef{Namespace: res.GetNamespace(), Name: res.GetName(), Uid: res.GetUid()}
	}
	src := res.GetUid()
	if src == "" {
		src = res.GetNamespace() + "/" + res.GetName()
	}
	seq := strconv.FormatUint(r.StreamSeq, 10)
	trigger := "poison:" + r.Stream + ":" + r.Consumer + ":" + seq
	msg := fmt.Sprintf("%s terminated a message on %s (%s)", service, r.Subject, r.Reason)
	if r.Err != nil {
		msg += ": " + r.Err.Error()
	}
	an := &lavav1.AnomalyDetected{
		Kind:          lavav1.AnomalyKind_ANOMALY_KIND_CUSTOM,
		ExtensionKind: ExtensionPoisonMessage,
		Severity:      lavav1.Severity_SEVERITY_FUNCTIONAL,
		Source:        res,
		Message:       Sanitize(msg),
		Metadata: map[string]string{
			"service":    service,
			"stream":     r.Stream,
			"consumer":   r.Consumer,
			"subject":    Sanitize(r.Subject),
			"stream_seq": seq,
			"deliveries": strconv.FormatUint(r.NumDelivered, 10),
			"reason":     string(r.Reason),
		},
		Fingerprint: Fingerprint(lavav1.AnomalyKind_ANOMALY_KIND_CUSTOM, ExtensionPoisonMessage, src,
			lavav1.Severity_SEVERITY_FUNCTIONAL, r.Stream+"/"+r.Consumer+"/"+string(r.Reason)),
		Count:     1,
		FirstSeen: timestamppb.New(now.UTC()),
		LastSeen:  timestamppb.New(now.UTC()),
	}
	id := eventid.ID(res.GetUid(), env.GetGeneration(), eventid.Type(an), trigger)
	correlation := env.GetCorrelationId()
	if correlation == "" {
		correlation = id
	}
	an.Envelope = &lavav1.Envelope{
		EventId: id, OccurredAt: timestamppb.New(now.UTC()), Source: service, Resource: res,
		Generation: env.GetGeneration(), CorrelationId: correlation, Trigger: trigger,
	}
	return an
}
