package watcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/telemetry/logattr"
	"github.com/lava-operator/lava/internal/service/phase"
)

// errGone reports that the object, or the incarnation of it an event is about, no longer
// exists.
var errGone = errors.New("watcher: object gone")

// snapshot is the last status this process patched for one object, with the resourceVersion
// the patch returned.
type snapshot struct {
	uid    types.UID
	rv     string
	status v1alpha1.LavaArchitectureStatus
}

// cause is the event a fold comes from, for the PhaseChanged it publishes.
type cause struct {
	// eventID is the cause's event_id; PhaseChanged's id is derived from it.
	eventID string
	// correlationID is copied into PhaseChanged.
	correlationID string
	// diagnostics are copied into PhaseChanged (a failure's message).
	diagnostics []string
}

// foldResult is what [statusWriter.fold] did.
type foldResult struct {
	tr phase.Transition
	// obj is the object after the fold (patched, or as read when nothing changed).
	obj *v1alpha1.LavaArchitecture
}

// statusWriter folds phase events into LavaArchitecture status: one at a time per object, from
// the last status this process patched (not the informer cache), patching the status
// subresource with an optimistic lock only when the reduced status changed.
type statusWriter struct {
	c       client.Client // writes
	api     client.Reader // uncached reads, for conflicts and first use
	pub     *bus.Publisher
	rec     recorder.EventRecorder
	metrics *Metrics
	log     *slog.Logger

	mu    sync.Mutex
	locks map[types.NamespacedName]*keyLock
	last  map[types.NamespacedName]snapshot
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

func newStatusWriter(c client.Client, api client.Reader, pub *bus.Publisher, rec recorder.EventRecorder, m *Metrics, log *slog.Logger) *statusWriter {
	return &statusWriter{c: c, api: api, pub: pub, rec: rec, metrics: m, log: log,
		locks: map[types.NamespacedName]*keyLock{}, last: map[types.NamespacedName]snapshot{}}
}

// lock serializes work on one object; the returned func unlocks.
func (w *statusWriter) lock(key types.NamespacedName) func() {
	w.mu.Lock()
	l := w.locks[key]
	if l == nil {
		l = &keyLock{}
		w.locks[key] = l
	}
	l.refs++
	w.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		w.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(w.locks, key)
		}
		w.mu.Unlock()
	}
}

// remember records obj's status and resourceVersion as the last known.
func (w *statusWriter) remember(obj *v1alpha1.LavaArchitecture) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last[client.ObjectKeyFromObject(obj)] = snapshot{uid: obj.UID, rv: obj.ResourceVersion, status: *obj.Status.DeepCopy()}
}

// forget drops what is known about key (the object is gone).
func (w *statusWriter) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, key)
}

func (w *statusWriter) snapshot(key types.NamespacedName) (snapshot, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.last[key]
	return s, ok
}

// conditionTrue reports whether condition typ is True in the last status known for obj: the
// remembered snapshot of the same incarnation, else obj's (cached) status.
func (w *statusWriter) conditionTrue(obj *v1alpha1.LavaArchitecture, typ string) bool {
	st := obj.Status
	if s, ok := w.snapshot(client.ObjectKeyFromObject(obj)); ok && s.uid == obj.UID {
		st = s.status
	}
	return meta.IsStatusConditionTrue(st.Conditions, typ)
}

// base returns the object to reduce from: the remembered snapshot on the first attempt (a
// partial object: name, uid, resourceVersion and status, enough for a merge patch), or a
// fresh read from the API server (also when the snapshot is of another incarnation than uid).
func (w *statusWriter) base(ctx context.Context, key types.NamespacedName, uid types.UID, useMemory bool) (*v1alpha1.LavaArchitecture, error) {
	if s, ok := w.snapshot(key); ok && useMemory && (uid == "" || s.uid == uid) {
		obj := &v1alpha1.LavaArchitecture{}
		obj.Namespace, obj.Name, obj.UID, obj.ResourceVersion = key.Namespace, key.Name, s.uid, s.rv
		obj.Status = *s.status.DeepCopy()
		return obj, nil
	}
	obj := &v1alpha1.LavaArchitecture{}
	if err := w.api.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			w.forget(key)
			return nil, errGone
		}
		return nil, fmt.Errorf("watcher: get %s: %w", key, err)
	}
	return obj, nil
}

// fold reduces ev into the status of key (which must have uid, unless uid is empty) and
// patches the status subresource if it changed. It publishes PhaseChanged for an accepted
// transition before the patch (its id derives from c.eventID, so a retry re-publishes the same
// id), and records a Kubernetes Event after it. A conflict re-reads the object and reduces
// again. Errors: errGone, a *phase.IllegalTransitionError, phase.ErrInvalidEvent, or a
// transient API or NATS error.
func (w *statusWriter) fold(ctx context.Context, key types.NamespacedName, uid types.UID, ev phase.Event, c cause) (foldResult, error) {
	unlock := w.lock(key)
	defer unlock()
	return w.foldLocked(ctx, key, uid, ev, c)
}

func (w *statusWriter) foldLocked(ctx context.Context, key types.NamespacedName, uid types.UID, ev phase.Event, c cause) (foldResult, error) {
	var (
		res       foldResult
		published bool
		attempt   int
	)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		attempt++
		base, err := w.base(ctx, key, uid, attempt == 1)
		if err != nil {
			return err
		}
		if uid != "" && base.UID != uid {
			return errGone
		}
		next, tr, err := phase.Reduce(base.Status, ev)
		res.tr, res.obj = tr, base
		if err != nil {
			return err
		}
		if !tr.Changed {
			w.remember(base)
			return nil
		}
		if tr.Publish && !published {
			if err := w.publishPhaseChanged(ctx, base, next, tr, ev, c); err != nil {
				return err
			}
			published = true
		}
		obj := base.DeepCopy()
		obj.Status = next
		patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
		if err := w.c.Status().Patch(ctx, obj, patch); err != nil {
			switch {
			case apierrors.IsConflict(err):
				w.metrics.inc(func(m *Metrics) prometheus.Counter { return m.statusConflicts })
				w.log.Debug("watcher: status patch conflict, re-reading", logattr.Resource(key.Namespace, key.Name))
				return err
			case apierrors.IsNotFound(err):
				w.forget(key)
				return errGone
			}
			return fmt.Errorf("watcher: patch status of %s: %w", key, err)
		}
		w.metrics.inc(func(m *Metrics) prometheus.Counter { return m.statusPatches })
		w.remember(obj)
		res.obj = obj
		w.record(obj, tr, ev)
		return nil
	})
	return res, err
}

// record emits a Kubernetes Event for an accepted transition.
func (w *statusWriter) record(obj *v1alpha1.LavaArchitecture, tr phase.Transition, ev phase.Event) {
	if w.rec == nil || !tr.Publish {
		return
	}
	typ := corev1.EventTypeNormal
	if ev.Type == phase.EventFailed || ev.Type == phase.EventDependenciesBlocked || ev.Type == phase.EventDrifted {
		typ = corev1.EventTypeWarning
	}
	reason, msg := TransitionReason(obj.Status, ev)
	note := fmt.Sprintf("%s -> %s (generation %d): %s", nameOrPending(tr.From), tr.To, ev.Generation, reason)
	if msg != "" {
		note += ": " + msg
	}
	if len(note) > 1024 {
		note = note[:1024]
	}
	// The Event reason is the event type (Synthesized, Failed, DependenciesBlocked, ...).
	w.rec.Eventf(obj, nil, typ, string(ev.Type), "Transition", "%s", note)
}

func nameOrPending(p v1alpha1.Phase) v1alpha1.Phase {
	if p == "" {
		return v1alpha1.PhasePending
	}
	return p
}

// conditionOf is the condition an event type sets, for the reason and message of its
// PhaseChanged; "" means the kstatus Ready condition.
func conditionOf(t phase.EventType) string {
	switch t {
	case phase.EventSuspended, phase.EventResumed:
		return v1alpha1.ConditionSuspended
	case phase.EventDependenciesBlocked, phase.EventDependenciesSatisfied:
		return v1alpha1.ConditionDependenciesReady
	case phase.EventDrifted, phase.EventReconverging, phase.EventDriftClean:
		return v1alpha1.ConditionDrifted
	}
	return v1alpha1.ConditionReady
}

// TransitionReason is the CamelCase reason and the message of a transition (for its
// PhaseChanged and Kubernetes Event): the event's reason and message when it has them, else
// those of the condition the event sets in st, else the event type. lava up's file source uses it
// too, so both fold phase events the same way.
func TransitionReason(st v1alpha1.LavaArchitectureStatus, ev phase.Event) (string, string) {
	reason, msg := ev.Reason, ev.Message
	if c := meta.FindStatusCondition(st.Conditions, conditionOf(ev.Type)); c != nil {
		if reason == "" {
			reason = c.Reason
		}
		if msg == "" {
			msg = c.Message
		}
	}
	if reason == "" {
		reason = string(ev.Type)
	}
	return reason, msg
}

// publishPhaseChanged publishes the PhaseChanged of a transition from base to next.
func (w *statusWriter) publishPhaseChanged(ctx context.Context, base *v1alpha1.LavaArchitecture, next v1alpha1.LavaArchitectureStatus,
	tr phase.Transition, ev phase.Event, c cause) error {
	trigger := eventid.CauseTrigger(c.eventID)
	pc := &lavav1.PhaseChanged{
		From:         PhaseProto(base.Status.Phase),
		To:           PhaseProto(next.Phase),
		Diagnostics:  c.diagnostics,
		CauseEventId: c.eventID,
	}
	pc.Envelope = &lavav1.Envelope{
		EventId:       eventid.ID(string(base.UID), ev.Generation, eventid.Type(pc), trigger),
		OccurredAt:    timestamppb.New(ev.Time),
		Source:        bus.ServiceWatcher,
		Resource:      &lavav1.ResourceRef{Namespace: base.Namespace, Name: base.Name, Uid: string(base.UID)},
		Generation:    ev.Generation,
		CorrelationId: c.correlationID,
		Trigger:       trigger,
	}
	pc.Reason, pc.Message = TransitionReason(next, ev)
	if r := next.Render; r != nil {
		pc.SourceDigest, pc.BindingsDigest, pc.TerraformJsonDigest = r.SourceDigest, r.BindingsDigest, r.TerraformJSONDigest
	}
	if p := next.Plan; p != nil {
		pc.PlanId = p.ID
		pc.ChangeSummary = &lavav1.ChangeSummary{Add: p.Add, Change: p.Change, Destroy: p.Destroy}
	}
	if _, err := w.pub.PublishEvent(ctx, pc); err != nil {
		return fmt.Errorf("watcher: publish PhaseChanged: %w", err)
	}
	w.metrics.incPublished(publishedPhaseChanged)
	w.log.Info("watcher: phase transition", logattr.Resource(base.Namespace, base.Name), logattr.Generation(ev.Generation),
		slog.String("event", string(ev.Type)), slog.String("from", string(tr.From)), slog.String("to", string(tr.To)),
		logattr.EventID(pc.Envelope.EventId))
	return nil
}

// removeFinalizer removes the lava finalizer from key (when the object is being deleted),
// re-reading it on conflict. A missing object is success.
func (w *statusWriter) removeFinalizer(ctx context.Context, key types.NamespacedName, uid types.UID) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj := &v1alpha1.LavaArchitecture{}
		if err := w.api.Get(ctx, key, obj); err != nil {
			return err
		}
		if (uid != "" && obj.UID != uid) || !controllerutil.ContainsFinalizer(obj, v1alpha1.Finalizer) {
			return nil
		}
		if obj.DeletionTimestamp == nil {
			w.log.Warn("watcher: Destroyed for an object that is not being deleted; finalizer kept", logattr.Resource(key.Namespace, key.Name))
			return nil
		}
		orig := obj.DeepCopy()
		controllerutil.RemoveFinalizer(obj, v1alpha1.Finalizer)
		return w.c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	})
	if apierrors.IsNotFound(err) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("watcher: remove finalizer of %s: %w", key, err)
	}
	w.metrics.inc(func(m *Metrics) prometheus.Counter { return m.finalizerRemoved })
	w.forget(key)
	return nil
}

// now is the time of an event the watcher produces itself.
func now(clock func() time.Time) time.Time {
	if clock == nil {
		return time.Now()
	}
	return clock()
}
