package anomaly

import (
	"context"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// Kinds lists every kind, in enum order.
func Kinds() []Kind {
	return []Kind{KindDriftDetected, KindSynthesisFailure, KindGateRejected, KindApplyFailure, KindDestroyFailure,
		KindDependencyBlocked, KindPolicyViolation, KindStalled, KindCustom}
}

// FixedRouter returns the same decision for every anomaly (upstream's MockRouter).
type FixedRouter struct {
	// Decision is returned by Route.
	Decision Decision
}

// Route implements [Router].
func (r FixedRouter) Route(LavaAnomaly, *lavav1.RemediationPolicy) (Decision, error) {
	return r.Decision, nil
}

// Windows is the service's de-duplication state.
func (s *Service) Windows() *Windows { return s.windows }

// Get returns the window of key, or nil when there is none.
func (w *Windows) Get(ctx context.Context, key string) (*Window, error) {
	win, _, err := w.get(ctx, key)
	return win, err
}
