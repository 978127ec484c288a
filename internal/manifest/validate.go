package manifest

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/config/crd"
)

// FieldError is one rule of the LavaArchitecture CRD (or of object metadata) that a manifest
// breaks.
type FieldError struct {
	// Path is the offending field as the API server names it: "metadata.name", "spec.engine",
	// "spec.bindingsFrom[1]".
	Path string
	// Message says what is wrong (it starts with Path).
	Message string
}

// crdSchema is the LavaArchitecture CRD's v1alpha1 schema as the API server builds it from the
// CRD: structural, with the openAPIV3Schema's validator and the CEL rules compiled.
type crdSchema struct {
	structural *structuralschema.Structural
	validator  apiextensionsvalidation.SchemaValidator
	cel        *cel.Validator
}

// schema builds the embedded CRD's schema once; the error is a CRD that does not convert,
// which a test of this package rules out for the committed one.
var schema = sync.OnceValues(func() (*crdSchema, error) {
	var def apiextensionsv1.CustomResourceDefinition
	if err := sigsyaml.Unmarshal(crd.LavaArchitecture(), &def); err != nil {
		return nil, fmt.Errorf("manifest: LavaArchitecture CRD: %w", err)
	}
	for _, v := range def.Spec.Versions {
		if v.Name != v1alpha1.GroupVersion.Version || v.Schema == nil {
			continue
		}
		internal := &apiextensions.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, internal, nil); err != nil {
			return nil, fmt.Errorf("manifest: LavaArchitecture CRD schema: %w", err)
		}
		ss, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("manifest: LavaArchitecture CRD schema: %w", err)
		}
		validator, _, err := apiextensionsvalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("manifest: LavaArchitecture CRD schema: %w", err)
		}
		return &crdSchema{structural: ss, validator: validator, cel: cel.NewValidator(ss, true, celconfig.PerCallLimit)}, nil
	}
	return nil, fmt.Errorf("manifest: LavaArchitecture CRD has no %s schema", v1alpha1.GroupVersion.Version)
})

// Validate checks a LavaArchitecture as the API server does when it is created: obj's metadata
// (ValidateObjectMeta: name a DNS-1123 subdomain, namespace a DNS-1123 label, labels,
// annotations; a name is required, generateName does not stand in for it), then content (obj as
// JSON values, integers as int64) against the CRD's openAPIV3Schema with its defaults applied
// (on a copy), its list-type invariants and, when none of those errors blocks them, its CEL
// rules. content's status is not validated (the status subresource ignores it on create) and
// its metadata.namespace is obj's. The result is nil when obj passes; otherwise the errors in
// the order the checks found them, each worded as wording.go says. An embedded CRD that does
// not build is one error without a path.
func Validate(obj *v1alpha1.LavaArchitecture, content map[string]any) []FieldError {
	s, err := schema()
	if err != nil {
		return []FieldError{{Message: err.Error()}}
	}
	meta := obj.ObjectMeta
	if meta.Name == "" {
		meta.GenerateName = "" // lava up names objects only by metadata.name
	}
	errs := apimachineryvalidation.ValidateObjectMeta(&meta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	var out []FieldError
	for _, e := range errs {
		out = append(out, fieldError(e, obj, false))
	}

	u := runtime.DeepCopyJSON(content)
	delete(u, "status")
	if m, ok := u["metadata"].(map[string]any); ok {
		m["namespace"] = obj.Namespace
	}
	structuraldefaulting.Default(u, s.structural)
	errs = apiextensionsvalidation.ValidateCustomResource(nil, u, s.validator)
	errs = append(errs, schemaobjectmeta.Validate(context.Background(), nil, u, s.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, s.structural, u)...)
	for _, e := range errs {
		out = append(out, fieldError(e, obj, false))
	}
	if s.cel == nil || blocking(errs) {
		return out
	}
	celErrs, _ := s.cel.Validate(context.Background(), nil, s.structural, u, nil, celconfig.RuntimeCELCostBudget)
	for _, e := range celErrs {
		out = append(out, fieldError(e, obj, true))
	}
	return out
}

// blocking reports whether errs hold an error after which the API server does not run the CEL
// rules (k8s.io/apiextensions-apiserver's customresource strategy, hasBlockingErr): an
// unsupported or missing value, a value too long, too many items or a wrong type.
func blocking(errs field.ErrorList) bool {
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}
