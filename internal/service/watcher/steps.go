package watcher

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
)

// pass is one [reconciler.Reconcile] of an object: what its steps read, and what they decided
// for [reconciler.summarize] to write and publish.
type pass struct {
	// obj is the object as read (re-read when adding the finalizer met a conflict).
	obj *v1alpha1.LavaArchitecture
	// fresh: this reconcile added the finalizer to an object never observed
	// ([Observation].Fresh).
	fresh bool
	// deps is the state of the object's dependencies ([resolver.resolve]).
	deps depState
	// bindings is the digest of spec.bindingsFrom, missing the first of its sources that does
	// not exist ([reconciler.bindingsDigest]).
	bindings, missing string
	// src is spec.sourceRef resolved to its artifact (nil without spec.sourceRef).
	src *lavav1.FluxSource
	// policy is the effective remediation policy ([reconciler.policy]).
	policy *lavav1.RemediationPolicy
	// folds are the events the watcher derives itself (suspend, resume, dependencies), in the
	// order the steps decided them.
	folds []pipeline.Event
	// observation, if set, is published after folds ([Observe]; its At is the time of the
	// publish).
	observation *Observation
}

// fold queues ev, an event the watcher derives itself about p.obj, for the summary.
func (p *pass) fold(ev pipeline.Event) { p.folds = append(p.folds, ev) }

// stepResult is what a step decides: run the next step, or stop the reconcile with result.
type stepResult struct {
	stop   bool
	result reconcile.Result
}

var (
	// proceed runs the next step.
	proceed = stepResult{}
	// finish stops the reconcile with an empty result (no requeue).
	finish = stepResult{stop: true}
)

// step is one step of a reconcile: it reads what it needs, records what it read and decided
// in p, and never writes status nor publishes (the summary does). An error stops the
// reconcile; the reconcile is retried.
type step func(ctx context.Context, p *pass) (stepResult, error)

// steps are the steps of [reconciler.Reconcile], in the order they run: deletion, finalizer,
// suspend, dependencies, bindings, hold, source, dependencies ready, policy, observe.
func (r *reconciler) steps() []step {
	return []step{
		r.stepDeletion,
		r.stepFinalizer,
		r.stepSuspend,
		r.stepDependencies,
		r.stepBindings,
		r.stepHold,
		r.stepSource,
		r.stepDependenciesReady,
		r.stepPolicy,
		r.stepObserve,
	}
}

// summarize writes what the steps decided in p, after the last one ran (err is its error):
// it folds p.folds through the Core in order, each written before the next ([foldLocal]), then,
// when no step failed, publishes p.observation ([Observe], which folds the observation's own
// event before publishing). It returns the first fold's error (the observation is then not
// published), else err, else the observation's error.
func (r *reconciler) summarize(ctx context.Context, p *pass, err error) error {
	for _, ev := range p.folds {
		if ferr := foldLocal(ctx, r.core, p.obj, ev, now(r.clock)); ferr != nil {
			return ferr
		}
	}
	if err != nil || p.observation == nil {
		return err
	}
	o := *p.observation
	o.At = now(r.clock)
	_, err = Observe(ctx, r.core, r.resources, o)
	return err
}

// stepDeletion ends the reconcile of an object being deleted: while it holds the finalizer and
// no consumer holds its destroy back ([reconciler.deletionBlocked]), its DeletionRequested is
// published (once per generation, [Observe]). The finalizer goes when the applier answers with
// Destroyed. Errors: listing the consumers.
func (r *reconciler) stepDeletion(ctx context.Context, p *pass) (stepResult, error) {
	if p.obj.DeletionTimestamp.IsZero() {
		return proceed, nil
	}
	if !controllerutil.ContainsFinalizer(p.obj, v1alpha1.Finalizer) {
		return finish, nil
	}
	if res, blocked, err := r.deletionBlocked(ctx, p); err != nil || blocked {
		return res, err
	}
	p.observation = &Observation{Object: p.obj}
	return finish, nil
}

// stepFinalizer adds the finalizer when the object has none ([reconciler.addFinalizer]): a
// ResourceObserved is published only after it is in place. An object without it that was never
// observed is fresh: no ResourceObserved can exist for it yet. Errors: the patch's.
func (r *reconciler) stepFinalizer(ctx context.Context, p *pass) (stepResult, error) {
	if controllerutil.ContainsFinalizer(p.obj, v1alpha1.Finalizer) {
		return proceed, nil
	}
	p.fresh = p.obj.Status.ObservedGeneration == 0 && p.obj.Status.Phase == ""
	return proceed, r.addFinalizer(ctx, p.obj)
}

// stepSuspend handles spec.suspend. The suspended generation is published too (spec.suspend
// true in the mirror), so drift stops scanning and viggy stops acting; synth starts no pass for
// it: with its policy the object is observed (its Suspended is folded by [Observe]), while the
// policy does not exist it is folded Suspended only, and the reconcile ends either way. An
// object no longer suspended whose condition Suspended is still True is folded Resumed and the
// reconcile goes on. Errors: reading the policy ([reconciler.policy]).
func (r *reconciler) stepSuspend(ctx context.Context, p *pass) (stepResult, error) {
	obj := p.obj
	if !obj.Spec.Suspend {
		if conditionTrue(r.core, obj, v1alpha1.ConditionSuspended) {
			p.fold(pipeline.Event{Type: pipeline.EventResumed})
		}
		return proceed, nil
	}
	r.metrics.incHeld(heldSuspended)
	policy, ok, err := r.policy(ctx, obj)
	switch {
	case err != nil:
		return finish, err
	case !ok:
		p.fold(pipeline.Event{Type: pipeline.EventSuspended})
	default:
		p.observation = &Observation{Object: obj, Policy: policy, Fresh: p.fresh}
	}
	return finish, nil
}

// stepDependencies resolves the state of the object's dependencies into p.deps (held by
// [reconciler.stepHold]). Errors: reading the dependencies.
func (r *reconciler) stepDependencies(ctx context.Context, p *pass) (stepResult, error) {
	var err error
	p.deps, err = r.deps.resolve(ctx, p.obj)
	return proceed, err
}

// stepBindings reads the spec.bindingsFrom sources into p.bindings, their digest, and
// p.missing, the first that does not exist ([reconciler.bindingsDigest]), or puts the
// reconcile off while the namespace's Secret read budget is spent ([secretBudget]). Errors:
// reading a source.
func (r *reconciler) stepBindings(ctx context.Context, p *pass) (stepResult, error) {
	if d := r.secretBudget.take(p.obj, r.secretReads(p.obj), now(r.clock)); d > 0 {
		// Its namespace's Secret reads are spent: put off, publishing nothing (what was
		// observed stands), without holding a worker.
		return stepResult{stop: true, result: reconcile.Result{RequeueAfter: d}}, nil
	}
	var err error
	p.bindings, p.missing, err = r.bindingsDigest(ctx, p.obj)
	return proceed, err
}

// stepHold ends the reconcile with DependenciesBlocked when a dependency is refused (a
// cross-namespace reference), part of a cycle or not ready, or a bindingsFrom source is
// missing, in that order of precedence: nothing new is published until it is resolved (the
// watches enqueue the object then); what was applied stays.
func (r *reconciler) stepHold(_ context.Context, p *pass) (stepResult, error) {
	deps := p.deps
	var held, reason, msg string
	switch {
	case len(deps.refused) > 0:
		held, reason, msg = heldDependencies, v1alpha1.ReasonCrossNamespaceRefRefused, deps.message()
	case len(deps.cycle) > 0:
		held, reason, msg = heldCycle, v1alpha1.ReasonDependencyCycle, deps.message()
	case !deps.proto.GetReady():
		held, reason, msg = heldDependencies, v1alpha1.ReasonDependencyNotReady, deps.message()
	case p.missing != "":
		held, reason, msg = heldDependencies, v1alpha1.ReasonBindingSourceNotFound, p.missing
	default:
		return proceed, nil
	}
	r.metrics.incHeld(held)
	if reason == v1alpha1.ReasonBindingSourceNotFound {
		r.logMissing(p.obj, p.missing)
	}
	p.fold(pipeline.Event{Type: pipeline.EventDependenciesBlocked, Reason: reason, Message: msg})
	return finish, nil
}

// stepSource resolves spec.sourceRef into p.src ([reconciler.resolveSource]). The source is a
// dependency too: without an artifact the reconcile ends with DependenciesBlocked (the source
// watch enqueues the object when one appears). Errors: reading the source.
func (r *reconciler) stepSource(ctx context.Context, p *pass) (stepResult, error) {
	if p.obj.Spec.SourceRef == nil {
		return proceed, nil
	}
	src, hold, err := r.resolveSource(ctx, p.obj)
	switch {
	case err != nil:
		return finish, err
	case hold != nil:
		r.metrics.incHeld(heldSource)
		p.fold(pipeline.Event{Type: pipeline.EventDependenciesBlocked, Reason: hold.reason, Message: hold.message})
		return finish, nil
	}
	p.src = src
	return proceed, nil
}

// stepDependenciesReady folds DependenciesSatisfied for an object with dependencies, a source,
// or a DependenciesReady False for a missing bindingsFrom source ([reconciler.bindingsHeld]):
// all of them are ready now.
func (r *reconciler) stepDependenciesReady(_ context.Context, p *pass) (stepResult, error) {
	if !p.deps.has() && p.src == nil && !r.bindingsHeld(p.obj) {
		return proceed, nil
	}
	msg := "" // the reducer's default: every dependency reached its phase
	if p.src != nil {
		msg = "the source has an artifact and every dependency reached its phase"
	}
	p.fold(pipeline.Event{Type: pipeline.EventDependenciesSatisfied, Message: msg})
	return proceed, nil
}

// stepPolicy reads the effective remediation policy into p.policy ([reconciler.policy]); while
// the referenced RemediationPolicy does not exist the reconcile ends (the policy watch enqueues
// the object when it appears). Errors: reading the policy; an invalid policy is terminal.
func (r *reconciler) stepPolicy(ctx context.Context, p *pass) (stepResult, error) {
	policy, ok, err := r.policy(ctx, p.obj)
	if err != nil || !ok {
		return finish, err
	}
	p.policy = policy
	return proceed, nil
}

// stepObserve ends the reconcile with the ResourceObserved of the object's current state: its
// policy, dependencies, source and bindings digest ([Observe]).
func (r *reconciler) stepObserve(_ context.Context, p *pass) (stepResult, error) {
	p.observation = &Observation{Object: p.obj, Policy: p.policy, Dependencies: p.deps.proto, Source: p.src,
		Bindings: p.bindings, Fresh: p.fresh}
	return finish, nil
}
