package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and Version of every Lava custom resource.
const (
	// Group is the API group, lava.pleme.io (docs/dialect.md section 5.1).
	Group = "lava.pleme.io"
	// Version is the API version of this package.
	Version = "v1alpha1"
)

// Kind names, as they appear in the `kind` field of a manifest.
const (
	// KindLavaArchitecture is the kind of [LavaArchitecture].
	KindLavaArchitecture = "LavaArchitecture"
	// KindRemediationPolicy is the kind of [RemediationPolicy].
	KindRemediationPolicy = "RemediationPolicy"
	// KindLavaArchitectureDependency is the kind of [LavaArchitectureDependency].
	KindLavaArchitectureDependency = "LavaArchitectureDependency"
)

// Finalizer is the finalizer the watcher adds to every LavaArchitecture before its first apply
// and removes once the destroy (or, with deletionPolicy Orphan, the release) is done.
const Finalizer = "lava.pleme.io/finalizer"

// ReconcileRequestedAnnotation forces a new reconcile pass for an unchanged generation when its
// value changes (any string; a timestamp by convention, as Flux's requestedAt).
const ReconcileRequestedAnnotation = "lava.pleme.io/reconcile-requested-at"

// GroupVersion is lava.pleme.io/v1alpha1. Treat it as a constant.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// AddToScheme registers the three Lava kinds and their lists with s, together with the
// metav1 types (ListOptions, Status, ...) a client needs for this group version. It never
// fails; the error is there to satisfy [runtime.SchemeBuilder].
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&LavaArchitecture{}, &LavaArchitectureList{},
		&RemediationPolicy{}, &RemediationPolicyList{},
		&LavaArchitectureDependency{}, &LavaArchitectureDependencyList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
