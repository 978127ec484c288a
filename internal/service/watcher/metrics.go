package watcher

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Values of the "event" label of lava_watcher_published_total.
const (
	publishedResourceObserved  = "resource_observed"
	publishedDeletionRequested = "deletion_requested"
	publishedPhaseChanged      = "phase_changed"
)

// Values of the "result" label of lava_watcher_phase_events_total.
const (
	resultFolded    = "folded"    // the status changed and was patched
	resultUnchanged = "unchanged" // the reducer accepted it but nothing changed
	resultStale     = "stale"     // older than status.observedGeneration
	resultIllegal   = "illegal"   // not allowed in the current phase; dropped
	resultGone      = "gone"      // the object (or that incarnation of it) no longer exists
	resultIgnored   = "ignored"   // not a status-relevant event, or another watcher's namespace
	resultError     = "error"     // a transient failure; the message is redelivered
)

// Metrics are the watcher's own Prometheus metrics (the controller's reconcile counters are
// controller-runtime's, in its registry sigs.k8s.io/controller-runtime/pkg/metrics.Registry).
// Labels are closed sets; a nil *Metrics records nothing.
type Metrics struct {
	published        *prometheus.CounterVec
	phaseEvents      *prometheus.CounterVec
	statusPatches    prometheus.Counter
	statusConflicts  prometheus.Counter
	finalizerAdded   prometheus.Counter
	finalizerRemoved prometheus.Counter
	held             *prometheus.CounterVec
}

// NewMetrics creates the watcher metrics and registers them on reg:
//
//   - lava_watcher_published_total{event}: events published (resource_observed,
//     deletion_requested, phase_changed), de-duplicated publishes included;
//   - lava_watcher_phase_events_total{result}: consumed phase events by outcome (folded,
//     unchanged, stale, illegal, gone, ignored, error);
//   - lava_watcher_status_patches_total: status subresource patches that succeeded;
//   - lava_watcher_status_patch_conflicts_total: status patches refused with 409 Conflict
//     (each one is retried after re-reading the object);
//   - lava_watcher_finalizers_added_total and lava_watcher_finalizers_removed_total;
//   - lava_watcher_held_total{reason}: reconciles that published nothing because the resource
//     is suspended, blocked by a dependency, in a dependency cycle, or its referenced
//     RemediationPolicy is missing (suspended, dependencies, cycle, policy_missing).
//
// It fails if reg already holds metrics of these names.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "watcher", Name: "published_total",
			Help: "Events published by the watcher, by event.",
		}, []string{"event"}),
		phaseEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "watcher", Name: "phase_events_total",
			Help: "Consumed phase events by outcome.",
		}, []string{"result"}),
		statusPatches: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "watcher", Name: "status_patches_total",
			Help: "Successful patches of the LavaArchitecture status subresource.",
		}),
		statusConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "watcher", Name: "status_patch_conflicts_total",
			Help: "Status patches refused with a conflict and retried after re-reading the object.",
		}),
		finalizerAdded: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "watcher", Name: "finalizers_added_total",
			Help: "Finalizers added to LavaArchitectures.",
		}),
		finalizerRemoved: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "watcher", Name: "finalizers_removed_total",
			Help: "Finalizers removed from LavaArchitectures after Destroyed.",
		}),
		held: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "watcher", Name: "held_total",
			Help: "Reconciles that published no work, by reason.",
		}, []string{"reason"}),
	}
	for _, e := range []string{publishedResourceObserved, publishedDeletionRequested, publishedPhaseChanged} {
		m.published.WithLabelValues(e)
	}
	for _, r := range []string{resultFolded, resultUnchanged, resultStale, resultIllegal, resultGone, resultIgnored, resultError} {
		m.phaseEvents.WithLabelValues(r)
	}
	for _, r := range []string{heldSuspended, heldDependencies, heldCycle, heldPolicyMissing, heldSource, heldDeletion} {
		m.held.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{m.published, m.phaseEvents, m.statusPatches, m.statusConflicts,
		m.finalizerAdded, m.finalizerRemoved, m.held} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("watcher: register metrics: %w", err)
		}
	}
	return m, nil
}

// Values of the "reason" label of lava_watcher_held_total.
const (
	heldSuspended     = "suspended"
	heldDependencies  = "dependencies"
	heldCycle         = "cycle"
	heldPolicyMissing = "policy_missing"
	heldSource        = "source"
	heldDeletion      = "deletion_blocked"
)

func (m *Metrics) incPublished(event string) {
	if m != nil {
		m.published.WithLabelValues(event).Inc()
	}
}

func (m *Metrics) incPhaseEvent(result string) {
	if m != nil {
		m.phaseEvents.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) incHeld(reason string) {
	if m != nil {
		m.held.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) inc(c func(*Metrics) prometheus.Counter) {
	if m != nil {
		c(m).Inc()
	}
}
