package synth

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
)

// ErrObjectMismatch is the error of a ResourceObserved whose object the API server does not
// have: the message is terminated as poison (reported) and no Secret is read.
var ErrObjectMismatch = errors.New("synth: the event's object is not the API server's")

// confirmObject asks the API server for the LavaArchitecture obs names before any
// bindingsFrom ConfigMap or Secret is read, so that a forged ResourceObserved never makes synth
// read another object's Secrets (docs/security.md, "Bus"). It does nothing for a spec without
// bindingsFrom or without Kubernetes access (nothing would be read). The object must exist
// with the event's UID; its metadata.generation must be the event's (ok), or newer (ok false:
// the event is stale, a newer ResourceObserved follows; drop it). A missing object, another
// UID or an older generation is a bus.Permanent [ErrObjectMismatch]; API errors are
// transient.
func (s *Service) confirmObject(ctx context.Context, obs *lavav1.ResourceObserved) (ok bool, err error) {
	if s.cfg.Kube == nil || len(obs.GetSpec().GetBindingsFrom()) == 0 {
		return true, nil
	}
	env := obs.GetEnvelope()
	res := env.GetResource()
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("LavaArchitecture"))
	err = s.cfg.Kube.Get(ctx, client.ObjectKey{Namespace: res.GetNamespace(), Name: res.GetName()}, obj)
	refuse := func(why string) (bool, error) {
		return false, bus.Permanent(fmt.Errorf("%w: %s/%s %s; its bindingsFrom are not read", ErrObjectMismatch,
			res.GetNamespace(), res.GetName(), why))
	}
	switch {
	case apierrors.IsNotFound(err):
		return refuse("does not exist")
	case err != nil:
		return false, fmt.Errorf("synth: confirm %s/%s: %w", res.GetNamespace(), res.GetName(), err)
	case string(obj.GetUID()) != res.GetUid():
		return refuse(fmt.Sprintf("has uid %s, the event names %s", obj.GetUID(), res.GetUid()))
	case obj.GetGeneration() > env.GetGeneration():
		return false, nil
	case obj.GetGeneration() < env.GetGeneration():
		return refuse(fmt.Sprintf("is at generation %d, the event names %d", obj.GetGeneration(), env.GetGeneration()))
	}
	return true, nil
}
