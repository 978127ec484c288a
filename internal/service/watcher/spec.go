package watcher

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
)

// minDriftInterval is the floor of spec.driftInterval (the CRD's CEL rule enforces it too).
const minDriftInterval = 30 * time.Second

// SpecMirror converts a LavaArchitecture spec into its typed proto mirror, with defaults
// applied: engine embedded, driftInterval 5m floored at 30s, deletionPolicy Destroy,
// approvePlan auto. Binding values are copied as they are; bindingsFrom carries only the
// references (synth reads the values), so no Secret value enters an event.
func SpecMirror(s v1alpha1.LavaArchitectureSpec) *lavav1.ArchitectureSpec {
	out := &lavav1.ArchitectureSpec{
		Source:               sourceMirror(s.Source),
		Gate:                 s.Gate,
		Engine:               pipeline.EngineProto(s.Engine),
		Suspend:              s.Suspend,
		DeletionPolicy:       DeletionPolicyProto(s.DeletionPolicy),
		ApprovePlan:          s.ApprovePlan,
		DriftInterval:        durationpb.New(driftInterval(s)),
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

func driftInterval(s v1alpha1.LavaArchitectureSpec) time.Duration {
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

// PhaseProto maps a status phase to the proto enum: "PHASE_" and the upper-case name; the empty
// phase (a status nothing was folded into yet) and unknown values are PHASE_UNSPECIFIED.
func PhaseProto(p v1alpha1.Phase) lavav1.Phase {
	if p == "" {
		return lavav1.Phase_PHASE_UNSPECIFIED
	}
	return lavav1.Phase(lavav1.Phase_value["PHASE_"+strings.ToUpper(string(p))])
}

// withDefaults fills the unset actions of r with the default policy's.
func withDefaults(r v1alpha1.DriftRemediation) v1alpha1.DriftRemediation {
	d := v1alpha1.DefaultDriftRemediation()
	if r.Cosmetic == "" {
		r.Cosmetic = d.Cosmetic
	}
	if r.Functional == "" {
		r.Functional = d.Functional
	}
	if r.Critical == "" {
		r.Critical = d.Critical
	}
	return r
}

// EffectivePolicy resolves the remediation policy of a LavaArchitecture: spec.remediation
// (origin INLINE), else the referenced RemediationPolicy ref (origin REFERENCE, with its name
// and resourceVersion; ref must be the object spec.remediationPolicyRef names), else the
// default policy Alert / AutoCorrect / RequireApproval (origin DEFAULT). Unset actions take
// the default's. It fails when an escalation tier's waitBeforeNext does not parse.
func EffectivePolicy(spec v1alpha1.LavaArchitectureSpec, ref *v1alpha1.RemediationPolicy) (*lavav1.RemediationPolicy, error) {
	var (
		r   v1alpha1.DriftRemediation
		out = &lavav1.RemediationPolicy{}
	)
	switch {
	case spec.Remediation != nil:
		r = *spec.Remediation
		out.Origin = lavav1.PolicyOrigin_POLICY_ORIGIN_INLINE
	case spec.RemediationPolicyRef != nil && ref != nil:
		r = ref.Spec.DriftRemediation
		out.Origin = lavav1.PolicyOrigin_POLICY_ORIGIN_REFERENCE
		out.PolicyName = ref.Name
		out.PolicyResourceVersion = ref.ResourceVersion
		if ref.Spec.Escalation != nil {
			for i, tier := range ref.Spec.Escalation.Tiers {
				wait, err := tier.WaitDuration()
				if err != nil {
					return nil, fmt.Errorf("watcher: remediation policy %s: escalation tier %d: %w", ref.Name, i, err)
				}
				out.EscalationTiers = append(out.EscalationTiers, &lavav1.EscalationTier{
					Team: tier.Team, WaitBeforeNext: durationpb.New(wait),
				})
			}
		}
	default:
		out.Origin = lavav1.PolicyOrigin_POLICY_ORIGIN_DEFAULT
	}
	r = withDefaults(r)
	out.Cosmetic, out.Functional, out.Critical = pipeline.ActionProto(r.Cosmetic), pipeline.ActionProto(r.Functional), pipeline.ActionProto(r.Critical)
	return out, nil
}
