package watcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/telemetry/logattr"
)

// Observation is an object's current state as [Observe] publishes it.
type Observation struct {
	// Object is the object as stored (metadata and spec; its status is the Core's). An object
	// with a deletionTimestamp is being deleted.
	Object *v1alpha1.LavaArchitecture
	// Policy is the effective remediation policy ([EffectivePolicy]); its resourceVersion is
	// part of the trigger. Not used for a deletion.
	Policy *lavav1.RemediationPolicy
	// Dependencies is the state of spec.dependsOn (nil: none).
	Dependencies *lavav1.DependencyState
	// Source is spec.sourceRef resolved to its artifact (nil: another source kind): the event
	// carries it, and its digest is part of the trigger (eventid.SourceTrigger), so a new
	// artifact is a new pass.
	Source *lavav1.FluxSource
	// Bindings is the digest of the bindingsFrom sources ("" without them), part of the
	// trigger.
	Bindings string
	// Triggers are further parts of the trigger, appended in order (lava up: a new pass in a
	// new environment, eventid.ReconcileTrigger).
	Triggers []string
	// Fresh says no ResourceObserved can exist for the object yet (it has just got its
	// finalizer and was never observed): the stream is not asked for the last one.
	Fresh bool
	// At is when the object was observed (the events' occurred_at and the folds' time).
	At time.Time
}

// Observe publishes, through c's [Store] and Publisher, the event o.Object's current state
// asks of the pipeline, unless the last one stored on its subject in resources (LAVA_RESOURCES)
// already has its event id, and returns whether it published. The watcher's reconciler and
// lava up's file source (internal/up) both observe through it.
//
//   - An object being deleted gets DeletionRequested (once per generation: its id derives from
//     the generation), after DeletionRequested is folded into its status; the Store releases
//     it once the applier answers with Destroyed.
//   - Any other object gets ResourceObserved (event id from uid, generation and trigger:
//     [ObservedTrigger], then the source digest, then o.Triggers). A condition Suspended left
//     on an object no longer suspended is folded away first (Resumed). Observed is folded
//     first (Suspended for a suspended object, whose generation starts no pass; its
//     PhaseChanged is published before the ResourceObserved). A forced pass (same generation)
//     or a suspended generation writes that status before publishing, so a crash between the
//     two re-publishes the same id on the next call; a new generation's Observed rides on the
//     object's next status write ([Core.FoldCoalesced]), because the reducer derives it from
//     any later event of that generation. A ResourceObserved larger than the bus takes (the
//     connection's max_payload, [bus.Publisher.Fits]) is not published: the object is folded
//     Failed instead, reason SpecTooLarge, with the event's size, how far it is over and the
//     limit ([failTooLarge]), and Observe returns false and no error.
//
// An object gone from the Store meanwhile is not an error (its event is still published; the
// phase events about it are ignored). Errors: reading the stream, folding (a Store or NATS
// error), publishing.
func Observe(ctx context.Context, c *Core, resources jetstream.Stream, o Observation) (bool, error) {
	if o.Object.DeletionTimestamp != nil {
		return requestDeletion(ctx, c, resources, o)
	}
	obj := o.Object
	if !obj.Spec.Suspend && conditionTrue(c, obj, v1alpha1.ConditionSuspended) {
		if err := foldLocal(ctx, c, obj, pipeline.Event{Type: pipeline.EventResumed}, o.At); err != nil {
			return false, err
		}
	}
	ro := &lavav1.ResourceObserved{
		Spec:         pipeline.SpecMirror(obj.Spec),
		Remediation:  o.Policy,
		Dependencies: o.Dependencies,
		Labels:       obj.Labels,
	}
	trigger := ObservedTrigger(obj, o.Policy.GetPolicyResourceVersion(), o.Bindings)
	// A new generation without a forced pass coalesces its Observed (below), whatever source
	// artifact and binding data it carries.
	generationOnly := ObservedTrigger(obj, o.Policy.GetPolicyResourceVersion(), "") == eventid.GenerationTrigger(obj.Generation)
	if o.Source != nil {
		ro.Spec.Source = &lavav1.Source{Kind: &lavav1.Source_Flux{Flux: o.Source}}
		trigger += ";" + eventid.SourceTrigger(o.Source.GetArtifact().GetDigest())
	}
	for _, t := range o.Triggers {
		trigger += ";" + t
	}
	id := eventid.ID(string(obj.UID), obj.Generation, eventid.Type(ro), trigger)
	subject := bus.ResourceSubject(obj.Namespace, obj.Name, bus.EventObserved)
	if !o.Fresh {
		if last, err := lastEventID(ctx, resources, subject); err != nil || last == id {
			return false, err
		}
	}
	// Measured with occurred_at's fraction of a second at its longest encoding, so the size
	// (and a refusal's message) is the same at every pass and never less than what is
	// published.
	ro.Envelope = envelope(obj, id, trigger, o.At.Truncate(time.Second).Add(time.Second-1))
	if err := c.cfg.Publisher.Fits(subject, ro); err != nil {
		return false, failTooLarge(ctx, c, obj, err, o.At)
	}
	ev := pipeline.Event{Type: pipeline.EventObserved, Force: true, Time: o.At, Generation: obj.Generation}
	if obj.Spec.Suspend {
		ev = pipeline.Event{Type: pipeline.EventSuspended, Time: o.At, Generation: obj.Generation}
	}
	// A new generation: its Observed rides on the object's next status write (the reducer
	// derives it from any later event of this generation if that write is lost), saving a
	// write per generation.
	st, known := c.Status(types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}, obj.UID)
	coalesce := !obj.Spec.Suspend && generationOnly && known && obj.Generation > st.ObservedGeneration
	if err := fold(ctx, c, obj, ev, id, coalesce); err != nil {
		return false, err
	}
	ro.Envelope = envelope(obj, id, trigger, o.At)
	if err := publish(ctx, c, subject, ro, publishedResourceObserved, obj, slog.String("trigger", trigger)); err != nil {
		return false, err
	}
	return true, nil
}

// failTooLarge folds Failed (reason [v1alpha1.ReasonSpecTooLarge], terminal: the same spec is
// refused again) about obj when err is a [bus.PayloadTooLargeError], its ResourceObserved's
// size against the bus's limit: the object ends Failed with the sizes and what to do, instead
// of Pending with nothing in flight, and nothing is published. Any other err is returned as it
// is; so is a fold's error.
func failTooLarge(ctx context.Context, c *Core, obj *v1alpha1.LavaArchitecture, err error, at time.Time) error {
	var big *bus.PayloadTooLargeError
	if !errors.As(err, &big) {
		return err
	}
	c.cfg.Logger.Warn("watcher: ResourceObserved larger than the bus takes", logattr.Resource(obj.Namespace, obj.Name),
		logattr.Generation(obj.Generation), slog.Int64("bytes", big.Size), slog.Int64("max_payload", big.Max))
	return foldLocal(ctx, c, obj, pipeline.Event{Type: pipeline.EventFailed, Reason: v1alpha1.ReasonSpecTooLarge, Terminal: true,
		Message: fmt.Sprintf("the ResourceObserved event of this spec is %d bytes, %d bytes over the bus's limit of %d bytes (the NATS server's max_payload), "+
			"so it cannot start the pipeline: move the source into a Flux source (spec.sourceRef) or make the inline source and the bindings smaller",
			big.Size, big.Size-big.Max, big.Max)}, at)
}

// requestDeletion is [Observe] for an object being deleted: fold DeletionRequested and publish
// it once per generation.
func requestDeletion(ctx context.Context, c *Core, resources jetstream.Stream, o Observation) (bool, error) {
	obj := o.Object
	dr := &lavav1.DeletionRequested{DeletionPolicy: pipeline.DeletionPolicyProto(obj.Spec.DeletionPolicy), Engine: pipeline.EngineProto(obj.Spec.Engine)}
	trigger := eventid.GenerationTrigger(obj.Generation)
	id := eventid.ID(string(obj.UID), obj.Generation, eventid.Type(dr), trigger)
	subject := bus.ResourceSubject(obj.Namespace, obj.Name, bus.EventDeletionRequested)
	if last, err := lastEventID(ctx, resources, subject); err != nil || last == id {
		return false, err
	}
	msg := "deleting: destroying the infrastructure"
	if dr.DeletionPolicy == lavav1.DeletionPolicy_DELETION_POLICY_ORPHAN {
		msg = "deleting: orphaning the infrastructure (deletionPolicy Orphan)"
	}
	if err := fold(ctx, c, obj, pipeline.Event{Type: pipeline.EventDeletionRequested, Time: o.At, Generation: obj.Generation, Message: msg},
		id, false); err != nil {
		return false, err
	}
	dr.Envelope = envelope(obj, id, trigger, o.At)
	if err := publish(ctx, c, subject, dr, publishedDeletionRequested, obj); err != nil {
		return false, err
	}
	return true, nil
}

// fold folds ev about obj through c with cause id (also its correlation id), waiting for the
// write unless coalesce ([Core.FoldCoalesced]). An object gone meanwhile is not an error.
func fold(ctx context.Context, c *Core, obj *v1alpha1.LavaArchitecture, ev pipeline.Event, id string, coalesce bool) error {
	key, cause := types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}, Cause{EventID: id, CorrelationID: id}
	var err error
	if coalesce {
		_, err = c.FoldCoalesced(ctx, key, obj.UID, ev, cause)
	} else {
		_, err = c.Fold(ctx, key, obj.UID, ev, cause)
	}
	if errors.Is(err, errGone) {
		return nil
	}
	return err
}

// publish publishes ev (a ResourceObserved or DeletionRequested about obj, with its envelope)
// on subject, counts it under metric (publishedResourceObserved, publishedDeletionRequested)
// and logs it with attrs.
func publish(ctx context.Context, c *Core, subject string, ev bus.Event, metric string, obj *v1alpha1.LavaArchitecture, attrs ...any) error {
	name := string(ev.ProtoReflect().Descriptor().Name())
	if _, err := c.cfg.Publisher.Publish(ctx, subject, ev); err != nil {
		return fmt.Errorf("watcher: publish %s: %w", name, err)
	}
	c.cfg.Metrics.incPublished(metric)
	c.cfg.Logger.Info("watcher: published "+name, append([]any{logattr.Resource(obj.Namespace, obj.Name),
		logattr.Generation(obj.Generation), logattr.EventID(ev.GetEnvelope().GetEventId())}, attrs...)...)
	return nil
}

// foldLocal folds an event the watcher derives itself (suspend, resume, dependencies) about
// obj through c, stamped with obj's generation and at; its cause id is derived from the event
// type, reason and message, so the same condition yields the same PhaseChanged id. An object
// gone meanwhile is not an error.
func foldLocal(ctx context.Context, c *Core, obj *v1alpha1.LavaArchitecture, ev pipeline.Event, at time.Time) error {
	ev.Generation, ev.Time = obj.Generation, at
	return fold(ctx, c, obj, ev, eventid.ID(string(obj.UID), obj.Generation, "lava.watcher."+string(ev.Type), ev.Reason+":"+ev.Message), false)
}

// conditionTrue reports whether condition typ is True in the last status known for obj: c's of
// the same incarnation (with folds not yet written), else obj's own.
func conditionTrue(c *Core, obj *v1alpha1.LavaArchitecture, typ string) bool {
	st, ok := c.Status(types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}, obj.UID)
	if !ok {
		st = obj.Status
	}
	return meta.IsStatusConditionTrue(st.Conditions, typ)
}

// envelope is the envelope of an event the watcher publishes about obj (ResourceObserved,
// DeletionRequested): event id id (also the correlation id, as a chain starts here), trigger,
// occurred at at, source "watcher", obj's generation and resource.
func envelope(obj *v1alpha1.LavaArchitecture, id, trigger string, at time.Time) *lavav1.Envelope {
	return &lavav1.Envelope{
		EventId:       id,
		OccurredAt:    timestamppb.New(at),
		Source:        bus.ServiceWatcher,
		Resource:      &lavav1.ResourceRef{Namespace: obj.Namespace, Name: obj.Name, Uid: string(obj.UID)},
		Generation:    obj.Generation,
		CorrelationId: id,
		Trigger:       trigger,
	}
}

// lastEventID is the Nats-Msg-Id (event id) of the last message stored on subject in
// resources (LAVA_RESOURCES), or "" when there is none.
func lastEventID(ctx context.Context, resources jetstream.Stream, subject string) (string, error) {
	m, err := bus.LastMsg(ctx, resources, subject)
	if err != nil || m == nil {
		return "", err
	}
	return m.Header.Get(jetstream.MsgIDHeader), nil
}
