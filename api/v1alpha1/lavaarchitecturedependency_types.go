package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DependencyKind says whether a [LavaArchitectureDependency] gates its dependent.
// +kubebuilder:validation:Enum=BlocksOn;Influences
type DependencyKind string

// The dependency kinds.
const (
	// DependencyBlocksOn holds the dependent back until the dependency reaches requirePhase
	// (default).
	DependencyBlocksOn DependencyKind = "BlocksOn"
	// DependencyInfluences never gates; an unsatisfied edge is only reported.
	DependencyInfluences DependencyKind = "Influences"
)

// LavaArchitectureDependency is an edge between two LavaArchitectures: from (the dependent)
// waits for to (the dependency) to reach requirePhase (docs/dialect.md section 5.2). It is the
// standalone form of spec.dependsOn, for edges owned by someone other than the dependent.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=lavadep
// +kubebuilder:printcolumn:name="From",type=string,JSONPath=`.spec.from.name`
// +kubebuilder:printcolumn:name="To",type=string,JSONPath=`.spec.to.name`
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.kind`
// +kubebuilder:printcolumn:name="Require",type=string,JSONPath=`.spec.requirePhase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LavaArchitectureDependency struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the edge.
	// +required
	Spec LavaArchitectureDependencySpec `json:"spec"`
}

// LavaArchitectureDependencySpec is one dependency edge. (In CEL, `namespace` is a reserved
// word: the field is spelled __namespace__.)
//
// +kubebuilder:validation:XValidation:rule="!(self.from.name == self.to.name && has(self.from.__namespace__) == has(self.to.__namespace__) && (!has(self.from.__namespace__) || self.from.__namespace__ == self.to.__namespace__) && has(self.from.cluster) == has(self.to.cluster) && (!has(self.from.cluster) || self.from.cluster == self.to.cluster))",message="spec.from and spec.to must name different LavaArchitectures",fieldPath=".to"
type LavaArchitectureDependencySpec struct {
	// from is the dependent: the LavaArchitecture held back.
	// +required
	From ArchitectureReference `json:"from"`

	// to is the dependency: the LavaArchitecture that must reach requirePhase.
	// +required
	To ArchitectureReference `json:"to"`

	// kind is BlocksOn (default: gates) or Influences (reported only).
	// +optional
	// +kubebuilder:default=BlocksOn
	Kind DependencyKind `json:"kind,omitempty"`

	// requirePhase is the phase to must reach: Synthesized, Planned or Applied (default).
	// +optional
	// +kubebuilder:default=Applied
	// +kubebuilder:validation:Enum=Synthesized;Planned;Applied
	RequirePhase Phase `json:"requirePhase,omitempty"`
}

// ArchitectureReference names a LavaArchitecture, upstream's {cluster, namespace, name}.
type ArchitectureReference struct {
	// cluster is the cluster the LavaArchitecture lives in; empty means this one.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster,omitempty"`

	// namespace of the LavaArchitecture; empty means the edge object's namespace.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// name of the LavaArchitecture.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// LavaArchitectureDependencyList is a list of [LavaArchitectureDependency].
//
// +kubebuilder:object:root=true
type LavaArchitectureDependencyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LavaArchitectureDependency `json:"items"`
}
