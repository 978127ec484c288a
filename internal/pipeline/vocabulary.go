package pipeline

import (
	"strings"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// EngineName is the CRD's name of an engine enum (api/v1alpha1: "embedded", "tofu",
// "terraform"); ENGINE_UNSPECIFIED is the CRD's default, "embedded".
func EngineName(e lavav1.Engine) string {
	switch e {
	case lavav1.Engine_ENGINE_TOFU:
		return string(v1alpha1.EngineTofu)
	case lavav1.Engine_ENGINE_TERRAFORM:
		return string(v1alpha1.EngineTerraform)
	}
	return string(v1alpha1.EngineEmbedded)
}

// EngineProto is the enum of an engine name as spec.engine spells it: empty is the CRD's
// default, ENGINE_EMBEDDED; a name the CRD does not define is ENGINE_UNSPECIFIED, which no
// service runs.
func EngineProto(name v1alpha1.Engine) lavav1.Engine {
	switch name {
	case "", v1alpha1.EngineEmbedded:
		return lavav1.Engine_ENGINE_EMBEDDED
	case v1alpha1.EngineTofu:
		return lavav1.Engine_ENGINE_TOFU
	case v1alpha1.EngineTerraform:
		return lavav1.Engine_ENGINE_TERRAFORM
	}
	return lavav1.Engine_ENGINE_UNSPECIFIED
}

// ChangeKind is the enum of an engine's planned or drifted action (CHANGE_KIND_UNSPECIFIED for
// an action the engine package does not define).
func ChangeKind(a engine.Action) lavav1.ChangeKind {
	switch a {
	case engine.ActionNoOp:
		return lavav1.ChangeKind_CHANGE_KIND_NO_OP
	case engine.ActionCreate:
		return lavav1.ChangeKind_CHANGE_KIND_CREATE
	case engine.ActionRead:
		return lavav1.ChangeKind_CHANGE_KIND_READ
	case engine.ActionUpdate:
		return lavav1.ChangeKind_CHANGE_KIND_UPDATE
	case engine.ActionReplace:
		return lavav1.ChangeKind_CHANGE_KIND_REPLACE
	case engine.ActionDelete:
		return lavav1.ChangeKind_CHANGE_KIND_DELETE
	}
	return lavav1.ChangeKind_CHANGE_KIND_UNSPECIFIED
}

// ChangeAction is the word status.plan.resources uses for a change kind ("create", "update",
// "delete", "replace", "read"); "" for a no-op or an unknown kind.
func ChangeAction(k lavav1.ChangeKind) string {
	switch k {
	case lavav1.ChangeKind_CHANGE_KIND_CREATE:
		return "create"
	case lavav1.ChangeKind_CHANGE_KIND_UPDATE:
		return "update"
	case lavav1.ChangeKind_CHANGE_KIND_DELETE:
		return "delete"
	case lavav1.ChangeKind_CHANGE_KIND_REPLACE:
		return "replace"
	case lavav1.ChangeKind_CHANGE_KIND_READ:
		return "read"
	}
	return ""
}

// SeverityProto is the enum of an engine's drift severity (SEVERITY_UNSPECIFIED for none or
// an unknown one).
func SeverityProto(s engine.Severity) lavav1.Severity {
	switch s {
	case engine.SeverityCosmetic:
		return lavav1.Severity_SEVERITY_COSMETIC
	case engine.SeverityFunctional:
		return lavav1.Severity_SEVERITY_FUNCTIONAL
	case engine.SeverityCritical:
		return lavav1.Severity_SEVERITY_CRITICAL
	}
	return lavav1.Severity_SEVERITY_UNSPECIFIED
}

// SeverityName is "cosmetic", "functional" or "critical", and none for SEVERITY_UNSPECIFIED
// or a value the enum does not define (callers pass the word their log or metric uses for a
// clean scan).
func SeverityName(s lavav1.Severity, none string) string {
	switch s {
	case lavav1.Severity_SEVERITY_COSMETIC, lavav1.Severity_SEVERITY_FUNCTIONAL, lavav1.Severity_SEVERITY_CRITICAL:
		return strings.ToLower(strings.TrimPrefix(s.String(), "SEVERITY_"))
	}
	return none
}
