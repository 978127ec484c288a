// Package v1alpha1 holds the Go types of Lava's custom resources in the API group
// lava.pleme.io/v1alpha1: [LavaArchitecture] (the user's infrastructure, upstream-compatible
// spec plus Lava's additive fields), [RemediationPolicy] (what to do about drift, per severity)
// and [LavaArchitectureDependency] (an edge that holds one LavaArchitecture back until another
// reaches a phase).
//
// The kubebuilder markers on these types are the source of truth for the CustomResourceDefinitions:
// `make generate` runs controller-gen, which writes zz_generated.deepcopy.go here and the CRDs
// into config/crd/bases (embedded by package config/crd and printed by `lava crds`). Admission
// rules that the OpenAPI schema cannot express are CEL rules (x-kubernetes-validations) whose
// messages name the offending field.
//
// Condition types and reasons are documented constants in condition_types.go. The phase a
// LavaArchitecture is in is [Phase]; the one transition table between phases lives in
// internal/pipeline, which is the only code that should compute a new [LavaArchitectureStatus].
//
// +kubebuilder:object:generate=true
// +groupName=lava.pleme.io
package v1alpha1
