package watcher

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"lukechampine.com/blake3"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/telemetry/logattr"
)

// IndexBindingRef indexes LavaArchitectures by each spec.bindingsFrom source in their own
// namespace: "ConfigMap/<name>", "Secret/<name>" or "LavaArchitecture/<name>" (outputsRef).
const IndexBindingRef = "lava.spec.bindingsFrom"

// Kinds of a bindingsFrom source, as they appear in IndexBindingRef values and messages.
const (
	bindingKindConfigMap    = "ConfigMap"
	bindingKindSecret       = "Secret"
	bindingKindArchitecture = "LavaArchitecture"
)

// bindingRef is one spec.bindingsFrom source: its kind and name (in the object's namespace).
type bindingRef struct{ kind, name string }

func (b bindingRef) String() string { return b.kind + "/" + b.name }

// bindingRefs are the sources of a's spec.bindingsFrom, in order.
func bindingRefs(a *v1alpha1.LavaArchitecture) []bindingRef {
	var out []bindingRef
	for _, b := range a.Spec.BindingsFrom {
		switch {
		case b.ConfigMapRef != nil:
			out = append(out, bindingRef{bindingKindConfigMap, b.ConfigMapRef.Name})
		case b.SecretRef != nil:
			out = append(out, bindingRef{bindingKindSecret, b.SecretRef.Name})
		case b.OutputsRef != nil:
			out = append(out, bindingRef{bindingKindArchitecture, b.OutputsRef.Name})
		}
	}
	return out
}

// bindingRefKeys are the IndexBindingRef values of a.
func bindingRefKeys(a *v1alpha1.LavaArchitecture) []string {
	var out []string
	for _, b := range bindingRefs(a) {
		out = append(out, b.String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// outputsRefTargets are the LavaArchitectures whose outputs a binds (spec.bindingsFrom
// outputsRef): implied spec.dependsOn entries with phase Applied, in a's namespace.
func outputsRefTargets(a *v1alpha1.LavaArchitecture) []types.NamespacedName {
	var out []types.NamespacedName
	for _, b := range a.Spec.BindingsFrom {
		if b.OutputsRef != nil {
			out = append(out, types.NamespacedName{Namespace: a.Namespace, Name: b.OutputsRef.Name})
		}
	}
	return out
}

// bindingsDigest is the content digest of obj's spec.bindingsFrom sources, 64 hex digits, ""
// without bindingsFrom; it is part of the ResourceObserved trigger, so a changed source starts a
// new render and an unchanged one (a resync, a metadata-only update) does not. Each source
// contributes its kind, name and data: a ConfigMap's data and binaryData; a Secret's data
// through a BLAKE3 keyed with the installation's bindings key (without a key: the Secret's
// resourceVersion only, so nothing derived from a Secret value is published); a
// LavaArchitecture's status.outputs and, the same way as a Secret, its outputs Secret.
// ConfigMaps are read through the API reader (the watcher caches only their metadata); Secrets
// as [reconciler.secretDigest] says, and not at all without [Config].WatchSecrets or
// [Config].ReadSecrets (they then contribute nothing). missing names the first source that does
// not exist ("" when all do).
func (r *reconciler) bindingsDigest(ctx context.Context, obj *v1alpha1.LavaArchitecture) (digest, missing string, err error) {
	refs := bindingRefs(obj)
	if len(refs) == 0 {
		return "", "", nil
	}
	h := blake3.New(32, nil)
	field := func(s string) { fmt.Fprintf(h, "%d:%s", len(s), s) }
	// A Secret named twice (32 entries may name one) is read once; its contribution repeats.
	type read struct {
		ok     bool
		fields []string
	}
	reads := map[types.NamespacedName]*read{}
	secret := func(key types.NamespacedName) (bool, error) {
		if rd, ok := reads[key]; ok {
			for _, f := range rd.fields {
				field(f)
			}
			return rd.ok, nil
		}
		rd := &read{}
		ok, err := r.secretDigest(ctx, obj, key, func(s string) { rd.fields = append(rd.fields, s); field(s) })
		if err != nil {
			return false, err
		}
		rd.ok = ok
		reads[key] = rd
		return ok, nil
	}
	for i, ref := range refs {
		field(ref.String())
		key := types.NamespacedName{Namespace: obj.Namespace, Name: ref.name}
		notFound := fmt.Sprintf("spec.bindingsFrom[%d]: %s %q not found in namespace %q", i, ref.kind, ref.name, obj.Namespace)
		switch ref.kind {
		case bindingKindConfigMap:
			var cm corev1.ConfigMap
			if err := r.reader.Get(ctx, key, &cm); err != nil {
				if apierrors.IsNotFound(err) {
					return "", notFound, nil
				}
				return "", "", fmt.Errorf("watcher: get ConfigMap %s: %w", key, err)
			}
			for _, k := range sortedKeys(cm.Data) {
				field(k)
				field(cm.Data[k])
			}
			for _, k := range sortedKeys(cm.BinaryData) {
				field(k)
				field(string(cm.BinaryData[k]))
			}
		case bindingKindSecret:
			if !r.watchSecrets && !r.readSecrets {
				continue
			}
			ok, err := secret(key)
			if err != nil {
				return "", "", err
			}
			if !ok {
				return "", notFound, nil
			}
		case bindingKindArchitecture:
			var p v1alpha1.LavaArchitecture
			if err := r.c.Get(ctx, key, &p); err != nil {
				if apierrors.IsNotFound(err) {
					return "", notFound, nil
				}
				return "", "", fmt.Errorf("watcher: get LavaArchitecture %s: %w", key, err)
			}
			for _, k := range sortedKeys(p.Status.Outputs) {
				field(k)
				field(string(p.Status.Outputs[k].Raw))
			}
			if p.Status.OutputsSecret != "" && (r.watchSecrets || r.readSecrets) {
				// Absent outputs Secret: the producer has not written its sensitive outputs yet
				// (its phase gates the consumer); it contributes nothing.
				if _, err := secret(types.NamespacedName{Namespace: obj.Namespace, Name: p.Status.OutputsSecret}); err != nil {
					return "", "", err
				}
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), "", nil
}

// secretDigest adds the Secret key's contribution to a bindings digest of obj through field: a
// keyed BLAKE3 of its data with r.bindingsKey, or its resourceVersion without a key. With
// WatchSecrets it reads with the watcher's own reader; under ReadSecrets with `get` as obj's
// identity ([reconciler.secretReader]), and a Secret that identity may not read (Forbidden, no
// ServiceAccount to act as) contributes the marker "unreadable" (synth, which reads as the same
// identity, reports it when it renders). ok is false when the Secret does not exist. Errors:
// the API server's other errors.
func (r *reconciler) secretDigest(ctx context.Context, obj *v1alpha1.LavaArchitecture, key types.NamespacedName, field func(string)) (ok bool, err error) {
	reader, err := r.secretReader(obj)
	var s corev1.Secret
	if err == nil {
		err = reader.Get(ctx, key, &s)
	}
	switch {
	case err == nil:
	case apierrors.IsNotFound(err):
		return false, nil
	case !r.watchSecrets && (apierrors.IsForbidden(err) || errors.Is(err, identity.ErrNoServiceAccount)):
		r.log.Debug("watcher: bound Secret unreadable", logattr.Resource(obj.Namespace, obj.Name),
			slog.String("secret", key.Name), slog.Any("error", err))
		field("unreadable")
		return true, nil
	default:
		return false, fmt.Errorf("watcher: get Secret %s: %w", key, err)
	}
	if len(r.bindingsKey) == 0 {
		field("resourceVersion")
		field(s.ResourceVersion)
		return true, nil
	}
	kh := blake3.New(32, r.bindingsKey)
	for _, k := range sortedKeys(s.Data) {
		fmt.Fprintf(kh, "%d:%s%d:", len(k), k, len(s.Data[k]))
		_, _ = kh.Write(s.Data[k])
	}
	field(hex.EncodeToString(kh.Sum(nil)))
	return true, nil
}

// secretReader is who reads obj's bound Secrets: the watcher's own reader with WatchSecrets or
// without impersonation, else obj's ServiceAccount ([identity.Clients.For]). Errors: obj has no
// ServiceAccount to act as ([identity.ErrNoServiceAccount]).
func (r *reconciler) secretReader(obj *v1alpha1.LavaArchitecture) (client.Reader, error) {
	if r.watchSecrets || r.ids == nil {
		return r.reader, nil
	}
	c, _, err := r.ids.For(obj.Namespace, obj.Spec.ServiceAccountName)
	return c, err
}

// bindsSecret reports whether obj's bindings read a Secret: a spec.bindingsFrom secretRef, or an
// outputsRef (whose producer may keep its sensitive outputs in a Secret).
func bindsSecret(obj *v1alpha1.LavaArchitecture) bool {
	for _, b := range obj.Spec.BindingsFrom {
		if b.SecretRef != nil || b.OutputsRef != nil {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// bindingUsers maps a ConfigMap or Secret (metadata only) to the LavaArchitectures of its
// namespace whose spec.bindingsFrom names it, and an outputs Secret (controller-owned by a
// LavaArchitecture) to the LavaArchitectures that bind that owner's outputs.
func (r *reconciler) bindingUsers(kind string) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		keys := []string{bindingRef{kind, o.GetName()}.String()}
		if kind == bindingKindSecret {
			for _, ow := range o.GetOwnerReferences() {
				if ow.Kind == bindingKindArchitecture && ow.APIVersion == v1alpha1.GroupVersion.String() {
					keys = append(keys, bindingRef{bindingKindArchitecture, ow.Name}.String())
				}
			}
		}
		var out []reconcile.Request
		for _, k := range keys {
			var list v1alpha1.LavaArchitectureList
			if err := r.c.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{IndexBindingRef: k}); err != nil {
				r.log.Error("watcher: list binding users", slog.String("source", o.GetNamespace()+"/"+k), slog.Any("error", err))
				continue
			}
			for _, a := range list.Items {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&a)})
			}
		}
		return out
	}
}

// bindingsHeld reports whether obj's DependenciesReady is False because a bindingsFrom source
// was missing (so finding them all again folds DependenciesSatisfied).
func (r *reconciler) bindingsHeld(obj *v1alpha1.LavaArchitecture) bool {
	st, ok := r.core.Status(client.ObjectKeyFromObject(obj), obj.UID)
	if !ok {
		st = obj.Status
	}
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDependenciesReady)
	return c != nil && c.Reason == v1alpha1.ReasonBindingSourceNotFound
}

// logMissing logs a missing bindingsFrom source (names only).
func (r *reconciler) logMissing(obj *v1alpha1.LavaArchitecture, missing string) {
	r.log.Info("watcher: held: "+missing, logattr.Resource(obj.Namespace, obj.Name))
}
