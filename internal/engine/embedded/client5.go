package embedded

import (
	"context"
	"fmt"
	"sync"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/lava-operator/lava/internal/engine/embedded/tfplugin5"
)

// client5 speaks protocol 5 (terraform-plugin-sdk v1 and v2, terraform-plugin-go).
type client5 struct {
	rpc tfplugin5.ProviderClient

	mu     sync.Mutex
	schema *ProviderSchema
	ids    identitySchemas
}

// caps5 is what Lava tells providers it supports: neither deferrals nor write-only attributes.
func caps5() *tfplugin5.ClientCapabilities { return &tfplugin5.ClientCapabilities{} }

func (c *client5) ProtocolVersion() int { return 5 }

func (c *client5) Schema(ctx context.Context) (*ProviderSchema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.schema != nil {
		return c.schema, nil
	}
	resp, err := c.rpc.GetSchema(ctx, &tfplugin5.GetProviderSchema_Request{})
	if err != nil {
		return nil, fmt.Errorf("getProviderSchema: %w", err)
	}
	if err := diagsErr("GetProviderSchema", diags5(resp.GetDiagnostics())); err != nil {
		return nil, err
	}
	ps := &ProviderSchema{Resources: map[string]*Schema{}, DataSources: map[string]*Schema{}}
	if ps.Provider, err = schema5(resp.GetProvider()); err != nil {
		return nil, fmt.Errorf("provider schema: %w", err)
	}
	for name, s := range resp.GetResourceSchemas() {
		if ps.Resources[name], err = schema5(s); err != nil {
			return nil, fmt.Errorf("schema of %s: %w", name, err)
		}
	}
	for name, s := range resp.GetDataSourceSchemas() {
		if ps.DataSources[name], err = schema5(s); err != nil {
			return nil, fmt.Errorf("schema of data source %s: %w", name, err)
		}
	}
	ps.PlanDestroy = resp.GetServerCapabilities().GetPlanDestroy()
	c.schema = ps
	return ps, nil
}

func (c *client5) ValidateProviderConfig(ctx context.Context, config cty.Value) (cty.Value, error) {
	ps, err := c.Schema(ctx)
	if err != nil {
		return cty.NilVal, err
	}
	ty := ps.Provider.Type()
	dv, err := dyn5(config, ty)
	if err != nil {
		return cty.NilVal, err
	}
	resp, err := c.rpc.PrepareProviderConfig(ctx, &tfplugin5.PrepareProviderConfig_Request{Config: dv})
	if err != nil {
		return cty.NilVal, fmt.Errorf("prepareProviderConfig: %w", err)
	}
	if err := diagsErr("PrepareProviderConfig", diags5(resp.GetDiagnostics())); err != nil {
		return cty.NilVal, err
	}
	if pc := resp.GetPreparedConfig(); pc != nil && (len(pc.GetMsgpack()) > 0 || len(pc.GetJson()) > 0) {
		return undyn5(pc, ty)
	}
	return config, nil
}

func (c *client5) Configure(ctx context.Context, config cty.Value) error {
	ps, err := c.Schema(ctx)
	if err != nil {
		return err
	}
	dv, err := dyn5(config, ps.Provider.Type())
	if err != nil {
		return err
	}
	resp, err := c.rpc.Configure(ctx, &tfplugin5.Configure_Request{
		TerraformVersion: TerraformVersion, Config: dv, ClientCapabilities: caps5(),
	})
	if err != nil {
		return fmt.Errorf("configure: %w", err)
	}
	return diagsErr("Configure", diags5(resp.GetDiagnostics()))
}

func (c *client5) ValidateResourceConfig(ctx context.Context, typeName string, config cty.Value) error {
	s, err := c.resource(ctx, typeName)
	if err != nil {
		return err
	}
	dv, err := dyn5(config, s.Type())
	if err != nil {
		return err
	}
	resp, err := c.rpc.ValidateResourceTypeConfig(ctx, &tfplugin5.ValidateResourceTypeConfig_Request{TypeName: typeName, Config: dv, ClientCapabilities: caps5()})
	if err != nil {
		return fmt.Errorf("validateResourceTypeConfig: %w", err)
	}
	return diagsErr("ValidateResourceTypeConfig", diags5(resp.GetDiagnostics()))
}

func (c *client5) ValidateDataResourceConfig(ctx context.Context, typeName string, config cty.Value) error {
	ps, err := c.Schema(ctx)
	if err != nil {
		return err
	}
	s, err := dataSchema(ps, typeName)
	if err != nil {
		return err
	}
	dv, err := dyn5(config, s.Type())
	if err != nil {
		return err
	}
	resp, err := c.rpc.ValidateDataSourceConfig(ctx, &tfplugin5.ValidateDataSourceConfig_Request{TypeName: typeName, Config: dv})
	if err != nil {
		return fmt.Errorf("validateDataSourceConfig: %w", err)
	}
	return diagsErr("ValidateDataSourceConfig", diags5(resp.GetDiagnostics()))
}

func (c *client5) UpgradeResourceState(ctx context.Context, typeName string, version int64, rawJSON []byte) (cty.Value, error) {
	s, err := c.resource(ctx, typeName)
	if err != nil {
		return cty.NilVal, err
	}
	resp, err := c.rpc.UpgradeResourceState(ctx, &tfplugin5.UpgradeResourceState_Request{
		TypeName: typeName, Version: version, RawState: &tfplugin5.RawState{Json: rawJSON},
	})
	if err != nil {
		return cty.NilVal, fmt.Errorf("upgradeResourceState: %w", err)
	}
	if err := diagsErr("UpgradeResourceState", diags5(resp.GetDiagnostics())); err != nil {
		return cty.NilVal, err
	}
	return undyn5(resp.GetUpgradedState(), s.Type())
}

func (c *client5) ReadResource(ctx context.Context, typeName string, state cty.Value, private []byte) (cty.Value, []byte, error) {
	return c.ReadResourceIdentity(ctx, typeName, state, private, cty.NilVal)
}

func (c *client5) ReadResourceIdentity(ctx context.Context, typeName string, state cty.Value, private []byte, identity cty.Value) (cty.Value, []byte, error) {
	s, err := c.resource(ctx, typeName)
	if err != nil {
		return cty.NilVal, nil, err
	}
	ty := s.Type()
	dv, err := dyn5(state, ty)
	if err != nil {
		return cty.NilVal, nil, err
	}
	req := &tfplugin5.ReadResource_Request{TypeName: typeName, CurrentState: dv, Private: private, ClientCapabilities: caps5()}
	if identity != cty.NilVal {
		idv, err := dyn5(identity, identity.Type())
		if err != nil {
			return cty.NilVal, nil, err
		}
		req.CurrentIdentity = &tfplugin5.ResourceIdentityData{IdentityData: idv}
	}
	resp, err := c.rpc.ReadResource(ctx, req)
	if err != nil {
		return cty.NilVal, nil, fmt.Errorf("readResource: %w", err)
	}
	if err := diagsErr("ReadResource", diags5(resp.GetDiagnostics())); err != nil {
		return cty.NilVal, nil, err
	}
	if resp.GetDeferred() != nil {
		return cty.NilVal, nil, fmt.Errorf("readResource: provider deferred the read (%s), which Lava does not allow", resp.GetDeferred().GetReason())
	}
	v, err := undyn5(resp.GetNewState(), ty)
	return v, resp.GetPrivate(), err
}

func (c *client5) PlanResourceChange(ctx context.Context, typeName string, prior, proposed, config cty.Value, priorPrivate []byte) (PlanResult, error) {
	s, err := c.resource(ctx, typeName)
	if err != nil {
		return PlanResult{}, err
	}
	ty := s.Type()
	req := &tfplugin5.PlanResourceChange_Request{TypeName: typeName, PriorPrivate: priorPrivate, ClientCapabilities: caps5()}
	if req.PriorState, err = dyn5(prior, ty); err != nil {
		return PlanResult{}, err
	}
	if sameValue(proposed, prior) {
		// An unchanged object (every no-op): the same encoding.
		req.ProposedNewState = &tfplugin5.DynamicValue{Msgpack: req.PriorState.GetMsgpack()}
	} else if req.ProposedNewState, err = dyn5(proposed, ty); err != nil {
		return PlanResult{}, err
	}
	if req.Config, err = dyn5(config, ty); err != nil {
		return PlanResult{}, err
	}
	resp, err := c.rpc.PlanResourceChange(ctx, req)
	if err != nil {
		return PlanResult{}, fmt.Errorf("planResourceChange: %w", err)
	}
	if err := diagsErr("PlanResourceChange", diags5(resp.GetDiagnostics())); err != nil {
		return PlanResult{}, err
	}
	if resp.GetDeferred() != nil {
		return PlanResult{}, fmt.Errorf("planResourceChange: provider deferred the change (%s), which Lava does not allow", resp.GetDeferred().GetReason())
	}
	planned, err := undyn5(resp.GetPlannedState(), ty)
	if err != nil {
		return PlanResult{}, err
	}
	out := PlanResult{Planned: planned, PlannedPrivate: resp.GetPlannedPrivate(), LegacyTypeSystem: resp.GetLegacyTypeSystem()}
	if id := resp.GetPlannedIdentity().GetIdentityData(); id != nil {
		out.PlannedIdentity = RawValue{MsgPack: id.GetMsgpack(), JSON: id.GetJson()}
	}
	for _, ap := range resp.GetRequiresReplace() {
		out.RequiresReplace = append(out.RequiresReplace, path5(ap))
	}
	return out, nil
}

func (c *client5) ApplyResourceChange(ctx context.Context, typeName string, prior, planned, config cty.Value, plannedPrivate []byte) (cty.Value, []byte, error) {
	s, err := c.resource(ctx, typeName)
	if err != nil {
		return cty.NilVal, nil, err
	}
	ty := s.Type()
	req := &tfplugin5.ApplyResourceChange_Request{TypeName: typeName, PlannedPrivate: plannedPrivate}
	if req.PriorState, err = dyn5(prior, ty); err != nil {
		return cty.NilVal, nil, err
	}
	if req.PlannedState, err = dyn5(planned, ty); err != nil {
		return cty.NilVal, nil, err
	}
	if req.Config, err = dyn5(config, ty); err != nil {
		return cty.NilVal, nil, err
	}
	resp, err := c.rpc.ApplyResourceChange(ctx, req)
	if err != nil {
		return cty.NilVal, nil, fmt.Errorf("applyResourceChange: %w", err)
	}
	newState, derr := undyn5(resp.GetNewState(), ty)
	if derr != nil {
		return cty.NilVal, nil, derr
	}
	return newState, resp.GetPrivate(), diagsErr("ApplyResourceChange", diags5(resp.GetDiagnostics()))
}

func (c *client5) ReadDataSource(ctx context.Context, typeName string, config cty.Value) (cty.Value, error) {
	ps, err := c.Schema(ctx)
	if err != nil {
		return cty.NilVal, err
	}
	s, err := dataSchema(ps, typeName)
	if err != nil {
		return cty.NilVal, err
	}
	ty := s.Type()
	dv, err := dyn5(config, ty)
	if err != nil {
		return cty.NilVal, err
	}
	resp, err := c.rpc.ReadDataSource(ctx, &tfplugin5.ReadDataSource_Request{TypeName: typeName, Config: dv, ClientCapabilities: caps5()})
	if err != nil {
		return cty.NilVal, fmt.Errorf("readDataSource: %w", err)
	}
	if err := diagsErr("ReadDataSource", diags5(resp.GetDiagnostics())); err != nil {
		return cty.NilVal, err
	}
	return undyn5(resp.GetState(), ty)
}

func (c *client5) Stop(ctx context.Context) error {
	resp, err := c.rpc.Stop(ctx, &tfplugin5.Stop_Request{})
	if err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	if resp.GetError() != "" {
		return fmt.Errorf("stop: %s", resp.GetError())
	}
	return nil
}

func (c *client5) resource(ctx context.Context, typeName string) (*Schema, error) {
	ps, err := c.Schema(ctx)
	if err != nil {
		return nil, err
	}
	return resourceSchema(ps, typeName)
}

func dyn5(v cty.Value, ty cty.Type) (*tfplugin5.DynamicValue, error) {
	b, err := encode(v, ty)
	if err != nil {
		return nil, err
	}
	return &tfplugin5.DynamicValue{Msgpack: b}, nil
}

func undyn5(dv *tfplugin5.DynamicValue, ty cty.Type) (cty.Value, error) {
	return decode(dv.GetMsgpack(), dv.GetJson(), ty)
}

func diags5(ds []*tfplugin5.Diagnostic) []Diagnostic {
	out := make([]Diagnostic, 0, len(ds))
	for _, d := range ds {
		dd := Diagnostic{Error: d.GetSeverity() == tfplugin5.Diagnostic_ERROR, Summary: d.GetSummary(), Detail: d.GetDetail()}
		if d.GetAttribute() != nil {
			dd.Attribute = pathString(path5(d.GetAttribute()))
		}
		out = append(out, dd)
	}
	return out
}

func path5(ap *tfplugin5.AttributePath) cty.Path {
	var p cty.Path
	for _, st := range ap.GetSteps() {
		switch sel := st.GetSelector().(type) {
		case *tfplugin5.AttributePath_Step_AttributeName:
			p = append(p, cty.GetAttrStep{Name: sel.AttributeName})
		case *tfplugin5.AttributePath_Step_ElementKeyString:
			p = append(p, cty.IndexStep{Key: cty.StringVal(sel.ElementKeyString)})
		case *tfplugin5.AttributePath_Step_ElementKeyInt:
			p = append(p, cty.IndexStep{Key: cty.NumberIntVal(sel.ElementKeyInt)})
		}
	}
	return p
}

func schema5(s *tfplugin5.Schema) (*Schema, error) {
	if s == nil {
		return &Schema{Block: &Block{}}, nil
	}
	b, err := block5(s.GetBlock())
	if err != nil {
		return nil, err
	}
	return &Schema{Version: s.GetVersion(), Block: b}, nil
}

func block5(pb *tfplugin5.Schema_Block) (*Block, error) {
	b := &Block{Attributes: map[string]*Attribute{}, BlockTypes: map[string]*NestedBlock{}}
	if pb == nil {
		return b, nil
	}
	for _, a := range pb.GetAttributes() {
		attr, err := attribute5(a)
		if err != nil {
			return nil, err
		}
		b.Attributes[a.GetName()] = attr
	}
	for _, nb := range pb.GetBlockTypes() {
		inner, err := block5(nb.GetBlock())
		if err != nil {
			return nil, err
		}
		b.BlockTypes[nb.GetTypeName()] = &NestedBlock{
			Block: *inner, Nesting: Nesting(nb.GetNesting()), MinItems: nb.GetMinItems(), MaxItems: nb.GetMaxItems(),
		}
	}
	return b, nil
}

func attribute5(a *tfplugin5.Schema_Attribute) (*Attribute, error) {
	attr := &Attribute{
		Required: a.GetRequired(), Optional: a.GetOptional(), Computed: a.GetComputed(),
		Sensitive: a.GetSensitive(), WriteOnly: a.GetWriteOnly(),
	}
	ty, err := ctyjson.UnmarshalType(a.GetType())
	if err != nil {
		return nil, fmt.Errorf("attribute %s: type: %w", a.GetName(), err)
	}
	attr.Type = ty
	return attr, nil
}

func (c *client5) ImportResourceState(ctx context.Context, typeName, id string) (cty.Value, []byte, error) {
	s, err := c.resource(ctx, typeName)
	if err != nil {
		return cty.NilVal, nil, err
	}
	resp, err := c.rpc.ImportResourceState(ctx, &tfplugin5.ImportResourceState_Request{TypeName: typeName, Id: id, ClientCapabilities: caps5()})
	if err != nil {
		return cty.NilVal, nil, fmt.Errorf("importResourceState: %w", err)
	}
	if err := diagsErr("ImportResourceState", diags5(resp.GetDiagnostics())); err != nil {
		return cty.NilVal, nil, err
	}
	for _, r := range resp.GetImportedResources() {
		if r.GetTypeName() != typeName {
			continue
		}
		v, err := undyn5(r.GetState(), s.Type())
		return v, r.GetPrivate(), err
	}
	return cty.NilVal, nil, fmt.Errorf("importResourceState: the provider found no %s with id %q", typeName, id)
}

func (c *client5) IdentitySchema(ctx context.Context, typeName string) (*IdentitySchema, error) {
	return c.ids.get(typeName, func() (map[string]*IdentitySchema, error) {
		resp, err := c.rpc.GetResourceIdentitySchemas(ctx, &tfplugin5.GetResourceIdentitySchemas_Request{})
		if unimplemented(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("getResourceIdentitySchemas: %w", err)
		}
		if err := diagsErr("GetResourceIdentitySchemas", diags5(resp.GetDiagnostics())); err != nil {
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

func (c *client5) ImportResourceIdentity(ctx context.Context, typeName string, identity cty.Value) (cty.Value, []byte, error) {
	s, err := c.resource(ctx, typeName)
	if err != nil {
		return cty.NilVal, nil, err
	}
	dv, err := dyn5(identity, identity.Type())
	if err != nil {
		return cty.NilVal, nil, err
	}
	resp, err := c.rpc.ImportResourceState(ctx, &tfplugin5.ImportResourceState_Request{TypeName: typeName, ClientCapabilities: caps5(),
		Identity: &tfplugin5.ResourceIdentityData{IdentityData: dv}})
	if err != nil {
		return cty.NilVal, nil, fmt.Errorf("importResourceState: %w", err)
	}
	if err := diagsErr("ImportResourceState", diags5(resp.GetDiagnostics())); err != nil {
		return cty.NilVal, nil, err
	}
	if resp.GetDeferred() != nil {
		return cty.NilVal, nil, fmt.Errorf("importResourceState: provider deferred the import (%s), which Lava does not allow", resp.GetDeferred().GetReason())
	}
	for _, r := range resp.GetImportedResources() {
		if r.GetTypeName() == typeName {
			v, err := undyn5(r.GetState(), s.Type())
			return v, r.GetPrivate(), err
		}
	}
	return cty.NilVal, nil, fmt.Errorf("importResourceState: the provider found no %s with the identity", typeName)
}
