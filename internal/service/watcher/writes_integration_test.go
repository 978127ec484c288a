//go:build integration

package watcher_test

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
)

// testWrites: the API writes of one object from create to Applied when its phase events
// arrive in a burst are at most 4 (the finalizer, the Observed status, one status write for
// Synthesized, Planned and Applied, one Event for Applied), with a PhaseChanged for every
// transition; then 1,000 clean drift scans write nothing (docs/design/0007-status-writes.md).
func (e *env) testWrites(t *testing.T) {
	ns := e.kube.Namespace(t)
	w := e.startWatcher(t, ns, "writes")
	e.create(t, newArch(ns, "burst", nil))
	e.waitStatus(t, ns, "burst", phaseIs(v1alpha1.PhasePending, 1))
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(ns, "burst", bus.EventObserved), 1)
	obj := e.get(t, ns, "burst")
	ro := e.observed(t, ns, "burst")[0]
	if n := w.metric(t, "lava_watcher_status_patches_total", nil); n != 1 {
		t.Errorf("%v status patches for Observed, want 1", n)
	}

	s := e.stageFor(obj, ro)
	s.synthesized(t)
	s.planned(t)
	s.applied(t)
	e.waitStatus(t, ns, "burst", phaseIs(v1alpha1.PhaseApplied, 1))
	e.waitCount(t, bus.StreamPhases, bus.PhaseSubject(ns, "burst", bus.EventPhaseChanged), 4)
	eventually(t, 10*time.Second, func() error {
		if got := e.eventReasons(t, ns, "burst"); len(got) != 1 || got[0] != "Applied" {
			return fmt.Errorf("events %v, want [Applied]", got)
		}
		return nil
	})
	finalizers := w.metric(t, "lava_watcher_finalizers_added_total", nil)
	patches := w.metric(t, "lava_watcher_status_patches_total", nil)
	conflicts := w.metric(t, "lava_watcher_status_patch_conflicts_total", nil)
	events := float64(len(e.eventReasons(t, ns, "burst")))
	writes := finalizers + patches + conflicts + events
	t.Logf("API writes from create to Applied: finalizer %v, status patches %v (conflicts %v), events %v", finalizers, patches, conflicts, events)
	if patches > 2 || writes > 4 {
		t.Errorf("%v API writes (%v status patches) from create to Applied, want at most 4 (2)", writes, patches)
	}

	// 1,000 clean drift scans: no status patch, no PhaseChanged, no Event.
	pcs := e.phaseChangedCount(t, ns, "burst")
	unchanged := w.metric(t, "lava_watcher_phase_events_total", map[string]string{"result": "unchanged"})
	// In batches of 50: LAVA_PHASES keeps the last bus.PhaseHistoryPerSubject (64) per subject.
	for batch := range 20 {
		for i := range 50 {
			scan := &lavav1.DriftScanned{}
			trigger := eventid.CauseTrigger(fmt.Sprintf("tick-%d-%d", batch, i))
			scan.Envelope = &lavav1.Envelope{EventId: eventid.ID(string(obj.UID), 1, eventid.Type(scan), trigger), Source: bus.ServiceDrift,
				Resource: s.ref, Generation: 1, Trigger: trigger, CorrelationId: s.corr}
			if _, err := e.pub.PublishEvent(t.Context(), scan); err != nil {
				t.Fatal(err)
			}
		}
		want := unchanged + float64(50*(batch+1))
		eventually(t, 30*time.Second, func() error {
			if n := w.metric(t, "lava_watcher_phase_events_total", map[string]string{"result": "unchanged"}); n < want {
				return fmt.Errorf("%v of %v clean scans folded", n-unchanged, want-unchanged)
			}
			return nil
		})
	}
	if got := w.metric(t, "lava_watcher_status_patches_total", nil); got != patches {
		t.Errorf("1,000 clean scans made %v status patches, want 0", got-patches)
	}
	if n := e.phaseChangedCount(t, ns, "burst"); n != pcs {
		t.Errorf("1,000 clean scans published %d PhaseChanged, want 0", n-pcs)
	}
	if got := len(e.eventReasons(t, ns, "burst")); float64(got) != events {
		t.Errorf("1,000 clean scans recorded %v Events, want 0", float64(got)-events)
	}
	if c := meta.FindStatusCondition(e.get(t, ns, "burst").Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonSucceeded {
		t.Errorf("Ready after the clean scans = %+v", c)
	}
}
