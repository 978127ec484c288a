package embedded

import (
	"context"
	"fmt"
	"sync"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/lava-operator/lava/internal/engine/embedded/tfplugin6"
)

// client6 speaks protocol 6 (terraform-plugin-framework, terraform-plugin-go).
type client6 struct {
	rpc tfplugin6.ProviderClient

	mu     sync.Mutex
	schema *ProviderSchema
	ids    identitySchemas
}

// caps6 is what Lava tells providers it supports: neither deferrals nor write-only attributes.
func caps6() *tfplugin6.ClientCapabilities { return &tfplugin6.ClientCapabilities{} }

func (c *client6) ProtocolVersion() int { return 6 }

func (c *client6) Schema(ctx context.Context) (*ProviderSchema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.schema != nil {
		return c.schema, nil
	}
	resp, err := c.rpc.GetProviderSchema(ctx, &tfplugin6.GetProviderSchema_Request{})
	if err != nil {
		return nil, fmt.Errorf("getProviderSchema: %w", err)
	}
	if err := diagsErr("GetProviderSchema", diags6(resp.GetDiagnostics())); err != nil {
		return nil, err
	}
	ps := &ProviderSchema{Resources: map[string]*Schema{}, DataSources: map[string]*Schema{}}
	if ps.Provider, err = schema6(resp.GetProvider()); err != nil {
		return nil, fmt.Errorf("provider schema: %w", err)
	}
	for name, s := range resp.GetResourceSchemas() {
		if ps.Resources[name], err = schema6(s); err != nil {
			return nil, fmt.Errorf("schema of %s: %w", name, err)
		}
	}
	for name, s := range resp.GetDataSourceSchemas() {
		if ps.DataSources[name], err = schema6(s); err != nil {
			return nil, fmt.Errorf("schema of data source %s: %w", name, err)
		}
	}
	ps.PlanDestroy = resp.GetServerCapabilities().GetPlanDestroy()
	c.schema = ps
	return ps, nil
}

func (c *client6) ValidateProviderConfig(ctx context.Context, config cty.Value) (cty.Value, error) {
	ps, err := c.Schema(ctx)
	if err != nil {
		return cty.NilVal, err
	}
	dv, err := dyn6(config, ps.Provider.Type())
	if err != nil {
		return cty.NilVal, err
	}
	resp, err := c.rpc.ValidateProviderConfig(ctx, &tfplugin6.ValidateProviderConfig_Request{Config: dv})
	if err != nil {
		return cty.NilVal, fmt.Errorf("validateProviderConfig: %w", err)
	}
	return config, diagsErr("ValidateProviderConfig", diags6(resp.GetDiagnostics()))
}

func (c *client6) Configure(ctx context.Context, config cty.Value) error {
	ps, err := c.Schema(ctx)
	if err != nil {
		return err
	}
	dv, err := dyn6(config, ps.Provider.Type())
	if err != nil {
		return err
	}
	resp, err := c.rpc.ConfigureProvider(ctx, &tfplugin6.ConfigureProvider_Request{
		TerraformVersion: TerraformVersion, Config: dv, ClientCapabilities: caps6(),
	})
	if err != nil {
		return fmt.Errorf("configureProvider: %w", err)
	}
	return diagsErr("ConfigureProvider", diags6(resp.GetDiagnostics()))
}

func (c *client6) ValidateResourceConfig(ctx context.Context, typeName string, config cty.Value) error {
	s, err := c.resource(ctx, typeName)
	if err != nil {
		return err
	}
	dv, err := dyn6(config, s.Type())
	if err != nil {
		return err
	}
	resp, err := c.rpc.ValidateResourceConfig(ctx, &tfplugin6.ValidateResourceConfig_Request{TypeName: typeName, Config: dv, ClientCapabilities: caps6()})
	if err != nil {
		return fmt.Errorf("validateResourceConfig: %w", err)
	}
	return diagsErr("ValidateResourceConfig", diags6(resp.GetDiagnostics()))
}

func (c *client6) ValidateDataResourceConfig(ctx context.Context, typeName string, config cty.Value) error {
	ps, err := c.Schema(ctx)
	if err != nil {
		return err
	}
	s, err := dataSchema(ps, typeName)
	if err != nil {
		return err
	}
	dv, err := dyn6(config, s.Type())
	if err != nil {
		return err
	}
	resp, err := c.rpc.ValidateDataResourceConfig(ctx, &tfplugin6.ValidateDataResourceConfig_Request{TypeName: typeName, Config: dv})
	if err != nil {
		return fmt.Errorf("validateDataResourceConfig: %w", err)
	}
	return diagsErr("ValidateDataResourceConfig", diags6(resp.GetDiagnostics()))
}

func (c *client6) UpgradeResourceState(ctx context.Context, typeName string, version int64, rawJSON []byte) (cty.Value, error) {
	s, err := c.resource(ctx, typeName)
	if err != nil {
		return cty.NilVal, err
	}
	resp, err := c.rpc.UpgradeResourceState(ctx, &tfplugin6.UpgradeResourceState_Request{
		TypeName: typeName, Version: version, RawState: &tfplugin6.RawState{Json: rawJSON},
	})
	if err != nil {
		return cty.NilVal, fmt.Errorf("upgradeResourceState: %w", err)
	}
	if err := diagsErr("UpgradeResourceState", diags6(resp.GetDiagnostics())); err != nil {
		return cty.NilVal, err
	}
	return undyn6(resp.GetUpgradedState(), s.Type())
}

func (c *client6) ReadResource(ctx context.Context, typeName string, state cty.Value, private []byte) (cty.Value, []byte, error) {
	return c.ReadResourceIdentity(ctx, typeName, state, private, cty.NilVal)
}

func (c *client6) ReadResourceIdentity(ctx context.Context, typeName string, state cty.Value, private []byte, identity cty.Value) (cty.Value, []byte, error) {
	s, err := c.resource(ctx, typeName)
	if err != nil {
		return cty.NilVal, nil, err
	}
	ty := s.Type()
	dv, err := dyn6(state, ty)
	if err != nil {
		return cty.NilVal, nil, err
	}
	req := &tfplugin6.ReadResource_Request{TypeName: typeName, CurrentState: dv, Private: private, ClientCapabilities: caps6()}
	if identity != cty.NilVal {
		idv, err := dyn6(identity, identity.Type())
		if err != nil {
			return cty.NilVal, nil, err
		}
		req.CurrentIdentity = &tfplugin6.ResourceIdentityData{IdentityData: idv}
	}
	resp, err := c.rpc.ReadResource(ctx, req)
	if err != nil {
		return cty.NilVal, nil, fmt.Errorf("readResource: %w", err)
	}
	if err := diagsErr("ReadResource", diags6(resp.GetDiagnostics())); err != nil {
		return cty.NilVal, nil, err
	}
	if resp.GetDeferred() != nil {
		return cty.NilVal, nil, fmt.Errorf("readResource: provider deferred the read (%s), which Lava does not allow", resp.GetDeferred().GetReason())
	}
	v, err := undyn6(resp.GetNewState(), ty)
	return v, resp.GetPrivate(), err
}

func (c *client6) PlanResourceChange(ctx context.Context, typeName string, prior, proposed, config cty.Value, priorPrivate []byte) (PlanResult, error) {
	s, err := c.resource(ctx, typeName)
	if err != nil {
		return PlanResult{}, err
	}
	ty := s.Type()
	req := &tfplugin6.PlanResourceChange_Request{TypeName: typeName, PriorPrivate: priorPrivate, ClientCapabilities: caps6()}
	if req.PriorState, err = dyn6(prior, ty); err != nil {
		return PlanResult{}, err
	}
	if sameValue(proposed, prior) {
		// An unchanged object (every no-op): the same encoding.
		req.ProposedNewState = &tfplugin6.DynamicValue{Msgpack: req.PriorState.GetMsgpack()}
	} else if req.ProposedNewState, err = dyn6(proposed, ty); err != nil {
		return PlanResult{}, err
	}
	if req.Config, err = dyn6(config, ty); err != nil {
		return PlanResult{}, err
	}
	resp, err := c.rpc.PlanResourceChange(ctx, req)
	if err != nil {
		return PlanResult{}, fmt.Errorf("planResourceChange: %w", err)
	}
	if err := diagsErr("PlanResourceChange", diags6(resp.GetDiagnostics())); err != nil {
		return PlanResult{}, err
	}
	if resp.GetDeferred() != nil {
		return PlanResult{}, fmt.Errorf("planResourceChange: provider deferred the change (%s), which Lava does not allow", resp.GetDeferred().GetReason())
	}
	planned, err := undyn6(resp.GetPlannedState(), ty)
	if err != nil {
		return PlanResult{}, err
	}
	out := PlanResult{Planned: planned, PlannedPrivate: resp.GetPlannedPrivate(), LegacyTypeSystem: resp.GetLegacyTypeSystem()}
	if id := resp.GetPlannedIdentity().GetIdentityData(); id != nil {
		out.PlannedIdentity = RawValue{MsgPack: id.GetMsgpack(), JSON: id.GetJson()}
	}
	for _, ap := range resp.GetRequiresReplace() {
		out.RequiresReplace = append(out.RequiresReplace, path6(ap))
	}
	return out, nil
}

func (c *client6) ApplyResourceChange(ctx context.Context, typeName string, prior, planned, config cty.Value, plannedPrivate []byte) (cty.Value, []byte, error) {
	s, err := c.resource(ctx, typeName)
	if err != nil {
		return cty.NilVal, nil, err
	}
	ty := s.Type()
	req := &tfplugin6.ApplyResourceChange_Request{TypeName: typeName, PlannedPrivate: plannedPrivate}
	if req.PriorState, err = dyn6(prior, ty); err != nil {
		return cty.NilVal, nil, err
	}
	if req.PlannedState, err = dyn6(planned, ty); err != nil {
		return cty.NilVal, nil, err
	}
	if req.Config, err = dyn6(config, ty); err != nil {
		return cty.NilVal, nil, err
	}
	resp, err := c.rpc.ApplyResourceChange(ctx, req)
	if err != nil {
		return cty.NilVal, nil, fmt.Errorf("applyResourceChange: %w", err)
	}
	newState, derr := undyn6(resp.GetNewState(), ty)
	if derr != nil {
		return cty.NilVal, nil, derr
	}
	return newState, resp.GetPrivate(), diagsErr("ApplyResourceChange", diags6(resp.GetDiagnostics()))
}

func (c *client6) ReadDataSource(ctx context.Context, typeName string, config cty.Value) (cty.Value, error) {
	ps, err := c.Schema(ctx)
	if err != nil {
		return cty.NilVal, err
	}
	s, err := dataSchema(ps, typeName)
	if err != nil {
		return cty.NilVal, err
	}
	ty := s.Type()
	dv, err := dyn6(config, ty)
	if err != nil {
		return cty.NilVal, err
	}
	resp, err := c.rpc.ReadDataSource(ctx, &tfplugin6.ReadDataSource_Request{TypeName: typeName, Config: dv, ClientCapabilities: caps6()})
	if err != nil {
		return cty.NilVal, fmt.Errorf("readDataSource: %w", err)
	}
	if err := diagsErr("ReadDataSource", diags6(resp.GetDiagnostics())); err != nil {
		return cty.NilVal, err
	}
	return undyn6(resp.GetState(), ty)
}

func (c *client6) Stop(ctx context.Context) error {
	resp, err := c.rpc.StopProvider(ctx, &tfplugin6.StopProvider_Request{})
	if err != nil {
		return fmt.Errorf("stopProvider: %w", err)
	}
	if resp.GetError() != "" {
		return fmt.Errorf("stopProvider: %s", resp.GetError())
	}
	return nil
}

func (c *client6) resource(ctx context.Context, typeName string) (*Schema, error) {
	ps, err := c.Schema(ctx)
	if err != nil {
		return nil, err
	}
	return resourceSchema(ps, typeName)
}

func dyn6(v cty.Value, ty cty.Type) (*tfplugin6.DynamicValue, error) {
	b, err := encode(v, ty)
	if err != nil {
		return nil, err
	}
	return &tfplugin6.DynamicValue{Msgpack: b}, nil
}

func undyn6(dv *tfplugin6.DynamicValue, ty cty.Type) (cty.Value, error) {
	return decode(dv.GetMsgpack(), dv.GetJson(), ty)
}

func diags6(ds []*tfplugin6.Diagnostic) []Diagnostic {
	out := make([]Diagnostic, 0, len(ds))
	for _, d := range ds {
		dd := Diagnostic{Error: d.GetSeverity() == tfplugin6.Diagnostic_ERROR, Summary: d.GetSummary(), Detail: d.GetDetail()}
		if d.GetAttribute() != nil {
			dd.Attribute = pathString(path6(d.GetAttribute()))
		}
		out = append(out, dd)
	}
	return out
}

func path6(ap *tfplugin6.AttributePath) cty.Path {
	var p cty.Path
	for _, st := range ap.GetSteps() {
		switch sel := st.GetSelector().(type) {
		case *tfplugin6.AttributePath_Step_AttributeName:
			p = append(p, cty.GetAttrStep{Name: sel.AttributeName})
		case *tfplugin6.AttributePath_Step_ElementKeyString:
			p = append(p, cty.IndexStep{Key: cty.StringVal(sel.ElementKeyString)})
		case *tfplugin6.AttributePath_Step_ElementKeyInt:
			p = append(p, cty.IndexStep{Key: cty.NumberIntVal(sel.ElementKeyInt)})
		}
	}
	return p
}

func schema6(s *tfplugin6.Schema) (*Schema, error) {
	if s == nil {
		return &Schema{Block: &Block{}}, nil
	}
	b, err := block6(s.GetBlock())
	if err != nil {
		return nil, err
	}
	return &Schema{Version: s.GetVersion(), Block: b}, nil
}

func block6(pb *tfplugin6.Schema_Block) (*Block, error) {
	b := &Block{Attributes: map[string]*Attribute{}, BlockTypes: map[string]*NestedBlock{}}
	if pb == nil {
		return b, nil
	}
	for _, a := range pb.GetAttributes() {
		attr, err := attribute6(a)
		if err != nil {
			return nil, err
		}
		b.Attributes[a.GetName()] = attr
	}
	for _, nb := range pb.GetBlockTypes() {
		inner, err := block6(nb.GetBlock())
		if err != nil {
			return nil, err
		}
		b.BlockTypes[nb.GetTypeName()] = &NestedBlock{
			Block: *inner, Nesting: Nesting(nb.GetNesting()), MinItems: nb.GetMinItems(), MaxItems: nb.GetMaxItems(),
		}
	}
	return b, nil
}

func attribute6(a *tfplugin6.Schema_Attribute) (*Attribute, error) {
	attr := &Attribute{
		Required: a.GetRequired(), Optional: a.GetOptional(), Computed: a.GetComputed(),
		Sensitive: a.GetSensitive(), WriteOnly: a.GetWriteOnly(),
	}
	if nt := a.GetNestedType(); nt != nil {
		obj := &Object{Attributes: map[string]*Attribute{}, Nesting: Nesting(nt.GetNesting())}
		for _, na := range nt.GetAttributes() {
			inner, err := attribute6(na)
			if err != nil {
				return nil, err
			}
			obj.Attributes[na.GetName()] = inner
		}
		attr.NestedType = obj
		return attr, nil
	}
	ty, err := ctyjson.UnmarshalType(a.GetType())
	if err != nil {
		return nil, fmt.Errorf("attribute %s: type: %w", a.GetName(), err)
	}
	attr.Type = ty
	return attr, nil
}

func (c *client6) ImportResourceState(ctx context.Context, typeName, id string) (cty.Value, []byte, error) {
	s, err := c.resource(ctx, typeName)
	if err != nil {
		return cty.NilVal, nil, err
	}
	resp, err := c.rpc.ImportResourceState(ctx, &tfplugin6.ImportResourceState_Request{TypeName: typeName, Id: id, ClientCapabilities: caps6()})
	if err != nil {
		return cty.NilVal, nil, fmt.Errorf("importResourceState: %w", err)
	}
	if err := diagsErr("ImportResourceState", diags6(resp.GetDiagnostics())); err != nil {
		return cty.NilVal, nil, err
	}
	for _, r := range resp.GetImportedResources() {
		if r.GetTypeName() != typeName {
			continue
		}
		v, err := undyn6(r.GetState(), s.Type())
		return v, r.GetPrivate(), err
	}
	return cty.NilVal, nil, fmt.Errorf("importResourceState: the provider found no %s with id %q", typeName, id)
}

func (c *client6) IdentitySchema(ctx context.Context, typeName string) (*IdentitySchema, error) {
	return c.ids.get(typeName, func() (map[string]*IdentitySchema, error) {
		resp, err := c.rpc.GetResourceIdentitySchemas(ctx, &tfplugin6.GetResourceIdentitySchemas_Request{})
		if unimplemented(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("getResourceIdentitySchemas: %w", err)
		}
		if err := diagsErr("GetResourceIdentitySchemas", diags6(resp.GetDiagnostics())); err != nil {
			return nil, err
		}
		out := map[string]*IdentitySchema{}
		for name, is := range resp.GetIdentitySchemas() {
			s := &IdentitySchema{Version: is.GetVersion(), Attributes: map[string]cty.Type{}}
			for _, a := range is.GetIdentityAttributes() {
				ty, err := identityAttributeType(a.GetName(), a.GetType())
				if err != nil {
					return nil, fmt.Errorf("identity schema of %s: %w", name, err)
				}
				s.Attributes[a.GetName()] = ty
			}
			out[name] = s
		}
		return out, nil
	})
}

func (c *client6) ImportResourceIdentity(ctx context.Context, typeName string, identity cty.Value) (cty.Value, []byte, error) {
	s, err := c.resource(ctx, typeName)
	if err != nil {
		return cty.NilVal, nil, err
	}
	dv, err := dyn6(identity, identity.Type())
	if err != nil {
		return cty.NilVal, nil, err
	}
	resp, err := c.rpc.ImportResourceState(ctx, &tfplugin6.ImportResourceState_Request{TypeName: typeName, ClientCapabilities: caps6(),
		Identity: &tfplugin6.ResourceIdentityData{IdentityData: dv}})
	if err != nil {
		return cty.NilVal, nil, fmt.Errorf("importResourceState: %w", err)
	}
	if err := diagsErr("ImportResourceState", diags6(resp.GetDiagnostics())); err != nil {
		return cty.NilVal, nil, err
	}
	if resp.GetDeferred() != nil {
		return cty.NilVal, nil, fmt.Errorf("importResourceState: provider deferred the import (%s), which Lava does not allow", resp.GetDeferred().GetReason())
	}
	for _, r := range resp.GetImportedResources() {
		if r.GetTypeName() == typeName {
			v, err := undyn6(r.GetState(), s.Type())
			return v, r.GetPrivate(), err
		}
	}
	return cty.NilVal, nil, fmt.Errorf("importResourceState: the provider found no %s with the identity", typeName)
}
