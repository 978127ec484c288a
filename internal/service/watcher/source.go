package watcher

import (
	"context"
	"fmt"
	"log/slog"

	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/telemetry/logattr"
)

// IndexSourceRef indexes LavaArchitectures by spec.sourceRef, "<Kind>/<namespace>/<name>"
// (the namespace defaulted to the object's own).
const IndexSourceRef = "lava.spec.sourceRef"

// fluxSource is what the watcher reads of a Flux source object (GitRepository,
// OCIRepository, Bucket of github.com/fluxcd/source-controller/api/v1).
type fluxSource interface {
	client.Object
	GetArtifact() *fluxmeta.Artifact
}

// newFluxSource returns an empty object of a spec.sourceRef kind, nil for another kind.
func newFluxSource(kind string) fluxSource {
	switch kind {
	case v1alpha1.SourceRefGitRepository:
		return &sourcev1.GitRepository{}
	case v1alpha1.SourceRefOCIRepository:
		return &sourcev1.OCIRepository{}
	case v1alpha1.SourceRefBucket:
		return &sourcev1.Bucket{}
	}
	return nil
}

// fluxSourceKinds are the kinds spec.sourceRef may name.
var fluxSourceKinds = []string{v1alpha1.SourceRefGitRepository, v1alpha1.SourceRefOCIRepository, v1alpha1.SourceRefBucket}

// sourceKey is spec.sourceRef's object key, its namespace defaulted to the object's.
func sourceKey(a *v1alpha1.LavaArchitecture) types.NamespacedName {
	ns := a.Spec.SourceRef.Namespace
	if ns == "" {
		ns = a.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: a.Spec.SourceRef.Name}
}

// sourceIndexKey is the IndexSourceRef value of a source of kind at key.
func sourceIndexKey(kind string, key types.NamespacedName) string {
	return kind + "/" + key.Namespace + "/" + key.Name
}

// sourceHold is why an object's spec.sourceRef holds it: the reason (ReasonSourceNotFound,
// ReasonSourceNotReady, ReasonCrossNamespaceRefRefused) and a message naming the source.
type sourceHold struct {
	reason, message string
}

// resolveSource reads obj's spec.sourceRef: the FluxSource for ResourceObserved (with the
// artifact of the source's status) or the hold that keeps the object waiting. A source that
// has an artifact is used even while its latest fetch fails (its Ready condition False), as
// Flux's own consumers do: the last good artifact stays the desired state. err is transient.
func (r *reconciler) resolveSource(ctx context.Context, obj *v1alpha1.LavaArchitecture) (*lavav1.FluxSource, *sourceHold, error) {
	ref := obj.Spec.SourceRef
	key := sourceKey(obj)
	name := ref.Kind + " " + key.String()
	if r.deps.noCrossNamespace && key.Namespace != obj.Namespace {
		return nil, &sourceHold{reason: v1alpha1.ReasonCrossNamespaceRefRefused,
			message: "spec.sourceRef names " + name + " in another namespace (this installation refuses cross-namespace references; an admin allows them with --allow-cross-namespace-refs)"}, nil
	}
	src := newFluxSource(ref.Kind)
	if src == nil {
		return nil, &sourceHold{reason: v1alpha1.ReasonSourceNotFound, message: fmt.Sprintf("spec.sourceRef: unknown kind %q (want GitRepository, OCIRepository or Bucket)", ref.Kind)}, nil
	}
	if !r.sourceKinds[ref.Kind] {
		return nil, &sourceHold{reason: v1alpha1.ReasonSourceNotFound,
			message: "spec.sourceRef: the API server served no " + ref.Kind + " (source.toolkit.fluxcd.io/v1) when the watcher started: install Flux's source-controller, then restart the watcher"}, nil
	}
	if err := r.c.Get(ctx, key, src); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, &sourceHold{reason: v1alpha1.ReasonSourceNotFound, message: "spec.sourceRef: " + name + " not found"}, nil
		case meta.IsNoMatchError(err):
			return nil, &sourceHold{reason: v1alpha1.ReasonSourceNotFound,
				message: "spec.sourceRef: the API server serves no " + ref.Kind + " (source.toolkit.fluxcd.io/v1): is Flux's source-controller installed?"}, nil
		}
		return nil, nil, fmt.Errorf("watcher: get %s: %w", name, err)
	}
	art := src.GetArtifact()
	if art == nil || art.URL == "" || art.Digest == "" {
		msg := "spec.sourceRef: " + name + " has no artifact yet"
		if c := readyCondition(src); c != nil && c.Status != metav1.ConditionTrue && c.Message != "" {
			msg += " (Ready " + string(c.Status) + ", " + c.Reason + ": " + c.Message + ")"
		}
		return nil, &sourceHold{reason: v1alpha1.ReasonSourceNotReady, message: truncateMessage(msg)}, nil
	}
	return &lavav1.FluxSource{
		Kind: ref.Kind, Namespace: key.Namespace, Name: key.Name, Path: obj.Spec.Path,
		Artifact: &lavav1.FluxArtifact{Url: art.URL, Digest: art.Digest, Revision: art.Revision},
	}, nil, nil
}

// readyCondition is the Ready condition of a Flux source, nil when it has none.
func readyCondition(o fluxSource) *metav1.Condition {
	var conds []metav1.Condition
	switch s := o.(type) {
	case *sourcev1.GitRepository:
		conds = s.Status.Conditions
	case *sourcev1.OCIRepository:
		conds = s.Status.Conditions
	case *sourcev1.Bucket:
		conds = s.Status.Conditions
	}
	return meta.FindStatusCondition(conds, fluxmeta.ReadyCondition)
}

// truncateMessage bounds a condition message taken from another object.
func truncateMessage(s string) string {
	const limit = 2048
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}

// sourceChanged passes the changes of a Flux source its users care about: creation,
// deletion, and a new artifact (digest or revision) or Ready status.
func sourceChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(fluxSource)
		n, ok2 := e.ObjectNew.(fluxSource)
		if !ok1 || !ok2 {
			return false
		}
		oa, na := o.GetArtifact(), n.GetArtifact()
		if (oa == nil) != (na == nil) || (oa != nil && (oa.Digest != na.Digest || oa.Revision != na.Revision || oa.URL != na.URL)) {
			return true
		}
		oc, nc := readyCondition(o), readyCondition(n)
		return (oc == nil) != (nc == nil) || (oc != nil && oc.Status != nc.Status)
	}, GenericFunc: func(event.GenericEvent) bool { return false }}
}

// sourceUsers maps a Flux source of kind to the LavaArchitectures whose spec.sourceRef names
// it.
func (r *reconciler) sourceUsers(kind string) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		key := client.ObjectKeyFromObject(o)
		var list v1alpha1.LavaArchitectureList
		if err := r.c.List(ctx, &list, client.MatchingFields{IndexSourceRef: sourceIndexKey(kind, key)}); err != nil {
			r.log.Error("watcher: list source users", logattr.Resource(key.Namespace, key.Name), slog.String("kind", kind), slog.Any("error", err))
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, a := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&a)})
		}
		return out
	}
}

// sourceRefIndex is the IndexSourceRef indexer.
func sourceRefIndex(o client.Object) []string {
	a, ok := o.(*v1alpha1.LavaArchitecture)
	if !ok || a.Spec.SourceRef == nil {
		return nil
	}
	return []string{sourceIndexKey(a.Spec.SourceRef.Kind, sourceKey(a))}
}
