package pipeline

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// minDriftInterval is the floor of spec.driftInterval (the CRD's CEL rule enforces it too).
const minDriftInterval = 30 * time.Second

// SpecMirror converts a LavaArchitecture spec into its typed proto mirror (what the watcher
// publishes in ResourceObserved and `lava plan --speculative` sends), with defaults applied: engine embedded, driftInterval 5m floored at 30s, deletionPolicy Destroy,
// approvePlan auto. Binding values are copied as they are; bindingsFrom carries only the
// references (synth reads the values), so no Secret value enters an event.
func SpecMirror(s v1alpha1.LavaArchitectureSpec) *lavav1.ArchitectureSpec {
	out := &lavav1.ArchitectureSpec{
		Source:               sourceMirror(s.Source),
		Gate:                 s.Gate,
		Engine:               EngineProto(s.Engine),
		Suspend:              s.Suspend,
		DeletionPolicy:       DeletionPolicyProto(s.DeletionPolicy),
		ApprovePlan:          s.ApprovePlan,
		DriftInterval:        durationpb.New(DriftInterval(s)),
		Bindings:             map[string]string{},
		ListBindings:         map[string]*lavav1.StringList{},
		RecordBindings:       map[string]*lavav1.RecordList{},
		BindingsFrom:         nil,
		RemediationPolicyRef: "",
		ServiceAccountName:   s.ServiceAccountName,
	}
	if out.ApprovePlan == "" {
		out.ApprovePlan = v1alpha1.ApprovePlanAuto
	}
	if s.SourceRef != nil && s.Source.Kind() == "" {
		// The namespace is filled in by the caller that knows it (the reconciler resolves
		// the source; lava up's file source has none to resolve).
		out.Source = sourceRefMirror(s, "")
	}
	if s.RemediationPolicyRef != nil {
		out.RemediationPolicyRef = s.RemediationPolicyRef.Name
	}
	for k, v := range s.Bindings {
		out.Bindings[k] = v
	}
	for k, v := range s.ListBindings {
		out.ListBindings[k] = &lavav1.StringList{Values: append([]string(nil), v...)}
	}
	for k, rows := range s.RecordBindings {
		rl := &lavav1.RecordList{}
		for _, row := range rows {
			fields := make(map[string]string, len(row))
			for f, v := range row {
				fields[f] = v
			}
			rl.Records = append(rl.Records, &lavav1.Record{Fields: fields})
		}
		out.RecordBindings[k] = rl
	}
	for _, p := range s.ProviderEnvFrom {
		out.ProviderEnvFrom = append(out.ProviderEnvFrom, &lavav1.ObjectKeyRef{Name: p.SecretRef.Name, Key: p.SecretRef.Key})
	}
	for _, b := range s.BindingsFrom {
		switch {
		case b.ConfigMapRef != nil:
			out.BindingsFrom = append(out.BindingsFrom, &lavav1.BindingsFromRef{Ref: &lavav1.BindingsFromRef_ConfigMapRef{
				ConfigMapRef: &lavav1.ObjectKeyRef{Name: b.ConfigMapRef.Name, Key: b.ConfigMapRef.Key}}})
		case b.SecretRef != nil:
			out.BindingsFrom = append(out.BindingsFrom, &lavav1.BindingsFromRef{Ref: &lavav1.BindingsFromRef_SecretRef{
				SecretRef: &lavav1.ObjectKeyRef{Name: b.SecretRef.Name, Key: b.SecretRef.Key}}})
		case b.OutputsRef != nil:
			out.BindingsFrom = append(out.BindingsFrom, &lavav1.BindingsFromRef{Ref: &lavav1.BindingsFromRef_OutputsRef{
				OutputsRef: &lavav1.ObjectKeyRef{Name: b.OutputsRef.Name, Key: b.OutputsRef.Key}}})
		}
	}
	return out
}

func sourceMirror(s v1alpha1.Source) *lavav1.Source {
	switch s.Kind() {
	case v1alpha1.SourceKindInline:
		return &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: s.Inline}}
	case v1alpha1.SourceKindName:
		return &lavav1.Source{Kind: &lavav1.Source_Name{Name: s.Name}}
	}
	return &lavav1.Source{}
}

// sourceRefMirror is spec.sourceRef and spec.path without an artifact (the reconciler adds the
// one it read from the source's status).
func sourceRefMirror(s v1alpha1.LavaArchitectureSpec, namespace string) *lavav1.Source {
	ns := s.SourceRef.Namespace
	if ns == "" {
		ns = namespace
	}
	return &lavav1.Source{Kind: &lavav1.Source_Flux{Flux: &lavav1.FluxSource{Kind: s.SourceRef.Kind, Namespace: ns, Name: s.SourceRef.Name, Path: s.Path}}}
}

// DriftInterval is spec.driftInterval with its default (5m) and floor (30s).
func DriftInterval(s v1alpha1.LavaArchitectureSpec) time.Duration {
	d := 5 * time.Minute
	if s.DriftInterval != nil {
		d = s.DriftInterval.Duration
	}
	return max(d, minDriftInterval)
}

// DeletionPolicyProto maps spec.deletionPolicy to the proto enum; empty is the default, Destroy.
func DeletionPolicyProto(p v1alpha1.DeletionPolicy) lavav1.DeletionPolicy {
	if p == v1alpha1.DeletionPolicyOrphan {
		return lavav1.DeletionPolicy_DELETION_POLICY_ORPHAN
	}
	return lavav1.DeletionPolicy_DELETION_POLICY_DESTROY
}
