package embedded

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// builtinClient is Terraform's built-in provider ("terraform.io/builtin/terraform") with its
// one managed resource, terraform_data, served in process.
type builtinClient struct{}

// terraformDataSchema is the schema of terraform_data (as Terraform defines it), built once:
// schemas are not changed once built, and one instance keeps its decoded-state cache
// ([Schema.DecodeState]) across operations.
var terraformDataSchema = sync.OnceValue(func() *Schema {
	return &Schema{Block: &Block{
		Attributes: map[string]*Attribute{
			"id":               {Type: cty.String, Computed: true},
			"input":            {Type: cty.DynamicPseudoType, Optional: true},
			"output":           {Type: cty.DynamicPseudoType, Computed: true},
			"triggers_replace": {Type: cty.DynamicPseudoType, Optional: true},
		},
		BlockTypes: map[string]*NestedBlock{},
	}}
})

// builtinSchema is the built-in provider's schema, built once.
var builtinSchema = sync.OnceValue(func() *ProviderSchema {
	return &ProviderSchema{
		Provider:    &Schema{Block: &Block{Attributes: map[string]*Attribute{}, BlockTypes: map[string]*NestedBlock{}}},
		Resources:   map[string]*Schema{"terraform_data": terraformDataSchema()},
		DataSources: map[string]*Schema{},
	}
})

func (builtinClient) ProtocolVersion() int { return 6 }

func (builtinClient) Schema(context.Context) (*ProviderSchema, error) {
	return builtinSchema(), nil
}

func (builtinClient) ValidateProviderConfig(_ context.Context, c cty.Value) (cty.Value, error) {
	return c, nil
}
func (builtinClient) Configure(context.Context, cty.Value) error { return nil }
func (builtinClient) Stop(context.Context) error                 { return nil }

func (builtinClient) ValidateResourceConfig(_ context.Context, typeName string, _ cty.Value) error {
	if typeName != "terraform_data" {
		return fmt.Errorf("resource type %q: %w", typeName, ErrUnknownType)
	}
	return nil
}

func (builtinClient) ValidateDataResourceConfig(_ context.Context, typeName string, _ cty.Value) error {
	return fmt.Errorf("data source type %q: %w", typeName, ErrUnknownType)
}

func (builtinClient) UpgradeResourceState(_ context.Context, _ string, _ int64, raw []byte) (cty.Value, error) {
	v, err := ctyjson.Unmarshal(raw, terraformDataSchema().Type())
	if err != nil {
		return cty.NilVal, fmt.Errorf("upgradeResourceState: terraform_data: %w", err)
	}
	return v, nil
}

func (builtinClient) ReadResource(_ context.Context, _ string, state cty.Value, private []byte) (cty.Value, []byte, error) {
	return state, private, nil
}

func (builtinClient) PlanResourceChange(_ context.Context, _ string, prior, proposed, _ cty.Value, _ []byte) (PlanResult, error) {
	if proposed.IsNull() {
		return PlanResult{Planned: proposed}, nil
	}
	planned := proposed.AsValueMap()
	input := proposed.GetAttr("input")
	trigger := proposed.GetAttr("triggers_replace")
	unknownOutput := func() cty.Value {
		if input.IsNull() {
			return input
		}
		return cty.UnknownVal(input.Type())
	}
	var out PlanResult
	switch {
	case prior.IsNull():
		planned["id"] = cty.UnknownVal(cty.String).RefineNotNull()
		planned["output"] = unknownOutput()
	case !prior.GetAttr("triggers_replace").RawEquals(trigger):
		out.RequiresReplace = []cty.Path{cty.GetAttrPath("triggers_replace")}
		planned["id"] = cty.UnknownVal(cty.String).RefineNotNull()
		planned["output"] = unknownOutput()
	case !prior.GetAttr("input").RawEquals(input):
		planned["output"] = unknownOutput()
	}
	out.Planned = cty.ObjectVal(planned)
	return out, nil
}

func (builtinClient) ApplyResourceChange(_ context.Context, _ string, _, planned, _ cty.Value, _ []byte) (cty.Value, []byte, error) {
	if planned.IsNull() {
		return planned, nil, nil
	}
	st := planned.AsValueMap()
	if !planned.GetAttr("output").IsKnown() {
		st["output"] = planned.GetAttr("input")
	}
	if !planned.GetAttr("id").IsKnown() {
		st["id"] = cty.StringVal(uuid.NewString())
	}
	return cty.ObjectVal(st), nil, nil
}

func (builtinClient) ReadDataSource(_ context.Context, typeName string, _ cty.Value) (cty.Value, error) {
	return cty.NilVal, fmt.Errorf("data source type %q: %w", typeName, ErrUnknownType)
}

// ImportResourceState imports a terraform_data object by id, as Terraform's built-in provider
// does: the id is set, everything else is null.
func (b builtinClient) ImportResourceState(ctx context.Context, typeName, id string) (cty.Value, []byte, error) {
	ps, _ := b.Schema(ctx)
	s, ok := ps.Resources[typeName]
	if !ok {
		return cty.NilVal, nil, fmt.Errorf("the built-in provider has no resource type %s", typeName)
	}
	vals := map[string]cty.Value{}
	for name, a := range s.Block.Attributes {
		vals[name] = cty.NullVal(a.ImpliedType())
	}
	vals["id"] = cty.StringVal(id)
	return cty.ObjectVal(vals), nil, nil
}

// IdentitySchema: terraform_data has no resource identity.
func (builtinClient) IdentitySchema(context.Context, string) (*IdentitySchema, error) {
	return nil, nil
}

// ImportResourceIdentity fails: terraform_data has no resource identity.
func (builtinClient) ImportResourceIdentity(_ context.Context, typeName string, _ cty.Value) (cty.Value, []byte, error) {
	return cty.NilVal, nil, fmt.Errorf("the built-in provider's %s has no resource identity", typeName)
}

// ReadResourceIdentity is ReadResource: terraform_data has no resource identity.
func (b builtinClient) ReadResourceIdentity(ctx context.Context, typeName string, state cty.Value, private []byte, _ cty.Value) (cty.Value, []byte, error) {
	return b.ReadResource(ctx, typeName, state, private)
}
