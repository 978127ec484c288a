package applier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/internal/engine"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// architectureKey names the LavaArchitecture on its outputs Secret: always as an annotation, and
// as a label when the name fits a label value (at most 63 characters).
const architectureKey = "lava.pleme.io/architecture"

// secretLabels are the outputs Secret's labels for the LavaArchitecture name.
func secretLabels(name string) map[string]string {
	l := map[string]string{"app.kubernetes.io/managed-by": "lava"}
	if len(validation.IsValidLabelValue(name)) == 0 {
		l[architectureKey] = name
	}
	return l
}

// outputsSuffix ends every outputs Secret's name.
const outputsSuffix = "-lava-outputs"

// OutputsSecretName is the Secret holding a resource's sensitive outputs: "<name>-lava-outputs".
// A name too long for that (a Secret's name is a DNS subdomain of at most 253 characters, so
// names over 240) is cut to its first 223 characters (trailing dots and dashes dropped), followed
// by "-" and the first 16 hex digits of the SHA-256 of the whole name: unique per name, and a
// valid Secret name (docs/design/0008, "Long names").
func OutputsSecretName(name string) string {
	const maxName = 253
	if len(name)+len(outputsSuffix) <= maxName {
		return name + outputsSuffix
	}
	sum := sha256.Sum256([]byte(name))
	prefix := strings.TrimRight(name[:maxName-len(outputsSuffix)-1-16], ".-")
	return prefix + "-" + hex.EncodeToString(sum[:8]) + outputsSuffix
}

// ErrOutputsSecretNotOwned: the outputs Secret exists without an ownerReference to the
// LavaArchitecture's UID, so the applier does not write it.
var ErrOutputsSecretNotOwned = errors.New("outputs Secret not owned by the LavaArchitecture")

// ownedBy reports whether sec has an ownerReference to the LavaArchitecture with uid.
func ownedBy(sec *corev1.Secret, uid string) bool {
	for _, r := range sec.OwnerReferences {
		if r.Kind == "LavaArchitecture" && r.APIVersion == "lava.pleme.io/v1alpha1" && string(r.UID) == uid && uid != "" {
			return true
		}
	}
	return false
}

// notOwned is the error for a Secret that ownedBy refuses.
func notOwned(res *lavav1.ResourceRef, name string) error {
	return fmt.Errorf("%w: Secret %s/%s exists and is not owned by LavaArchitecture %s (uid %s); Lava never overwrites it: rename the LavaArchitecture or delete the Secret",
		ErrOutputsSecretNotOwned, res.GetNamespace(), name, res.GetName(), res.GetUid())
}

// ErrForbidden: the identity the object acts with may not get, create or update its outputs
// Secret (Kubernetes RBAC).
var ErrForbidden = errors.New("forbidden by Kubernetes RBAC")

// kubeErr wraps err of verb on the outputs Secret: a Forbidden answer wraps [ErrForbidden] and
// names who was refused.
func kubeErr(verb string, res *lavav1.ResourceRef, name string, kube access, err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%w: %s may not %s Secret %s/%s (grant it get, create and update on that Secret)", ErrForbidden, kube.who, verb, res.GetNamespace(), name)
	}
	return fmt.Errorf("applier: %s Secret %s/%s: %w", verb, res.GetNamespace(), name, err)
}

// access is the Kubernetes client the applier acts with for one object, and who it is.
type access struct {
	c   client.Client
	who string
}

// outputsSecretOwned checks, before anything is planned, that the outputs Secret of res is
// absent or owned by res: nil then, an error wrapping [ErrOutputsSecretNotOwned] when another
// Secret holds the name, [ErrForbidden] when kube may not read it, another error when it cannot
// be read. Without Kubernetes access it is nil (no Secret is ever written).
func outputsSecretOwned(ctx context.Context, kube access, res *lavav1.ResourceRef) error {
	if kube.c == nil {
		return nil
	}
	name := OutputsSecretName(res.GetName())
	sec := &corev1.Secret{}
	err := kube.c.Get(ctx, client.ObjectKey{Namespace: res.GetNamespace(), Name: name}, sec)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return kubeErr("get", res, name, kube, err)
	case !ownedBy(sec, res.GetUid()):
		return notOwned(res, name)
	}
	return nil
}

// secretValue is the Secret data of one output: a string's text, else the value's compact JSON.
func secretValue(v json.RawMessage) []byte {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return []byte(s)
	}
	return []byte(compactJSON(v))
}

// writeOutputs stores the sensitive outputs in the Secret "<name>-lava-outputs" (created owned
// by the LavaArchitecture, so it goes when the object goes; updated in place only while it
// carries that ownerReference, else an error wrapping [ErrOutputsSecretNotOwned]) and returns
// its name, or "" when there are no sensitive outputs or no Kubernetes client.
func writeOutputs(ctx context.Context, kube access, res *lavav1.ResourceRef, outs *engine.Outputs, log *slog.Logger) (string, error) {
	if outs == nil || len(outs.Sensitive) == 0 {
		return "", nil
	}
	if kube.c == nil {
		log.Warn("sensitive outputs not stored: the applier has no Kubernetes access", "outputs", len(outs.Sensitive))
		return "", nil
	}
	name := OutputsSecretName(res.GetName())
	data := map[string][]byte{}
	for k, v := range outs.Sensitive {
		data[k] = secretValue(v)
	}
	sec := &corev1.Secret{}
	err := kube.c.Get(ctx, client.ObjectKey{Namespace: res.GetNamespace(), Name: name}, sec)
	switch {
	case apierrors.IsNotFound(err):
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: res.GetNamespace(), Name: name,
				Labels:      secretLabels(res.GetName()),
				Annotations: map[string]string{architectureKey: res.GetName()},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "lava.pleme.io/v1alpha1", Kind: "LavaArchitecture",
					Name: res.GetName(), UID: types.UID(res.GetUid())}},
			},
			Type: corev1.SecretTypeOpaque,
			Data: data,
		}
		if err := kube.c.Create(ctx, sec); err != nil {
			return "", kubeErr("create", res, name, kube, err)
		}
	case err != nil:
		return "", kubeErr("get", res, name, kube, err)
	case !ownedBy(sec, res.GetUid()):
		return "", notOwned(res, name)
	default:
		if maps.EqualFunc(sec.Data, data, func(a, b []byte) bool { return string(a) == string(b) }) {
			return name, nil
		}
		sec.Data = data
		if err := kube.c.Update(ctx, sec); err != nil {
			return "", kubeErr("update", res, name, kube, err)
		}
	}
	return name, nil
}
