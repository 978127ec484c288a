package watcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/telemetry/logattr"
)

// ErrGone reports that the object, or the incarnation of it an event is about, no longer
// exists. A [Store] returns it; [Core.Fold] returns it for an event about such an object.
var ErrGone = errors.New("watcher: object gone")

// errGone is the package's short name of [ErrGone].
var errGone = ErrGone

// Store is where LavaArchitecture objects live: the API server (the watcher, [NewAPIStore]) or
// lava up's files (internal/up). The [Core] reads an object once, then keeps the last object a
// Store returned and writes only status through it.
type Store interface {
	// Get reads the object key as stored now (a copy the caller may keep), or returns
	// [ErrGone] when it does not exist.
	Get(ctx context.Context, key types.NamespacedName) (*v1alpha1.LavaArchitecture, error)
	// UpdateStatus writes status as the status of obj (the object as last returned by Get or
	// UpdateStatus, reduced to its type, name, namespace, uid, resourceVersion, generation and
	// status) and returns the object as stored. It is an
	// optimistic lock: an error for which apierrors.IsConflict is true makes the Core read the
	// object again and reduce its events again; [ErrGone] when the object no longer exists.
	UpdateStatus(ctx context.Context, obj *v1alpha1.LavaArchitecture, status v1alpha1.LavaArchitectureStatus) (*v1alpha1.LavaArchitecture, error)
	// Release ends the object's life after Destroyed (the API server: the finalizer is removed;
	// files: the object and its file go). An object that is gone, or of another uid, is success.
	Release(ctx context.Context, key types.NamespacedName, uid types.UID) error
}

// Cause is the event a fold comes from, for the PhaseChanged it publishes.
type Cause struct {
	// EventID is the cause's event_id; PhaseChanged's id is derived from it, so a retried fold
	// publishes the same id again (the stream drops the duplicate).
	EventID string
	// CorrelationID is copied into PhaseChanged.
	CorrelationID string
	// Diagnostics are copied into PhaseChanged (a failure's message).
	Diagnostics []string
	// Seq is the event's sequence in LAVA_PHASES, or 0 for an event that does not come from
	// the stream. An Applied or Failed older than one of the same generation already folded
	// is superseded (see [outcomeMark]).
	Seq uint64
}

// outcomeMark is the newest outcome (Applied or Failed) of one generation folded into an
// entry's status: its generation and its sequence in LAVA_PHASES. Several handlers fold an
// object's events at once, so a Failed can reach the Core after the Applied of its retry (or
// an Applied after a later Failed); the stream's order says which came last, and the older
// outcome is dropped instead of overwriting the newer one. Only outcomes set the mark: a
// generation's earlier events may be folded after its outcome when they were delivered
// again, and they are the reducer's to order.
type outcomeMark struct {
	gen int64
	seq uint64
}

// outcome reports whether t is an outcome of a generation's way through the pipeline.
func outcome(t pipeline.EventType) bool {
	return t == pipeline.EventApplied || t == pipeline.EventFailed
}

// superseded reports whether ev, of sequence seq, is an outcome older than the mark's of its
// generation.
func (m outcomeMark) superseded(ev pipeline.Event, seq uint64) bool {
	return seq != 0 && outcome(ev.Type) && ev.Generation == m.gen && seq < m.seq
}

// next returns the mark after folding ev of sequence seq.
func (m outcomeMark) next(ev pipeline.Event, seq uint64) outcomeMark {
	if seq == 0 || !outcome(ev.Type) || ev.Generation < m.gen || (ev.Generation == m.gen && seq < m.seq) {
		return m
	}
	return outcomeMark{gen: ev.Generation, seq: seq}
}

// CoreConfig configures [NewCore]. Store and Publisher are required.
type CoreConfig struct {
	// Store holds the objects.
	Store Store
	// Publisher publishes PhaseChanged.
	Publisher *bus.Publisher
	// Recorder, if set, records a Kubernetes Event for each transition a user acts on: to
	// Applied, Failed, Drifted, or a plan awaiting approval (see [Actionable]). controller-
	// runtime's recorder aggregates repeated Events into a series.
	Recorder recorder.EventRecorder
	// Metrics, if set, counts folds, patches and conflicts.
	Metrics *Metrics
	// Logger receives a line per transition. Default: discard.
	Logger *slog.Logger
	// Window is how long the status of an object that reached a settled phase (Applied,
	// Failed, Drifted, awaiting approval, Finalizing) waits for more events of the same object
	// before it is written. Zero with Hold zero writes every fold at once.
	Window time.Duration
	// Hold is how long the status of an object in a phase a later event of the pipeline
	// supersedes (Pending, Synthesized, Planned, Reconverging) waits before it is written; the
	// write comes sooner when the object settles. Zero means Window.
	Hold time.Duration
	// MaxHeld bounds the folds waiting out a Hold at once; beyond it an intermediate phase
	// waits only Window. A waiting fold occupies one of the phase consumer's handlers, so the
	// watcher sets it below its phase concurrency: events that would settle the held objects
	// (an Applied) always find a free handler. Zero: no bound.
	MaxHeld int
	// Rewrite, if set, rewrites a consumed phase event and its diagnostics before the fold
	// (lava up maps inline-source positions to the manifest).
	Rewrite func(key types.NamespacedName, ev *pipeline.Event, diagnostics []string)
	// OnTransition, if set, is called for each accepted transition (a PhaseChanged published).
	OnTransition func(key types.NamespacedName, tr pipeline.Transition, ev pipeline.Event)
	// OnWrite, if set, is called after a status write or a release.
	OnWrite func(key types.NamespacedName)
	// Namespaces, if set, says which namespaces' phase events are folded; the others are acked
	// and ignored.
	Namespaces func(namespace string) bool
}

// Defaults of the coalescing of [CoreConfig] in the watcher service (see
// docs/design/0007-status-writes.md).
const (
	// DefaultStatusWindow is the watcher's [CoreConfig].Window.
	DefaultStatusWindow = 50 * time.Millisecond
	// DefaultStatusHold is the watcher's [CoreConfig].Hold.
	DefaultStatusHold = 5 * time.Second
)

// Core is the watcher's one implementation of folding phase events into status: it reduces
// each event with [pipeline.Reduce] onto the last status known for the object, publishes
// PhaseChanged for every accepted transition at once, and writes the status through its
// [Store], coalescing the events of one object that arrive within a short window into one
// write. An event consumed from LAVA_PHASES is acked only after the write that holds it, so
// nothing is lost when the process stops. The head of the receipt chain (ReceiptAppended)
// never causes a write of its own: it rides on the object's next status write.
type Core struct {
	cfg CoreConfig

	mu      sync.Mutex
	entries map[types.NamespacedName]*entry
	held    int // waiters of entries whose write waits out a Hold (under mu)
}

// entry is what the Core knows of one object.
type entry struct {
	mu   sync.Mutex
	core *Core
	// stored is the object as last read or written (nil: read it first).
	stored *v1alpha1.LavaArchitecture
	// status is stored.Status with the events folded since the last write.
	status v1alpha1.LavaArchitectureStatus
	// events are the events folded since the last write, in order, reduced again onto a
	// fresh read after a conflict.
	events []pipeline.Event
	// dirty: status differs from stored.Status in more than the receipt head.
	dirty bool
	// release: a Destroyed was folded; the object is released after the write.
	release bool
	// notes are the Kubernetes Events to record after the write.
	notes []note
	// waiters are the folds waiting for the next write.
	waiters []chan error
	timer   *time.Timer
	due     time.Time
	// held is how many of waiters are counted in Core.held.
	held int
	// changed, if not nil, is closed (and cleared) when status changes or the entry is
	// dropped: an event that arrived ahead of its predecessor waits on it ([Core.HandlePhase]).
	changed chan struct{}
	// mark is the newest outcome folded into status; written is the mark of the last write
	// (what status is back to after a failed write).
	mark, written outcomeMark
}

// changes returns a channel closed at the next change of e.status (under e.mu).
func (e *entry) changes() <-chan struct{} {
	if e.changed == nil {
		e.changed = make(chan struct{})
	}
	return e.changed
}

// signal closes the channel [entry.changes] returned, if any (under e.mu).
func (e *entry) signal() {
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
}

type note struct {
	tr pipeline.Transition
	ev pipeline.Event
}

// NewCore returns a Core over cfg.Store.
func NewCore(cfg CoreConfig) (*Core, error) {
	if cfg.Store == nil || cfg.Publisher == nil {
		return nil, errors.New("watcher: core: Store and Publisher are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Hold <= 0 {
		cfg.Hold = cfg.Window
	}
	return &Core{cfg: cfg, entries: map[types.NamespacedName]*entry{}}, nil
}

func (c *Core) entry(key types.NamespacedName) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	if e == nil {
		e = &entry{core: c}
		c.entries[key] = e
	}
	return e
}

// Forget drops what is known about key (the object is gone, or was changed elsewhere).
// Folds waiting for its write fail, so their events are delivered again.
func (c *Core) Forget(key types.NamespacedName) {
	c.mu.Lock()
	e := c.entries[key]
	delete(c.entries, key)
	c.mu.Unlock()
	if e != nil {
		e.mu.Lock()
		e.fail(errGone)
		e.signal()
		e.mu.Unlock()
	}
}

// Remember records obj (as the Store returned it, e.g. after a metadata patch) as the last
// known object of its key, unless events folded into it are waiting for a write: then only its
// resourceVersion is kept.
func (c *Core) Remember(obj *v1alpha1.LavaArchitecture) {
	e := c.entry(types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name})
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stored != nil && e.stored.UID == obj.UID && len(e.events) > 0 {
		e.stored.ResourceVersion = obj.ResourceVersion
		return
	}
	if len(e.waiters) > 0 {
		e.fail(errGone)
	}
	e.reset(obj) // reset keeps a statusOnly copy
}

// Status returns the status known for key of incarnation uid (stored, with the folds not yet
// written), and whether one is known.
func (c *Core) Status(key types.NamespacedName, uid types.UID) (v1alpha1.LavaArchitectureStatus, bool) {
	c.mu.Lock()
	e := c.entries[key]
	c.mu.Unlock()
	if e == nil {
		return v1alpha1.LavaArchitectureStatus{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stored == nil || (uid != "" && e.stored.UID != uid) {
		return v1alpha1.LavaArchitectureStatus{}, false
	}
	return *e.status.DeepCopy(), true
}

// reset makes a [statusOnly] copy of obj the stored object, dropping unwritten folds (their
// waiters must have been answered).
func (e *entry) reset(obj *v1alpha1.LavaArchitecture) {
	if obj != nil {
		obj = statusOnly(obj)
	}
	e.stored = obj
	e.signal()
	e.events, e.dirty, e.release, e.notes = nil, false, false, nil
	e.mark, e.written = outcomeMark{}, outcomeMark{}
	if obj != nil {
		e.status = *obj.Status.DeepCopy()
	} else {
		e.status = v1alpha1.LavaArchitectureStatus{}
	}
}

// answer answers every waiter of e with err.
func (e *entry) answer(err error) {
	for _, w := range e.waiters {
		w <- err
	}
	e.waiters = nil
	if e.held > 0 && e.core != nil {
		e.core.mu.Lock()
		e.core.held -= e.held
		e.core.mu.Unlock()
	}
	e.held = 0
}

// fail answers every waiter with err and drops the unwritten folds: their events come back
// (they were not acked) and are folded again.
func (e *entry) fail(err error) {
	e.answer(err)
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	if e.stored != nil {
		written := e.written
		e.reset(e.stored)
		e.mark, e.written = written, written
	}
}

// Fold reduces ev into the status of key (which must be incarnation uid, unless uid is empty)
// and writes it before it returns, together with any events of the object waiting for a write.
// It publishes PhaseChanged for an accepted transition before the write, and releases the
// object after Destroyed. Errors: [ErrGone], a *pipeline.IllegalTransitionError,
// pipeline.ErrInvalidEvent, or a transient Store or NATS error.
func (c *Core) Fold(ctx context.Context, key types.NamespacedName, uid types.UID, ev pipeline.Event, cause Cause) (pipeline.Transition, error) {
	return c.fold(ctx, key, uid, ev, cause, true)
}

// FoldCoalesced is [Core.Fold] without waiting for the write: the status is written with the
// object's next write (at the latest after the Hold or Window of its phase). Use it only for an
// event whose loss a later event repairs: an Observed of a new generation, which the reducer
// also derives from any later lifecycle event of that generation.
func (c *Core) FoldCoalesced(ctx context.Context, key types.NamespacedName, uid types.UID, ev pipeline.Event, cause Cause) (pipeline.Transition, error) {
	return c.foldMode(ctx, key, uid, ev, cause, modeNoWait)
}

type foldMode int

const (
	modeNow    foldMode = iota // write before returning
	modeWait                   // coalesce; return after the write
	modeNoWait                 // coalesce; return at once
)

// fold is [Core.Fold]; without now the write may wait for the object's window, and fold
// returns after it.
func (c *Core) fold(ctx context.Context, key types.NamespacedName, uid types.UID, ev pipeline.Event, cause Cause, now bool) (pipeline.Transition, error) {
	if now {
		return c.foldMode(ctx, key, uid, ev, cause, modeNow)
	}
	return c.foldMode(ctx, key, uid, ev, cause, modeWait)
}
func (c *Core) foldMode(ctx context.Context, key types.NamespacedName, uid types.UID, ev pipeline.Event, cause Cause, mode foldMode) (pipeline.Transition, error) {
	e := c.entry(key)
	e.mu.Lock()
	if e.stored == nil || (uid != "" && e.stored.UID != uid) {
		if len(e.waiters) > 0 {
			e.fail(errGone)
		}
		obj, err := c.cfg.Store.Get(ctx, key)
		if err != nil {
			e.mu.Unlock()
			if errors.Is(err, errGone) {
				c.drop(key, e)
			}
			return pipeline.Transition{}, err
		}
		e.reset(obj)
	}
	if uid != "" && e.stored.UID != uid {
		e.mu.Unlock()
		return pipeline.Transition{}, errGone
	}
	if e.mark.superseded(ev, cause.Seq) {
		e.mu.Unlock()
		from := pipeline.Phase(e.status.Phase)
		c.cfg.Logger.Debug("watcher: phase event superseded by a later one of its generation", logattr.Resource(key.Namespace, key.Name),
			slog.String("event", string(ev.Type)), slog.Uint64("seq", cause.Seq), slog.Uint64("later", e.mark.seq))
		return pipeline.Transition{Event: ev.Type, Generation: ev.Generation, From: from, To: from}, nil
	}
	next, tr, err := pipeline.Reduce(e.status, ev)
	if err != nil {
		var illegal *pipeline.IllegalTransitionError
		if errors.As(err, &illegal) && !behind(illegal) {
			err = &aheadError{IllegalTransitionError: illegal, changed: e.changes()}
		}
		e.mu.Unlock()
		return tr, err
	}
	if tr.RemoveFinalizer && !tr.Stale {
		e.release = true
	}
	if tr.Changed {
		if tr.Publish {
			if err := c.publishPhaseChanged(ctx, e.stored, e.status, next, tr, ev, cause); err != nil {
				e.mu.Unlock()
				return tr, err
			}
		}
		e.mark = e.mark.next(ev, cause.Seq)
		e.status = next
		e.signal()
		e.events = append(e.events, ev)
		if ev.Type != pipeline.EventReceiptAppended {
			e.dirty = true
		}
		if tr.Publish && Actionable(e.status, ev) {
			e.notes = append(e.notes, note{tr: tr, ev: ev})
		}
		if tr.Publish && c.cfg.OnTransition != nil {
			c.cfg.OnTransition(key, tr, ev)
		}
	}
	switch {
	case !e.dirty && !e.release:
		// Nothing to write (unchanged, or only the receipt head, which rides on the next write).
		e.mu.Unlock()
		return tr, nil
	case mode == modeNow || e.release || (c.cfg.Window <= 0 && c.cfg.Hold <= 0):
		err := c.flushLocked(ctx, key, e)
		e.mu.Unlock()
		return tr, err
	}
	if !tr.Changed {
		// A redelivery of an event already folded and waiting: the first delivery is acked
		// after the write.
		e.mu.Unlock()
		return tr, nil
	}
	if mode == modeNoWait {
		if c.schedule(key, e) {
			// No waiter holds a handler: do not count it.
			c.mu.Lock()
			c.held--
			c.mu.Unlock()
		}
		e.mu.Unlock()
		return tr, nil
	}
	done := make(chan error, 1)
	e.waiters = append(e.waiters, done)
	if c.schedule(key, e) {
		e.held++
	}
	e.mu.Unlock()
	select {
	case err := <-done:
		return tr, err
	case <-ctx.Done():
		return tr, ctx.Err()
	}
}

// schedule arms the write of e: after Hold while its phase is one a later pipeline event
// supersedes (and fewer than MaxHeld folds wait out a Hold), else after Window; never later than
// a write already due. It reports whether the fold being scheduled counts as held.
func (c *Core) schedule(key types.NamespacedName, e *entry) bool {
	d, held := c.cfg.Window, false
	if Intermediate(e.status) && c.cfg.Hold > c.cfg.Window {
		c.mu.Lock()
		if c.cfg.MaxHeld <= 0 || c.held < c.cfg.MaxHeld {
			c.held++
			d, held = c.cfg.Hold, true
		}
		c.mu.Unlock()
	}
	due := time.Now().Add(d)
	if e.timer != nil {
		if !due.Before(e.due) {
			return held
		}
		e.timer.Stop()
	}
	e.due = due
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.timer != t {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.flushLocked(ctx, key, e) // the waiters receive the error
	})
	e.timer = t
	return held
}

// drop removes e from the entries if it is still key's.
func (c *Core) drop(key types.NamespacedName, e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[key] == e {
		delete(c.entries, key)
	}
}

// flushLocked writes e's status (when it differs in more than the receipt head), records the
// Kubernetes Events of the folds, releases the object after Destroyed, and answers the
// waiters. e.mu is held.
func (c *Core) flushLocked(ctx context.Context, key types.NamespacedName, e *entry) error {
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	err := c.writeLocked(ctx, key, e)
	if err == nil && e.release {
		uid := e.stored.UID
		if err = c.cfg.Store.Release(ctx, key, uid); err == nil {
			c.cfg.Metrics.inc(func(m *Metrics) prometheus.Counter { return m.finalizerRemoved })
			c.cfg.Logger.Info("watcher: released after Destroyed", logattr.Resource(key.Namespace, key.Name))
			e.answer(nil)
			e.reset(nil)
			c.drop(key, e)
			if c.cfg.OnWrite != nil {
				c.cfg.OnWrite(key)
			}
			return nil
		}
		err = fmt.Errorf("watcher: release %s: %w", key, err)
	}
	if err != nil {
		e.fail(err)
		if errors.Is(err, errGone) {
			e.reset(nil)
			c.drop(key, e)
		}
		return err
	}
	e.written = e.mark
	e.answer(nil)
	return nil
}

// writeLocked writes e.status if it is dirty, re-reading and reducing e.events again on a
// conflict. e.mu is held.
func (c *Core) writeLocked(ctx context.Context, key types.NamespacedName, e *entry) error {
	if !e.dirty {
		return nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := c.cfg.Store.UpdateStatus(ctx, e.stored, e.status)
		if apierrors.IsConflict(err) {
			c.cfg.Metrics.inc(func(m *Metrics) prometheus.Counter { return m.statusConflicts })
			c.cfg.Logger.Debug("watcher: status write conflict, re-reading", logattr.Resource(key.Namespace, key.Name))
			fresh, gerr := c.cfg.Store.Get(ctx, key)
			if gerr != nil {
				return gerr
			}
			if fresh.UID != e.stored.UID {
				return errGone
			}
			st := *fresh.Status.DeepCopy()
			for _, ev := range e.events {
				if next, _, rerr := pipeline.Reduce(st, ev); rerr == nil {
					st = next
				}
			}
			e.stored, e.status = statusOnly(fresh), st
			e.signal()
			return err
		}
		if err != nil {
			return err
		}
		c.cfg.Metrics.inc(func(m *Metrics) prometheus.Counter { return m.statusPatches })
		e.stored = statusOnly(obj)
		e.status = *obj.Status.DeepCopy()
		e.signal()
		return nil
	})
	if err != nil {
		if !errors.Is(err, errGone) {
			err = fmt.Errorf("watcher: write status of %s: %w", key, err)
		}
		return err
	}
	notes := e.notes
	e.events, e.dirty, e.notes = nil, false, nil
	for _, n := range notes {
		c.record(e.stored, n.tr, n.ev)
	}
	if c.cfg.OnWrite != nil {
		c.cfg.OnWrite(key)
	}
	return nil
}

// Intermediate reports whether st is in a phase a later event of the pipeline supersedes:
// Pending (synthesis follows), Synthesized, Planned without waiting for approval, Reconverging.
func Intermediate(st v1alpha1.LavaArchitectureStatus) bool {
	switch st.Phase {
	case "", v1alpha1.PhasePending, v1alpha1.PhaseSynthesized, v1alpha1.PhaseReconverging:
		return true
	case v1alpha1.PhasePlanned:
		return !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionAwaitingApproval)
	}
	return false
}

// Actionable reports whether the transition that led to st by ev is one a user acts on, and so
// gets a Kubernetes Event: Applied, Failed, Drifted, or a plan awaiting approval.
func Actionable(st v1alpha1.LavaArchitectureStatus, ev pipeline.Event) bool {
	switch ev.Type {
	case pipeline.EventApplied, pipeline.EventFailed, pipeline.EventDrifted, pipeline.EventAwaitingApproval:
		return true
	}
	return false
}

// record emits the Kubernetes Event of an accepted, actionable transition.
func (c *Core) record(obj *v1alpha1.LavaArchitecture, tr pipeline.Transition, ev pipeline.Event) {
	if c.cfg.Recorder == nil || obj == nil {
		return
	}
	typ := corev1.EventTypeNormal
	if ev.Type == pipeline.EventFailed || ev.Type == pipeline.EventDrifted {
		typ = corev1.EventTypeWarning
	}
	reason, msg := TransitionReason(obj.Status, ev)
	text := fmt.Sprintf("%s -> %s (generation %d): %s", nameOrPending(tr.From), tr.To, ev.Generation, reason)
	if msg != "" {
		text += ": " + msg
	}
	if len(text) > 1024 {
		text = text[:1024]
	}
	// The Event reason is the event type (Applied, Failed, Drifted, AwaitingApproval).
	c.cfg.Recorder.Eventf(obj, nil, typ, string(ev.Type), "Transition", "%s", text)
}

func nameOrPending(p v1alpha1.Phase) v1alpha1.Phase {
	if p == "" {
		return v1alpha1.PhasePending
	}
	return p
}

// conditionOf is the condition an event type sets, for the reason and message of its
// PhaseChanged; "" means the kstatus Ready condition.
func conditionOf(t pipeline.EventType) string {
	switch t {
	case pipeline.EventSuspended, pipeline.EventResumed:
		return v1alpha1.ConditionSuspended
	case pipeline.EventDependenciesBlocked, pipeline.EventDependenciesSatisfied:
		return v1alpha1.ConditionDependenciesReady
	case pipeline.EventDrifted, pipeline.EventReconverging, pipeline.EventDriftClean:
		return v1alpha1.ConditionDrifted
	}
	return v1alpha1.ConditionReady
}

// TransitionReason is the CamelCase reason and the message of a transition (for its
// PhaseChanged and Kubernetes Event): the event's reason and message when it has them, else
// those of the condition the event sets in st, else the event type.
func TransitionReason(st v1alpha1.LavaArchitectureStatus, ev pipeline.Event) (string, string) {
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

// publishPhaseChanged publishes the PhaseChanged of a transition of obj from status from to
// next.
func (c *Core) publishPhaseChanged(ctx context.Context, obj *v1alpha1.LavaArchitecture, from, next v1alpha1.LavaArchitectureStatus,
	tr pipeline.Transition, ev pipeline.Event, cause Cause) error {
	trigger := eventid.CauseTrigger(cause.EventID)
	pc := &lavav1.PhaseChanged{
		From:         PhaseProto(from.Phase),
		To:           PhaseProto(next.Phase),
		Diagnostics:  cause.Diagnostics,
		CauseEventId: cause.EventID,
	}
	pc.Envelope = &lavav1.Envelope{
		EventId:       eventid.ID(string(obj.UID), ev.Generation, eventid.Type(pc), trigger),
		OccurredAt:    timestamppb.New(ev.Time),
		Source:        bus.ServiceWatcher,
		Resource:      &lavav1.ResourceRef{Namespace: obj.Namespace, Name: obj.Name, Uid: string(obj.UID)},
		Generation:    ev.Generation,
		CorrelationId: cause.CorrelationID,
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
	if _, err := c.cfg.Publisher.PublishEvent(ctx, pc); err != nil {
		return fmt.Errorf("watcher: publish PhaseChanged: %w", err)
	}
	c.cfg.Metrics.incPublished(publishedPhaseChanged)
	c.cfg.Logger.Info("watcher: phase transition", logattr.Resource(obj.Namespace, obj.Name), logattr.Generation(ev.Generation),
		slog.String("event", string(ev.Type)), slog.String("from", string(tr.From)), slog.String("to", string(tr.To)),
		logattr.EventID(pc.Envelope.EventId))
	return nil
}

// illegalDeliveries is how many deliveries an event the reducer calls illegal, and that may be
// ahead of its predecessor ([behind] is false), gets before it is dropped. Each delivery first
// waits aheadWait for the predecessor in this process. An event still arrives
// before its predecessor when a watcher died holding that one
// unacknowledged: the server redelivers it only after the consumer's ack wait (30 s,
// bus.TopologyOptions.BackOff[0]). The server schedules a nak's delay from the consumer's
// BackOff entry of that delivery, not from the ack wait (nats-server's processNak and
// checkPending), so a handler's naks come back after about 1 s, 32 s, 94 s and 4.5 min
// (bus.ConsumeOptions.NakBackoff plus BackOff[n-1] minus the ack wait): dropping on the fifth
// delivery gives a predecessor about 6 minutes, and stays below the consumer's MaxDeliver (10),
// so the event is dropped, not reported as poison. With 3 deliveries a killed watcher's
// Planned and Applied were redelivered together after its Synthesized came back, the Applied
// first, on its last delivery: it was dropped and the object stayed Planned for good
// (TestChaos_killEveryServiceTwiceAndRestartNATS in test/e2e;
// TestWatcher/a_phase_event_ahead_of_a_dead_watcher's_predecessor_waits_for_it).
const illegalDeliveries = 5

// aheadWait is how long a phase event that is ahead of its predecessor (an illegal transition
// not [behind] the status) waits in its handler for the object's status to change before it
// is naked. The consumer hands an object's events to concurrent handlers (no OrderKey, so one
// object's slow write does not hold back another's), so the Applied published right after a
// Planned can reach the reducer first; and a predecessor naked after a transient error comes
// back after bus.ConsumeOptions.NakBackoff's first delay (1 s ±20%). Waiting here folds both
// cases in this process at once; a nak instead would come back only after the consumer's
// BackOff entry of that delivery (see illegalDeliveries), 32 s from the second nak on. The
// consumer's heartbeats keep the waiting message's ack wait from running out.
const aheadWait = 3 * time.Second

// aheadError is a *pipeline.IllegalTransitionError of an event that may be ahead of its
// predecessor; changed is closed when the object's status next changes (entry.changes).
type aheadError struct {
	*pipeline.IllegalTransitionError
	changed <-chan struct{}
}

func (e *aheadError) Unwrap() error { return e.IllegalTransitionError }

// foldInOrder is fold without waiting for the write's window (modeWait), retried each time
// the object's status changes while the event is ahead of its predecessor, for up to
// aheadWait; then it returns the *pipeline.IllegalTransitionError (errors.As finds it).
func (c *Core) foldInOrder(ctx context.Context, key types.NamespacedName, uid types.UID, ev pipeline.Event, cause Cause) (pipeline.Transition, error) {
	timer := time.NewTimer(aheadWait)
	defer timer.Stop()
	for {
		tr, err := c.fold(ctx, key, uid, ev, cause, false)
		var ahead *aheadError
		if !errors.As(err, &ahead) {
			return tr, err
		}
		select {
		case <-ahead.changed:
		case <-timer.C:
			return tr, ahead.IllegalTransitionError
		case <-ctx.Done():
			return tr, ahead.IllegalTransitionError
		}
	}
}

// Ranks of one generation's way through the pipeline: the phases, and the events leading to
// them.
var (
	phaseRank = map[pipeline.Phase]int{pipeline.Pending: 0, pipeline.Synthesized: 1, pipeline.Planned: 2, pipeline.Applied: 3}
	eventRank = map[pipeline.EventType]int{pipeline.EventSynthesized: 1, pipeline.EventPlanned: 2, pipeline.EventAwaitingApproval: 2,
		pipeline.EventApplied: 3}
)

// behind reports whether an illegal pipeline event of the status's generation is one the
// status has passed already (a Synthesized or Planned in Applied: a redelivery of an event
// whose successor was folded), which no later delivery can make legal: it is dropped at once.
func behind(e *pipeline.IllegalTransitionError) bool {
	from, ok1 := phaseRank[e.From]
	ev, ok2 := eventRank[e.Event]
	return ok1 && ok2 && ev <= from
}

// HandlePhase folds one LAVA_PHASES message ([bus.Handler]). It returns nil (ack) when the
// event is folded and written (or waits in the receipt head for the next write), unchanged,
// stale, about an object that is gone, not watched, or illegal (logged and dropped: the
// reducer's table does not allow it in this phase) when it is [behind] the status or on its
// illegalDeliveries-th delivery (the first ones are naked in case it overtook its
// predecessor); a transient error naks it for redelivery; a
// malformed payload is a [bus.Permanent] error.
func (c *Core) HandlePhase(ctx context.Context, m *bus.Message) error {
	env := m.Envelope
	res := env.GetResource()
	ns, name := res.GetNamespace(), res.GetName()
	if ns == "" || name == "" {
		s, err := bus.ParseSubject(m.Subject)
		if err != nil {
			return bus.Permanent(fmt.Errorf("watcher: %s without envelope.resource: %w", m.Schema, err))
		}
		ns, name = s.Namespace, s.Name
	}
	if c.cfg.Namespaces != nil && !c.cfg.Namespaces(ns) {
		c.cfg.Metrics.incPhaseEvent(resultIgnored)
		return nil
	}
	ev, diags, ok, err := PhaseEvent(m.Event, m.Published)
	if err != nil {
		c.cfg.Metrics.incPhaseEvent(resultIllegal)
		return bus.Permanent(err)
	}
	if !ok {
		c.cfg.Metrics.incPhaseEvent(resultIgnored)
		return nil
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	if c.cfg.Rewrite != nil {
		c.cfg.Rewrite(key, &ev, diags)
	}
	log := c.cfg.Logger.With(logattr.Resource(ns, name), logattr.EventID(env.GetEventId()), logattr.Generation(ev.Generation),
		slog.String("event", string(ev.Type)))
	tr, err := c.foldInOrder(ctx, key, types.UID(res.GetUid()), ev, Cause{
		EventID: env.GetEventId(), CorrelationID: env.GetCorrelationId(), Diagnostics: diags, Seq: m.StreamSeq,
	})
	var illegal *pipeline.IllegalTransitionError
	switch {
	case errors.Is(err, errGone):
		c.cfg.Metrics.incPhaseEvent(resultGone)
		log.Debug("watcher: phase event for an object that is gone")
		return nil
	case errors.As(err, &illegal) && !behind(illegal) && m.NumDelivered < illegalDeliveries:
		// Possibly out of order (its predecessor was naked and comes back later): retry a
		// few times before dropping it.
		c.cfg.Metrics.incPhaseEvent(resultError)
		log.Debug("watcher: phase event not allowed yet, redelivering", slog.Any("error", err))
		return err
	case errors.As(err, &illegal), errors.Is(err, pipeline.ErrInvalidEvent):
		c.cfg.Metrics.incPhaseEvent(resultIllegal)
		log.Warn("watcher: phase event dropped", slog.Any("error", err))
		return nil
	case err != nil:
		c.cfg.Metrics.incPhaseEvent(resultError)
		return err
	case tr.Stale:
		c.cfg.Metrics.incPhaseEvent(resultStale)
	case tr.Changed:
		c.cfg.Metrics.incPhaseEvent(resultFolded)
	default:
		c.cfg.Metrics.incPhaseEvent(resultUnchanged)
	}
	return nil
}

// ConsumeOptions configures [Core.Consume].
type ConsumeOptions struct {
	// Consumer is the durable consumer on LAVA_PHASES. Default "watcher".
	Consumer string
	// Concurrency bounds phase events folded or waiting for their write at once. Default 1.
	Concurrency int
	// Metrics, if set, counts the bus consumer's outcomes.
	Metrics *bus.Metrics
}

// Consume folds LAVA_PHASES with [Core.HandlePhase] until ctx is done, then drains (see
// [bus.Consume]); poison messages are reported as anomalies.
func (c *Core) Consume(ctx context.Context, js jetstream.JetStream, o ConsumeOptions) error {
	if o.Consumer == "" {
		o.Consumer = bus.ServiceWatcher
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 1
	}
	return pipeline.Consumer{JS: js, Service: bus.ServiceWatcher, Durable: o.Consumer, Concurrency: o.Concurrency,
		Logger: c.cfg.Logger, Metrics: o.Metrics, Publisher: c.cfg.Publisher,
	}.Consume(ctx, c.HandlePhase, bus.StreamPhases)
}

// statusOnly is a copy of obj reduced to what an entry keeps of an object between writes: what
// a [Store] needs to write its status (type, name, namespace, uid, resourceVersion), its
// generation, and its status. The Core keeps one per object for as long as the object lives,
// beside the manager's cache of whole objects; without spec, labels, annotations and
// managedFields it is a fraction of the object.
func statusOnly(obj *v1alpha1.LavaArchitecture) *v1alpha1.LavaArchitecture {
	return &v1alpha1.LavaArchitecture{
		TypeMeta: obj.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: obj.Name, Namespace: obj.Namespace, UID: obj.UID,
			ResourceVersion: obj.ResourceVersion, Generation: obj.Generation,
		},
		Status: *obj.Status.DeepCopy(),
	}
}
