package attest

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/readmodel"
)

// ExtensionForeignReceipt is the extension kind of the Custom anomaly reporting a foreign message
// on a receipt chain's subject: lava.anomaly.critical.foreign_receipt ([bus.ForeignReceiptAnomalySubject]).
const ExtensionForeignReceipt = "foreign_receipt"

// ForeignAnomaly is the AnomalyDetected reporting a foreign message f ([readmodel.Foreign]) on a
// receipt chain: kind Custom, extension kind [ExtensionForeignReceipt], severity critical, source
// the chain's resource, metadata subject, stream_seq and reason. The message body is never copied. The event
// id comes from the stream sequence (trigger "foreign:LAVA_RECEIPTS:<seq>"), so every report of
// the same message (the next append, a ReceiptService read, another replica) is stored once
// within the stream's duplicate window, and the fingerprint groups a chain's reports per reason.
func ForeignAnomaly(f readmodel.Foreign, now time.Time) *lavav1.AnomalyDetected {
	res := &lavav1.ResourceRef{Namespace: f.Namespace, Name: f.Name}
	subject := bus.ReceiptSubject(f.Namespace, f.Name)
	seq := strconv.FormatUint(f.StreamSeq, 10)
	trigger := "foreign:" + bus.StreamReceipts + ":" + seq
	an := &lavav1.AnomalyDetected{
		Kind:          lavav1.AnomalyKind_ANOMALY_KIND_CUSTOM,
		ExtensionKind: ExtensionForeignReceipt,
		Severity:      lavav1.Severity_SEVERITY_CRITICAL,
		Source:        res,
		Message: pipeline.Sanitize(fmt.Sprintf("a message on %s that attest did not append was skipped (%s): %s",
			subject, f.Reason, f.Detail)),
		Metadata: map[string]string{
			"subject": subject, "stream": bus.StreamReceipts, "stream_seq": seq, "reason": string(f.Reason),
		},
		Fingerprint: pipeline.Fingerprint(lavav1.AnomalyKind_ANOMALY_KIND_CUSTOM, ExtensionForeignReceipt,
			f.Namespace+"/"+f.Name, lavav1.Severity_SEVERITY_CRITICAL, string(f.Reason)),
		Count:     1,
		FirstSeen: timestamppb.New(now.UTC()),
		LastSeen:  timestamppb.New(now.UTC()),
	}
	id := eventid.ID("", 0, eventid.Type(an), trigger)
	an.Envelope = &lavav1.Envelope{
		EventId: id, OccurredAt: timestamppb.New(now.UTC()), Source: bus.ServiceAttest, Resource: res,
		CorrelationId: id, Trigger: trigger,
	}
	return an
}

// ForeignReporter returns a callback that publishes each foreign message as [ForeignAnomaly] on
// lava.anomaly.critical.foreign_receipt and logs it on log (nil: discarded). A publish failure
// is logged; the message stays skipped either way.
func ForeignReporter(pub *bus.Publisher, log *slog.Logger) func(context.Context, readmodel.Foreign) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(ctx context.Context, f readmodel.Foreign) {
		log.Warn("attest: foreign message on a receipt chain skipped", "namespace", f.Namespace, "name", f.Name,
			"stream_seq", f.StreamSeq, "reason", string(f.Reason), "detail", f.Detail)
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
		defer cancel()
		if _, err := pub.PublishEvent(pctx, ForeignAnomaly(f, time.Now())); err != nil {
			log.Warn("attest: report foreign receipt message", "stream_seq", f.StreamSeq, "error", err)
		}
	}
}

// publishTimeout bounds one report's publish.
const publishTimeout = 5 * time.Second
