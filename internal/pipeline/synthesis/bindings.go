package synthesis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/lang/render"
	"github.com/lava-operator/lava/internal/pipeline"
)

// input builds the synthesis input of spec in namespace ns: the source, the bindings gathered from
// bindingsFrom (in order, later entries override earlier ones) and spec.bindings (which
// override them all), the list and record bindings, the gate, and which keys hold Secret
// values. secrets are those values (for redaction). A failure is the outcome to publish; err
// is transient (nak).
func (r Renderer) input(ctx context.Context, spec *lavav1.ArchitectureSpec, ns string) (in render.Input, secrets []string, fail *pipeline.Failure, err error) {
	in = render.Input{Gate: spec.GetGate(), BindingsKey: r.BindingsKey}
	if fail := r.source(ctx, spec.GetSource(), ns, &in); fail != nil {
		return in, nil, fail, nil
	}
	b, failSecrets, fail, err := r.bindingsFrom(ctx, spec, ns)
	if fail != nil || err != nil {
		return in, failSecrets, fail, err
	}
	b.set(spec.GetBindings(), false)
	in.Bindings = BindingsOf(b.scalars, spec.GetListBindings(), spec.GetRecordBindings())
	for k, sec := range b.fromSecret {
		if sec {
			in.SecretKeys = append(in.SecretKeys, k)
		}
	}
	slices.Sort(in.SecretKeys)
	return in, b.secretValues(), nil, nil
}

// source sets the source of in from spec.source: inline text, a bundled name, or the file of
// a Flux artifact (read through Config.Artifacts). A failure is the outcome to publish.
func (r Renderer) source(ctx context.Context, source *lavav1.Source, ns string, in *render.Input) *pipeline.Failure {
	switch src := source.GetKind().(type) {
	case *lavav1.Source_Inline:
		in.SourceKind, in.SourceText, in.File = render.SourceInline, []byte(src.Inline), "inline"
	case *lavav1.Source_Name:
		in.SourceKind, in.SourceName = render.SourceName, src.Name
	case *lavav1.Source_Flux:
		text, f := r.fluxSource(ctx, src.Flux, ns)
		if f != nil {
			return f
		}
		in.SourceKind, in.SourceText, in.SourceName = render.SourceFile, text, src.Flux.GetPath()
		in.File = src.Flux.GetPath()
	default:
		return &pipeline.Failure{Reason: v1alpha1.ReasonSourceUnsupported, Message: "spec.source: no source set"}
	}
	return nil
}

// bindingSet gathers the scalar bindings of one input.
type bindingSet struct {
	scalars map[string]string
	// fromSecret is true for the keys whose value came from a Secret.
	fromSecret map[string]bool
}

// set binds every key of values, overriding earlier bindings; secret says whether they came
// from a Secret.
func (b *bindingSet) set(values map[string]string, secret bool) {
	for k, v := range values {
		b.scalars[k], b.fromSecret[k] = v, secret
	}
}

// secretValues returns the values to redact: those of the keys bound from a Secret (or a
// producer's outputs Secret), one per key, long enough for plain replacement not to mangle
// unrelated text. Only they can reach the rendering: a Secret's keys that secretRef.key leaves
// out, and a Secret's value that a later entry or spec.bindings overrides, are never bound, so
// they are not redacted (a Secret of 30,000 keys bound for one key made every message
// redacted of 30,000 values).
func (b *bindingSet) secretValues() []string {
	var out []string
	for k, secret := range b.fromSecret {
		if v := b.scalars[k]; secret && len(v) >= minRedactBytes {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// bindingsFrom reads the entries of spec.bindingsFrom in order (a later entry overrides an
// earlier one), as the identity of spec.serviceAccountName when Config.Identities is set.
// With a failure or err, failSecrets are the secret values to redact from the failure.
func (r Renderer) bindingsFrom(ctx context.Context, spec *lavav1.ArchitectureSpec, ns string) (b *bindingSet, failSecrets []string, fail *pipeline.Failure, err error) {
	b = &bindingSet{scalars: map[string]string{}, fromSecret: map[string]bool{}}
	reader, who := r.Kube, r.who()
	if len(spec.GetBindingsFrom()) > 0 && r.Identities != nil {
		c, w, ierr := r.Identities.For(ns, spec.GetServiceAccountName())
		if ierr != nil {
			return b, nil, &pipeline.Failure{Reason: v1alpha1.ReasonServiceAccountRequired, Message: "spec.bindingsFrom: " + ierr.Error()}, nil
		}
		reader, who = c, w
	}
	for i, ref := range spec.GetBindingsFrom() {
		var (
			obj    client.Object
			kind   string
			key    string
			secret bool
		)
		switch r := ref.GetRef().(type) {
		case *lavav1.BindingsFromRef_ConfigMapRef:
			obj, kind, key = &corev1.ConfigMap{}, "ConfigMap", r.ConfigMapRef.GetKey()
			obj.SetName(r.ConfigMapRef.GetName())
		case *lavav1.BindingsFromRef_SecretRef:
			obj, kind, key, secret = &corev1.Secret{}, "Secret", r.SecretRef.GetKey(), true
			obj.SetName(r.SecretRef.GetName())
		case *lavav1.BindingsFromRef_OutputsRef:
			if reader == nil {
				return b, nil, &pipeline.Failure{Reason: v1alpha1.ReasonSynthesisFailed,
					Message: fmt.Sprintf("spec.bindingsFrom[%d]: %s has no Kubernetes access to read LavaArchitecture %q", i, who, r.OutputsRef.GetName())}, nil
			}
			plain, sensitive, fail, err := producerOutputs(ctx, reader, who, ns, i, r.OutputsRef)
			if fail != nil || err != nil {
				return b, nil, fail, err
			}
			b.set(plain, false)
			b.set(sensitive, true)
			continue
		default:
			return b, nil, &pipeline.Failure{Reason: v1alpha1.ReasonSynthesisFailed, Message: fmt.Sprintf("spec.bindingsFrom[%d]: none of configMapRef, secretRef, outputsRef", i)}, nil
		}
		values, fail, err := objectValues(ctx, reader, who, ns, i, obj, kind)
		if fail != nil || err != nil {
			return b, nil, fail, err
		}
		if key != "" {
			v, ok := values[key]
			if !ok {
				return b, b.secretValues(), &pipeline.Failure{Reason: v1alpha1.ReasonSynthesisFailed, Kind: pipeline.FailureRetryable,
					Message: fmt.Sprintf("spec.bindingsFrom[%d]: %s %q has no key %q", i, kind, obj.GetName(), key)}, nil
			}
			values = map[string]string{key: v}
		}
		b.set(values, secret)
	}
	if err := engine.CheckSecretBytes(b.secretValues()); err != nil {
		// Retryable: a smaller Secret fixes it without a new generation.
		return b, nil, &pipeline.Failure{Reason: v1alpha1.ReasonSynthesisFailed, Kind: pipeline.FailureRetryable, Message: "spec.bindingsFrom: " + err.Error()}, nil
	}
	return b, nil, nil, nil
}

// objectValues gets obj (a ConfigMap or a Secret of kind kind, named, entry i of
// spec.bindingsFrom) from namespace ns through reader and returns its data (a ConfigMap's
// binary data as text). A missing object, a missing reader and an RBAC refusal (who names
// the reader) are failures; any other API error is err.
func objectValues(ctx context.Context, reader client.Reader, who, ns string, i int, obj client.Object, kind string) (map[string]string, *pipeline.Failure, error) {
	name := obj.GetName()
	if reader == nil {
		return nil, &pipeline.Failure{Reason: v1alpha1.ReasonSynthesisFailed,
			Message: fmt.Sprintf("spec.bindingsFrom[%d]: %s has no Kubernetes access to read %s %q", i, who, kind, name)}, nil
	}
	if gerr := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); gerr != nil {
		switch {
		case apierrors.IsNotFound(gerr):
			return nil, &pipeline.Failure{Reason: v1alpha1.ReasonSynthesisFailed, Kind: pipeline.FailureRetryable,
				Message: fmt.Sprintf("spec.bindingsFrom[%d]: %s %q not found in namespace %q", i, kind, name, ns)}, nil
		case apierrors.IsForbidden(gerr):
			return nil, &pipeline.Failure{Reason: v1alpha1.ReasonRBACForbidden, Kind: pipeline.FailureRetryable,
				Message: fmt.Sprintf("spec.bindingsFrom[%d]: %s may not get %s %q in namespace %q (Kubernetes RBAC: grant it get on that object)", i, who, kind, name, ns)}, nil
		}
		return nil, nil, fmt.Errorf("synth: get %s %s/%s: %w", kind, ns, name, gerr)
	}
	var values map[string]string
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		values = map[string]string{}
		for k, v := range o.Data {
			values[k] = v
		}
		for k, v := range o.BinaryData {
			values[k] = string(v)
		}
	case *corev1.Secret:
		values = map[string]string{}
		for k, v := range o.Data {
			values[k] = string(v)
		}
	}
	return values, nil, nil
}

// fluxSource reads spec.path from the artifact the watcher resolved for spec.sourceRef
// (Config.Artifacts fetches, verifies and caches it). The failure names the source.
func (r Renderer) fluxSource(ctx context.Context, src *lavav1.FluxSource, ns string) ([]byte, *pipeline.Failure) {
	srcNS := src.GetNamespace()
	if srcNS == "" {
		srcNS = ns
	}
	name := src.GetKind() + " " + srcNS + "/" + src.GetName()
	switch {
	case src.GetArtifact().GetUrl() == "":
		return nil, &pipeline.Failure{Reason: v1alpha1.ReasonSourceNotReady,
			Message: "spec.sourceRef: no artifact of " + name + " was resolved (the watcher resolves Flux sources; lava up -f has no cluster to read them from)"}
	case r.Artifacts == nil:
		return nil, &pipeline.Failure{Reason: v1alpha1.ReasonSourceFetchFailed, Message: "spec.sourceRef: this synth has no artifact cache configured"}
	}
	b, err := r.Artifacts.File(ctx, src.GetArtifact(), src.GetPath())
	if err != nil {
		var ae *ArtifactError
		kind := pipeline.FailureTerminal
		if errors.As(err, &ae) && ae.Retryable {
			kind = pipeline.FailureRetryable
		}
		return nil, &pipeline.Failure{Kind: kind, Reason: v1alpha1.ReasonSourceFetchFailed, Err: err,
			Message: fmt.Sprintf("spec.sourceRef %s revision %s: %v", name, src.GetArtifact().GetRevision(), err)}
	}
	return b, nil
}

// producerOutputs reads the outputs of the LavaArchitecture ref names in namespace ns (entry i
// of spec.bindingsFrom) as bindings: plain from its status.outputs (a JSON string is bound as
// its text, any other JSON value as its JSON text), sensitive from its outputs Secret
// (status.outputsSecret; its values as stored). With ref.key only that output is bound, and
// its absence is a failure. who names the reader in RBAC failures.
func producerOutputs(ctx context.Context, reader client.Reader, who, ns string, i int, ref *lavav1.ObjectKeyRef) (plain, sensitive map[string]string, fail *pipeline.Failure, err error) {
	name := ref.GetName()
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("LavaArchitecture"))
	if gerr := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); gerr != nil {
		switch {
		case apierrors.IsNotFound(gerr):
			return nil, nil, &pipeline.Failure{Reason: v1alpha1.ReasonBindingSourceNotFound, Kind: pipeline.FailureWaiting,
				Message: fmt.Sprintf("spec.bindingsFrom[%d]: LavaArchitecture %q not found in namespace %q", i, name, ns)}, nil
		case apierrors.IsForbidden(gerr):
			return nil, nil, &pipeline.Failure{Reason: v1alpha1.ReasonRBACForbidden, Kind: pipeline.FailureRetryable,
				Message: fmt.Sprintf("spec.bindingsFrom[%d]: %s may not get LavaArchitecture %q in namespace %q (Kubernetes RBAC: grant it get on that object)", i, who, name, ns)}, nil
		}
		return nil, nil, nil, fmt.Errorf("synth: get LavaArchitecture %s/%s: %w", ns, name, gerr)
	}
	plain, sensitive = map[string]string{}, map[string]string{}
	outs, _, _ := unstructured.NestedMap(p.Object, "status", "outputs")
	for k, v := range outs {
		if s, ok := v.(string); ok {
			plain[k] = s
			continue
		}
		b, jerr := json.Marshal(v)
		if jerr != nil {
			return nil, nil, &pipeline.Failure{Reason: v1alpha1.ReasonSynthesisFailed,
				Message: fmt.Sprintf("spec.bindingsFrom[%d]: LavaArchitecture %q output %q: %v", i, name, k, jerr)}, nil
		}
		plain[k] = string(b)
	}
	if sname, _, _ := unstructured.NestedString(p.Object, "status", "outputsSecret"); sname != "" {
		sec := &corev1.Secret{}
		if gerr := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: sname}, sec); gerr != nil {
			switch {
			case apierrors.IsNotFound(gerr):
				return nil, nil, &pipeline.Failure{Reason: v1alpha1.ReasonBindingSourceNotFound, Kind: pipeline.FailureWaiting,
					Message: fmt.Sprintf("spec.bindingsFrom[%d]: outputs Secret %q of LavaArchitecture %q not found", i, sname, name)}, nil
			case apierrors.IsForbidden(gerr):
				return nil, nil, &pipeline.Failure{Reason: v1alpha1.ReasonRBACForbidden, Kind: pipeline.FailureRetryable,
					Message: fmt.Sprintf("spec.bindingsFrom[%d]: %s may not get Secret %q in namespace %q (Kubernetes RBAC: grant it get on that object)", i, who, sname, ns)}, nil
			}
			return nil, nil, nil, fmt.Errorf("synth: get Secret %s/%s: %w", ns, sname, gerr)
		}
		for k, v := range sec.Data {
			sensitive[k] = string(v)
			delete(plain, k)
		}
	}
	if key := ref.GetKey(); key != "" {
		v, ok := plain[key]
		sv, sok := sensitive[key]
		switch {
		case sok:
			return map[string]string{}, map[string]string{key: sv}, nil, nil
		case ok:
			return map[string]string{key: v}, map[string]string{}, nil, nil
		}
		return nil, nil, &pipeline.Failure{Reason: v1alpha1.ReasonSynthesisFailed, Kind: pipeline.FailureRetryable,
			Message: fmt.Sprintf("spec.bindingsFrom[%d]: LavaArchitecture %q has no output %q", i, name, key)}, nil
	}
	return plain, sensitive, nil, nil
}
