package watcher

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/platform/telemetry/logattr"
)

// apiStore is the [Store] of the API server: uncached reads, status merge patches with an
// optimistic lock on the status subresource, and the finalizer removed on release.
type apiStore struct {
	c   client.Client // writes
	api client.Reader // uncached reads
	log *slog.Logger
}

// NewAPIStore returns the [Store] of the API server: c writes (the status subresource and the
// finalizer), api reads uncached (a manager's APIReader). log receives a warning when a
// Destroyed comes for an object that is not being deleted (its finalizer is kept).
func NewAPIStore(c client.Client, api client.Reader, log *slog.Logger) Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &apiStore{c: c, api: api, log: log}
}

func (s *apiStore) Get(ctx context.Context, key types.NamespacedName) (*v1alpha1.LavaArchitecture, error) {
	obj := &v1alpha1.LavaArchitecture{}
	if err := s.api.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errGone
		}
		return nil, fmt.Errorf("watcher: get %s: %w", key, err)
	}
	return obj, nil
}

// UpdateStatus merge-patches the status subresource from obj's status to status, with obj's
// resourceVersion as the optimistic lock. obj may be partial (name, uid, resourceVersion,
// status): the patch holds only the status difference.
func (s *apiStore) UpdateStatus(ctx context.Context, obj *v1alpha1.LavaArchitecture, status v1alpha1.LavaArchitectureStatus) (*v1alpha1.LavaArchitecture, error) {
	next := obj.DeepCopy()
	next.Status = *status.DeepCopy()
	if err := s.c.Status().Patch(ctx, next, client.MergeFromWithOptions(obj, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errGone
		}
		return nil, err
	}
	return next, nil
}

// Release removes the lava finalizer from key (when the object is being deleted), re-reading
// it on conflict. A missing object, or one of another uid, is success.
func (s *apiStore) Release(ctx context.Context, key types.NamespacedName, uid types.UID) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj := &v1alpha1.LavaArchitecture{}
		if err := s.api.Get(ctx, key, obj); err != nil {
			return err
		}
		if (uid != "" && obj.UID != uid) || !controllerutil.ContainsFinalizer(obj, v1alpha1.Finalizer) {
			return nil
		}
		if obj.DeletionTimestamp == nil {
			s.log.Warn("watcher: Destroyed for an object that is not being deleted; finalizer kept", logattr.Resource(key.Namespace, key.Name))
			return nil
		}
		orig := obj.DeepCopy()
		controllerutil.RemoveFinalizer(obj, v1alpha1.Finalizer)
		return s.c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	})
	if apierrors.IsNotFound(err) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("watcher: remove finalizer of %s: %w", key, err)
	}
	return nil
}

// now is the time of an event the watcher produces itself.
func now(clock func() time.Time) time.Time {
	if clock == nil {
		return time.Now()
	}
	return clock()
}
