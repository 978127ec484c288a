package watcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/telemetry/logattr"
)

// reconciler reconciles one LavaArchitecture: finalizer, suspend, dependencies, policy, and
// the ResourceObserved / DeletionRequested it publishes.
type reconciler struct {
	c      client.Client // cached reads, writes
	reader client.Reader // uncached reads: the ConfigMaps and Secrets of spec.bindingsFrom
	// bindingsKey keys the digest of Secret bindings ([Config].BindingsKey); empty: Secrets
	// contribute their resourceVersion.
	bindingsKey []byte
	// watchSecrets is [Config].WatchSecrets: Secrets are watched and read with reader.
	watchSecrets bool
	// readSecrets is [Config].ReadSecrets without WatchSecrets: bound Secrets are read with
	// `get` as the object's identity (ids; nil: reader) and rechecked every secretRecheck
	// (zero: the object's spec.driftInterval). With neither, Secrets are not read at all.
	readSecrets   bool
	ids           *identity.Clients
	secretRecheck time.Duration
	// secretBudget bounds the bound Secret reads per namespace ([Config].SecretReadsPerSecond).
	secretBudget *secretBudget
	// deletionWait is [Config].DeletionWait (0: no wait).
	deletionWait time.Duration
	core         *Core
	rec          recorder.EventRecorder
	resources    jetstream.Stream // LAVA_RESOURCES, to read the last event published per subject
	deps         resolver
	// sourceKinds are the Flux source kinds the API server served at start (watched).
	sourceKinds map[string]bool
	clock       func() time.Time
	metrics     *Metrics
	log         *slog.Logger
}

var _ reconcile.Reconciler = (*reconciler)(nil)

// Reconcile implements [reconcile.Reconciler]. It is level-triggered: it reads the object and
// derives everything from its current state and the last event stored on its subjects. It runs
// [reconciler.steps] in order until one stops the reconcile or fails; the steps read and decide,
// and [reconciler.summarize], deferred, folds what they decided into the status and publishes
// the object's event. An object that no longer exists is forgotten by the Core. Errors: reading
// the object, a step's, the summary's.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (result reconcile.Result, retErr error) {
	obj := &v1alpha1.LavaArchitecture{}
	if err := r.c.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.core.Forget(req.NamespacedName)
			r.secretBudget.forget(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("watcher: get %s: %w", req.NamespacedName, err)
	}
	p := &pass{obj: obj}
	defer func() { retErr = r.summarize(ctx, p, retErr) }()
	for _, step := range r.steps() {
		next, err := step(ctx, p)
		if err != nil || next.stop {
			return r.recheck(obj, next.result), err
		}
	}
	return r.recheck(obj, reconcile.Result{}), nil
}

// recheck is res, requeued no later than the object's Secret recheck when its bound Secrets
// are read rather than watched ([Config].ReadSecrets): nothing else tells the watcher that
// such a Secret changed. An object being deleted is not rechecked.
func (r *reconciler) recheck(obj *v1alpha1.LavaArchitecture, res reconcile.Result) reconcile.Result {
	if !r.readSecrets || !obj.DeletionTimestamp.IsZero() || !bindsSecret(obj) {
		return res
	}
	d := r.secretRecheck
	if d <= 0 {
		d = pipeline.DriftInterval(obj.Spec)
	}
	if res.RequeueAfter <= 0 || d < res.RequeueAfter {
		res.RequeueAfter = d
	}
	return res
}

// policy is obj's effective remediation policy; ok is false (and err nil) while the
// referenced RemediationPolicy does not exist (held: the policy watch enqueues obj when it
// appears).
func (r *reconciler) policy(ctx context.Context, obj *v1alpha1.LavaArchitecture) (*lavav1.RemediationPolicy, bool, error) {
	var ref *v1alpha1.RemediationPolicy
	if pr := obj.Spec.RemediationPolicyRef; pr != nil && obj.Spec.Remediation == nil {
		ref = &v1alpha1.RemediationPolicy{}
		if err := r.c.Get(ctx, types.NamespacedName{Namespace: obj.Namespace, Name: pr.Name}, ref); err != nil {
			if !apierrors.IsNotFound(err) {
				return nil, false, fmt.Errorf("watcher: get remediation policy %s/%s: %w", obj.Namespace, pr.Name, err)
			}
			r.metrics.incHeld(heldPolicyMissing)
			r.rec.Eventf(obj, nil, corev1.EventTypeWarning, "RemediationPolicyNotFound", "Hold",
				"RemediationPolicy %s not found: no work is published until it exists", pr.Name)
			return nil, false, nil
		}
	}
	policy, err := EffectivePolicy(obj.Spec, ref)
	if err != nil {
		return nil, false, reconcile.TerminalError(err)
	}
	return policy, true, nil
}

// ObservedTrigger is the trigger of the ResourceObserved for obj's current state:
// "generation:<n>" when nothing forces a pass; otherwise "reconcile:<annotation value>",
// "policy:<resourceVersion of the referenced RemediationPolicy>" (policyRV, empty without a
// reference) and/or "bindings:<digest of the bindingsFrom sources>" (bindings, empty without
// bindingsFrom; [reconciler.bindingsDigest]), joined by ";" in that order. The generation is
// an input of the event id in every case, so a new generation always gets a new id.
func ObservedTrigger(obj *v1alpha1.LavaArchitecture, policyRV, bindings string) string {
	var parts []string
	if v := obj.Annotations[v1alpha1.ReconcileRequestedAnnotation]; v != "" {
		parts = append(parts, eventid.ReconcileTrigger(v))
	}
	if policyRV != "" {
		parts = append(parts, eventid.PolicyTrigger(policyRV))
	}
	if bindings != "" {
		parts = append(parts, eventid.BindingsTrigger(bindings))
	}
	if len(parts) == 0 {
		return eventid.GenerationTrigger(obj.Generation)
	}
	return strings.Join(parts, ";")
}

// addFinalizer adds the lava finalizer with an optimistic lock. A conflict (another writer
// changed the object since the cache saw it: labels, annotations) is retried from an uncached
// read, so metadata churn by other actors costs a read, not a failed reconcile and its
// requeue; a new generation or deletion seen on the re-read still adds the finalizer (the
// reconcile goes on with obj as read).
func (r *reconciler) addFinalizer(ctx context.Context, obj *v1alpha1.LavaArchitecture) error {
	first, added := true, false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			fresh := &v1alpha1.LavaArchitecture{}
			if err := r.reader.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
				return err
			}
			fresh.DeepCopyInto(obj)
			if controllerutil.ContainsFinalizer(obj, v1alpha1.Finalizer) {
				return nil
			}
		}
		first = false
		orig := obj.DeepCopy()
		controllerutil.AddFinalizer(obj, v1alpha1.Finalizer)
		err := r.c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		added = err == nil
		return err
	})
	if err != nil {
		return fmt.Errorf("watcher: add finalizer to %s/%s: %w", obj.Namespace, obj.Name, err)
	}
	if added {
		r.metrics.inc(func(m *Metrics) prometheus.Counter { return m.finalizerAdded })
	}
	// The patch (or the re-read) answered with the live object: its status is what the server has.
	r.core.Remember(obj)
	return nil
}

// forcedPass passes updates that change the reconcile-requested-at annotation.
func forcedPass() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetAnnotations()[v1alpha1.ReconcileRequestedAnnotation] !=
			e.ObjectNew.GetAnnotations()[v1alpha1.ReconcileRequestedAnnotation]
	}}
}

// deletionStarted passes updates that set deletionTimestamp.
func deletionStarted() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
	}}
}

// dependencyChanged passes the changes of a LavaArchitecture that its dependents care about:
// creation, deletion, a new generation, a new phase or observedGeneration, and new outputs
// (bound by spec.bindingsFrom outputsRef).
func dependencyChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.LavaArchitecture)
		n, ok2 := e.ObjectNew.(*v1alpha1.LavaArchitecture)
		if !ok1 || !ok2 {
			return false
		}
		return o.Generation != n.Generation || o.Status.Phase != n.Status.Phase ||
			o.Status.ObservedGeneration != n.Status.ObservedGeneration ||
			o.Status.OutputsSecret != n.Status.OutputsSecret || !equality.Semantic.DeepEqual(o.Status.Outputs, n.Status.Outputs)
	}, GenericFunc: func(event.GenericEvent) bool { return false }}
}

// dependentsOf maps a LavaArchitecture to the resources that depend on it ([reconciler.dependents]).
func (r *reconciler) dependentsOf(ctx context.Context, o client.Object) []reconcile.Request {
	key := client.ObjectKeyFromObject(o)
	keys, err := r.dependents(ctx, key)
	if err != nil {
		r.log.Error("watcher: list dependents", logattr.Resource(key.Namespace, key.Name), slog.Any("error", err))
	}
	out := make([]reconcile.Request, 0, len(keys))
	for _, k := range keys {
		out = append(out, reconcile.Request{NamespacedName: k})
	}
	return out
}

// dependents returns the resources of this cluster that depend on key, sorted: through
// spec.dependsOn or spec.bindingsFrom outputsRef (IndexDependsOn), or as the from of a
// LavaArchitectureDependency whose to is key (IndexEdgeTo; the from may not exist); under
// lockdown only those of key's namespace. Errors:
// listing either index (what the other found is still returned).
func (r *reconciler) dependents(ctx context.Context, key types.NamespacedName) ([]types.NamespacedName, error) {
	seen := map[types.NamespacedName]bool{key: true}
	var out []types.NamespacedName
	add := func(k types.NamespacedName) {
		// Under lockdown an edge from another namespace is refused (resolver.edges): it
		// neither holds this object's deletion nor names the other namespace's object here.
		if r.deps.noCrossNamespace && k.Namespace != key.Namespace {
			return
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	var list v1alpha1.LavaArchitectureList
	err1 := r.c.List(ctx, &list, client.MatchingFields{IndexDependsOn: key.String()})
	for _, a := range list.Items {
		add(client.ObjectKeyFromObject(&a))
	}
	var edges v1alpha1.LavaArchitectureDependencyList
	err2 := r.c.List(ctx, &edges, client.MatchingFields{IndexEdgeTo: key.String()})
	for _, e := range edges.Items {
		if from, ok := refKey(e.Namespace, e.Spec.From, r.deps.cluster); ok {
			add(from)
		}
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	return out, errors.Join(err1, err2)
}

// consumersGone passes the deletion of a LavaArchitecture (its finalizer removed after its
// destroy): the objects it consumed may be waiting for it ([reconciler.deletionBlocked]).
func consumersGone() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// targetsOf maps a LavaArchitecture to the resources it depends on in this cluster
// (spec.dependsOn, spec.bindingsFrom outputsRef, LavaArchitectureDependency objects whose
// from is it), for [consumersGone].
func (r *reconciler) targetsOf(ctx context.Context, o client.Object) []reconcile.Request {
	a, ok := o.(*v1alpha1.LavaArchitecture)
	if !ok {
		return nil
	}
	key := client.ObjectKeyFromObject(a)
	var out []reconcile.Request
	for _, d := range a.Spec.DependsOn {
		out = append(out, reconcile.Request{NamespacedName: dependsOnTarget(a.Namespace, d)})
	}
	for _, t := range outputsRefTargets(a) {
		out = append(out, reconcile.Request{NamespacedName: t})
	}
	var edges v1alpha1.LavaArchitectureDependencyList
	if err := r.c.List(ctx, &edges, client.MatchingFields{IndexEdgeFrom: key.String()}); err != nil {
		r.log.Error("watcher: list dependency edges", logattr.Resource(key.Namespace, key.Name), slog.Any("error", err))
	}
	for _, e := range edges.Items {
		if to, ok := refKey(e.Namespace, e.Spec.To, r.deps.cluster); ok {
			out = append(out, reconcile.Request{NamespacedName: to})
		}
	}
	return out
}

// maxNamed is how many consumers a DeletionBlocked message names before it counts the rest.
const maxNamed = 10

// deletionBlocked decides whether p.obj's destroy waits for the objects that consume it
// ([reconciler.dependents] that exist): while they exist and deletionWait since its
// deletionTimestamp has not passed, it folds DeletionBlocked naming them and the deadline and
// stops the reconcile until the deadline (a consumer's deletion enqueues the object sooner:
// [consumersGone]). Once they are gone or the wait ran out it folds DeletionUnblocked (the
// condition is set only where it was True) and the deletion proceeds. Errors: listing or
// reading the consumers.
func (r *reconciler) deletionBlocked(ctx context.Context, p *pass) (stepResult, bool, error) {
	if r.deletionWait <= 0 {
		return stepResult{}, false, nil
	}
	key := client.ObjectKeyFromObject(p.obj)
	keys, err := r.dependents(ctx, key)
	if err != nil {
		return finish, false, err
	}
	var consumers []string
	for _, k := range keys {
		err := r.c.Get(ctx, k, &v1alpha1.LavaArchitecture{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return finish, false, fmt.Errorf("watcher: get consumer %s: %w", k, err)
		default:
			consumers = append(consumers, k.String())
		}
	}
	named := strings.Join(consumers[:min(len(consumers), maxNamed)], ", ")
	if n := len(consumers) - maxNamed; n > 0 {
		named += fmt.Sprintf(" and %d more", n)
	}
	deadline := p.obj.DeletionTimestamp.Add(r.deletionWait)
	left := deadline.Sub(now(r.clock))
	switch {
	case len(consumers) > 0 && left > 0:
		r.metrics.incHeld(heldDeletion)
		p.fold(pipeline.Event{Type: pipeline.EventDeletionBlocked, Message: fmt.Sprintf(
			"waiting for %s to be destroyed first, until %s", named, deadline.UTC().Format(time.RFC3339))})
		return stepResult{stop: true, result: reconcile.Result{RequeueAfter: left}}, true, nil
	case len(consumers) > 0:
		p.fold(pipeline.Event{Type: pipeline.EventDeletionUnblocked, Reason: v1alpha1.ReasonDeletionWaitExpired, Message: fmt.Sprintf(
			"waited %s for the consumers; destroying although %s still consume this object", r.deletionWait, named)})
	case conditionTrue(r.core, p.obj, v1alpha1.ConditionDeletionBlocked):
		p.fold(pipeline.Event{Type: pipeline.EventDeletionUnblocked, Reason: v1alpha1.ReasonConsumersDestroyed,
			Message: "the objects that consumed this one are gone; destroying"})
	}
	return stepResult{}, false, nil
}

// policyUsers maps a RemediationPolicy to the LavaArchitectures that reference it.
func (r *reconciler) policyUsers(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1alpha1.LavaArchitectureList
	if err := r.c.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{IndexPolicyRef: o.GetName()}); err != nil {
		r.log.Error("watcher: list policy users", slog.String("policy", o.GetNamespace()+"/"+o.GetName()), slog.Any("error", err))
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, a := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&a)})
	}
	return out
}

// edgeDependent maps a LavaArchitectureDependency to its from resource.
func (r *reconciler) edgeDependent(_ context.Context, o client.Object) []reconcile.Request {
	e, ok := o.(*v1alpha1.LavaArchitectureDependency)
	if !ok {
		return nil
	}
	from, ok := refKey(e.Namespace, e.Spec.From, r.deps.cluster)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: from}}
}

// indexes registers the field indexes the watches and the dependency resolver use.
func indexes(ctx context.Context, idx client.FieldIndexer, cluster string) error {
	err := idx.IndexField(ctx, &v1alpha1.LavaArchitecture{}, IndexPolicyRef, func(o client.Object) []string {
		a, ok := o.(*v1alpha1.LavaArchitecture)
		if !ok || a.Spec.RemediationPolicyRef == nil {
			return nil
		}
		return []string{a.Spec.RemediationPolicyRef.Name}
	})
	if err == nil {
		err = idx.IndexField(ctx, &v1alpha1.LavaArchitecture{}, IndexSourceRef, sourceRefIndex)
	}
	if err == nil {
		err = idx.IndexField(ctx, &v1alpha1.LavaArchitecture{}, IndexBindingRef, func(o client.Object) []string {
			if a, ok := o.(*v1alpha1.LavaArchitecture); ok {
				return bindingRefKeys(a)
			}
			return nil
		})
	}
	if err == nil {
		err = idx.IndexField(ctx, &v1alpha1.LavaArchitecture{}, IndexDependsOn, func(o client.Object) []string {
			if a, ok := o.(*v1alpha1.LavaArchitecture); ok {
				return dependsOnKeys(a)
			}
			return nil
		})
	}
	edgeIndex := func(to bool) client.IndexerFunc {
		return func(o client.Object) []string {
			e, ok := o.(*v1alpha1.LavaArchitectureDependency)
			if !ok {
				return nil
			}
			ref := e.Spec.From
			if to {
				ref = e.Spec.To
			}
			if k, ok := refKey(e.Namespace, ref, cluster); ok {
				return []string{k.String()}
			}
			return nil
		}
	}
	if err == nil {
		err = idx.IndexField(ctx, &v1alpha1.LavaArchitectureDependency{}, IndexEdgeFrom, edgeIndex(false))
	}
	if err == nil {
		err = idx.IndexField(ctx, &v1alpha1.LavaArchitectureDependency{}, IndexEdgeTo, edgeIndex(true))
	}
	if err != nil {
		return fmt.Errorf("watcher: field index: %w", err)
	}
	return nil
}
