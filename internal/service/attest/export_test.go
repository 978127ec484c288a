package attest

import (
	"context"
	"time"

	"github.com/lava-operator/lava/internal/platform/bus"
)

// Record appends the receipt of one event (a PhaseChanged, a TickReported or an
// AnomalyDetected; other types wrap [ErrInvalidRequest]) after the chain's head and publishes
// ReceiptAppended, as [Service.Handle] does without its phase order. notBefore is when the
// event was stored in its stream (zero if unknown; see [AppendRequest]). Recording an event
// again appends nothing and publishes the same ReceiptAppended (same event id) again.
func (s *Service) Record(ctx context.Context, ev bus.Event, notBefore time.Time) (*Appended, error) {
	req, err := request(ev, notBefore)
	if err != nil {
		return nil, err
	}
	return s.record(ctx, ev.GetEnvelope(), req)
}
