package applier

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
)

// ErrDeletionRefused is the error of a DeletionRequested the API server does not confirm: the
// message is terminated as poison (reported as a poison_message anomaly) and nothing is
// destroyed.
var ErrDeletionRefused = errors.New("applier: deletion not confirmed by the API server")

// confirmDeletion asks the API server whether res (a DeletionRequested's resource) is being
// deleted, so that a forged or replayed DeletionRequested never destroys a live object
// (docs/security.md, "Bus"). It allows the destroy when the LavaArchitecture has the event's
// UID, a deletionTimestamp and Lava's finalizer (v1alpha1.Finalizer), or when it no longer
// exists (the orphan path: the object was removed, by force or with its finalizer edited
// away, while its state still holds infrastructure; the destroy the user asked for still
// runs). A live object, one without the finalizer, or one with another UID (a new object of
// the same name) is refused with a bus.Permanent [ErrDeletionRefused]. Without Kubernetes
// access (Config.Kube nil: `lava up` on files, --no-kube) the check is skipped: the bus
// permissions, which let only the watcher publish DeletionRequested, are then the only guard.
// API errors are transient (the message is redelivered).
func (s *Service) confirmDeletion(ctx context.Context, res *lavav1.ResourceRef) error {
	if s.cfg.Kube == nil {
		return nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("LavaArchitecture"))
	err := s.cfg.Kube.Get(ctx, client.ObjectKey{Namespace: res.GetNamespace(), Name: res.GetName()}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("applier: confirm deletion of %s/%s: %w", res.GetNamespace(), res.GetName(), err)
	}
	refuse := func(why string) error {
		return bus.Permanent(fmt.Errorf("%w: %s/%s %s", ErrDeletionRefused, res.GetNamespace(), res.GetName(), why))
	}
	switch {
	case string(obj.GetUID()) != res.GetUid():
		return refuse(fmt.Sprintf("has uid %s, the event names %s", obj.GetUID(), res.GetUid()))
	case obj.GetDeletionTimestamp() == nil:
		return refuse("is not being deleted (no deletionTimestamp)")
	case !slices.Contains(obj.GetFinalizers(), v1alpha1.Finalizer):
		return refuse("does not carry the finalizer " + v1alpha1.Finalizer)
	}
	return nil
}
