package pipeline_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
)

func TestSpecMirror(t *testing.T) {
	tests := []struct {
		name string
		spec v1alpha1.LavaArchitectureSpec
		want *lavav1.ArchitectureSpec
	}{{
		name: "defaults",
		spec: v1alpha1.LavaArchitectureSpec{Source: v1alpha1.Source{Name: "aws-vpc-network"}},
		want: &lavav1.ArchitectureSpec{
			Source: &lavav1.Source{Kind: &lavav1.Source_Name{Name: "aws-vpc-network"}}, Engine: lavav1.Engine_ENGINE_EMBEDDED,
			DriftInterval: durationpb.New(5 * time.Minute), DeletionPolicy: lavav1.DeletionPolicy_DELETION_POLICY_DESTROY, ApprovePlan: "auto",
		},
	}, {
		name: "everything set, drift interval floored",
		spec: v1alpha1.LavaArchitectureSpec{
			SourceRef:      &v1alpha1.SourceReference{Kind: v1alpha1.SourceRefGitRepository, Name: "infra", Namespace: "flux-system"},
			Path:           "a.tlisp",
			Bindings:       map[string]string{"a": "1"},
			ListBindings:   map[string][]string{"l": {"x", "y"}},
			RecordBindings: map[string][]map[string]string{"r": {{"k": "v"}}},
			BindingsFrom: []v1alpha1.BindingsSource{{ConfigMapRef: &v1alpha1.ObjectKeyReference{Name: "cm"}},
				{SecretRef: &v1alpha1.ObjectKeyReference{Name: "s", Key: "k"}}},
			Gate: "g", Engine: v1alpha1.EngineTofu, DriftInterval: &metav1.Duration{Duration: time.Second}, Suspend: true,
			DeletionPolicy: v1alpha1.DeletionPolicyOrphan, ApprovePlan: "manual",
			RemediationPolicyRef: &v1alpha1.LocalObjectReference{Name: "p"},
			ServiceAccountName:   "tenant",
			ProviderEnvFrom: []v1alpha1.ProviderEnvSource{{SecretRef: v1alpha1.ObjectKeyReference{Name: "env"}},
				{SecretRef: v1alpha1.ObjectKeyReference{Name: "env2", Key: "K"}}},
		},
		want: &lavav1.ArchitectureSpec{
			Source: &lavav1.Source{Kind: &lavav1.Source_Flux{Flux: &lavav1.FluxSource{
				Kind: "GitRepository", Namespace: "flux-system", Name: "infra", Path: "a.tlisp"}}},
			Bindings:       map[string]string{"a": "1"},
			ListBindings:   map[string]*lavav1.StringList{"l": {Values: []string{"x", "y"}}},
			RecordBindings: map[string]*lavav1.RecordList{"r": {Records: []*lavav1.Record{{Fields: map[string]string{"k": "v"}}}}},
			BindingsFrom: []*lavav1.BindingsFromRef{
				{Ref: &lavav1.BindingsFromRef_ConfigMapRef{ConfigMapRef: &lavav1.ObjectKeyRef{Name: "cm"}}},
				{Ref: &lavav1.BindingsFromRef_SecretRef{SecretRef: &lavav1.ObjectKeyRef{Name: "s", Key: "k"}}},
			},
			Gate: "g", Engine: lavav1.Engine_ENGINE_TOFU, DriftInterval: durationpb.New(30 * time.Second), Suspend: true,
			DeletionPolicy: lavav1.DeletionPolicy_DELETION_POLICY_ORPHAN, ApprovePlan: "manual", RemediationPolicyRef: "p",
			ServiceAccountName: "tenant", ProviderEnvFrom: []*lavav1.ObjectKeyRef{{Name: "env"}, {Name: "env2", Key: "K"}},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, pipeline.SpecMirror(tt.spec), protocmp.Transform()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
