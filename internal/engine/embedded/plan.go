package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"sort"
	"strings"
	"sync"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// Action is what a change does to one resource instance.
type Action string

// Actions (the same words as the engine package's).
const (
	NoOp    Action = "no-op"
	Create  Action = "create"
	Update  Action = "update"
	Delete  Action = "delete"
	Replace Action = "replace"
	Read    Action = "read"
	// Forget drops an instance whose object no longer exists from state; no provider call.
	Forget Action = "forget"
)

// Change is the planned change of one resource instance.
type Change struct {
	// Addr is the instance address ("local_file.a", "local_file.b[0]", `x.y["k"]`).
	Addr string
	// Res is the resource's configuration address ("local_file.b", "data.x.y").
	Res string
	// Module is the module instance path ("" for the root, `module.a["k"]`).
	Module           string
	Mode, Type, Name string
	Key              instanceKey
	Action           Action
	// ProviderKey is the provider configuration ("local", "aws.west"); Provider the state
	// reference (provider["registry.opentofu.org/hashicorp/local"]).
	ProviderKey, Provider string
	// Prior is the refreshed prior value (null for a create), Planned the planned value
	// (null for a delete; may hold unknowns).
	Prior, Planned               cty.Value
	PriorPrivate, PlannedPrivate []byte
	// CreateBeforeDestroy orders a replacement's create first.
	CreateBeforeDestroy bool
	// ReplacePaths are the changed attributes that force replacement, dotted.
	ReplacePaths []string
	// Each is the resource's state "each" mode: "", "list" or "map".
	Each string
	// Removed marks a Forget a removed block asked for (the object is kept, not destroyed).
	Removed bool
	// Gone marks a Create of an instance the state had and the refresh found deleted out of
	// band (OpenTofu's resource_drift "delete"): a drift scan reports it as a replacement.
	Gone bool
	// ImportID is set when the instance is imported (an import block) before this change:
	// Prior is the imported object.
	ImportID string
	// Reason says why a replacement is planned (changed paths, taint, replace_triggered_by).
	Reason string
	// Deposed names an old object of a create-before-destroy replacement (a delete).
	Deposed string
	// Sensitive are the paths of Planned (or Prior) the schema marks sensitive, and for a
	// managed instance also those its configuration made sensitive (Marked).
	Sensitive []cty.Path
	// PriorSensitive are the paths of Prior that were sensitive when it was written: the
	// schema's and those the state recorded in sensitive_attributes (what the configuration
	// made sensitive then), as OpenTofu's before_sensitive.
	PriorSensitive []cty.Path
	// Marked are the paths that held a sensitive value in the configuration (sensitive
	// variables, sensitive()); state records them in sensitive_attributes with Sensitive.
	Marked []cty.Path
}

// Plan is a computed plan: every instance's change (no-ops included), in address order.
type Plan struct {
	Changes []*Change
	// Deps maps each resource address to the addresses it depends on.
	Deps map[string][]string
	// Outputs are the planned output values (unknown where not known until apply).
	Outputs map[string]cty.Value
	// OutputsChanged reports an output value that differs from the state's.
	OutputsChanged bool
	// ProviderVersions maps provider addresses to the versions used.
	ProviderVersions map[string]string
	// Destroy marks a plan that destroys everything.
	Destroy bool
	// Moves are the moved blocks carried out (state renamed before planning).
	Moves []Move
	// Checks are the check blocks' results at plan (failures are warnings, logged by the
	// runner; the apply records them in the state's check_results).
	Checks []CheckResult
}

// HasChanges reports whether applying the plan would change anything real: reading data
// sources and dropping objects already gone from state do not count.
func (p *Plan) HasChanges() bool {
	if p.OutputsChanged || len(p.Moves) > 0 {
		return true
	}
	for _, c := range p.Changes {
		if c.ImportID != "" || c.Removed {
			return true
		}
		switch c.Action {
		case NoOp, Read, Forget:
		default:
			return true
		}
	}
	return false
}

// planner computes a plan.
type planner struct {
	r     *Runner
	cfg   *Config
	prior *State
	sess  *session
	ev    *evalState
	// imports are the import blocks by target instance address; importIDs their ids.
	imports   map[string]*ImportConfig
	importIDs map[string]string
	// priorEv resolves references to the prior values (replace_triggered_by compares).
	priorEv *evalState
	deps    map[string][]string
	// forcedCBD are the resources create_before_destroy is forced on (forcedCreateBeforeDestroy).
	forcedCBD map[string]bool

	mu      sync.Mutex
	changes []*Change
	secrets map[string]bool
}

// stateIndex finds a resource's state by address.
func stateIndex(st *State) map[string]*StateResource {
	out := map[string]*StateResource{}
	if st == nil {
		return out
	}
	for i := range st.Resources {
		r := &st.Resources[i]
		out[resourceKey(r)] = r
	}
	return out
}

func (p *planner) run(ctx context.Context, destroy bool) (*Plan, error) {
	deps, err := p.cfg.dependencies()
	if err != nil {
		return nil, err
	}
	p.deps = deps
	p.forcedCBD = forcedCreateBeforeDestroy(p.cfg, deps)
	if !destroy {
		p.priorEv = newEvalState(p.cfg, p.ev.budget)
		p.priorEv.vars = p.ev.vars
		if err := p.evalImports(); err != nil {
			return nil, err
		}
	}
	byAddr := map[string]*ResourceConfig{}
	for _, rc := range p.cfg.Resources {
		byAddr[rc.Address()] = rc
	}
	var moves []Move
	if !destroy {
		p.prior, moves = applyMoves(p.prior, p.cfg.Moves)
	}
	states := stateIndex(p.prior)
	nodes := []string{}
	allDeps := map[string][]string{}
	if !destroy {
		for _, rc := range p.cfg.Resources {
			nodes = append(nodes, rc.Address())
			allDeps[rc.Address()] = deps[rc.Address()]
		}
	}
	// State records dependencies as configuration addresses (no instance keys): each
	// names every node of that resource.
	byConfig := map[string][]string{}
	for addr := range states {
		byConfig[configAddress(addr)] = append(byConfig[configAddress(addr)], addr)
	}
	for addr := range byAddr {
		if _, inState := states[addr]; !inState {
			byConfig[configAddress(addr)] = append(byConfig[configAddress(addr)], addr)
		}
	}
	for addr, sr := range states {
		if _, inCfg := byAddr[addr]; inCfg && !destroy {
			continue
		}
		nodes = append(nodes, addr)
		set := map[string]bool{}
		for _, in := range sr.Instances {
			for _, d := range in.Dependencies {
				for _, n := range byConfig[configAddress(d)] {
					set[n] = true
				}
			}
		}
		delete(set, addr)
		allDeps[addr] = setKeys(set)
	}
	sort.Strings(nodes)
	err = walk(ctx, nodes, allDeps, p.r.parallelism, false, func(ctx context.Context, addr string) error {
		rc := byAddr[addr]
		if destroy || rc == nil {
			return p.planOrphan(ctx, addr, states[addr])
		}
		err := p.planResource(ctx, rc, states[addr])
		if err != nil && p.sess.crashed(rc.ProviderKey, err) {
			return &ProviderCrashedError{Provider: rc.ProviderKey, Address: addr, Err: err}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := p.checkPreventDestroy(destroy); err != nil {
		return nil, err
	}
	if !destroy {
		if err := p.checkImportTargets(); err != nil {
			return nil, err
		}
	}
	plan := &Plan{Deps: allDeps, ProviderVersions: p.sess.providerVersions(), Destroy: destroy, Outputs: map[string]cty.Value{}, Moves: moves}
	sort.Slice(p.changes, func(i, j int) bool { return p.changes[i].Addr < p.changes[j].Addr })
	plan.Changes = p.changes
	if !destroy {
		for _, name := range sortedKeys(p.cfg.Outputs) {
			v, _, err := p.ev.output(name, p.cfg.Outputs[name])
			if err != nil {
				return nil, err
			}
			plan.Outputs[name] = v
		}
		plan.Checks = p.ev.checks()
		settleChecks(plan.Checks, p.secrets, &p.mu)
		logChecks(p.r.log, "plan", plan.Checks)
	}
	plan.OutputsChanged = outputsDiffer(plan.Outputs, p.prior)
	return plan, nil
}

// outputsDiffer compares planned outputs with the state's.
func outputsDiffer(planned map[string]cty.Value, st *State) bool {
	var have map[string]StateOutput
	if st != nil {
		have = st.Outputs
	}
	if len(have) != len(planned) {
		return true
	}
	for name, v := range planned {
		o, ok := have[name]
		if !ok || !v.IsWhollyKnown() {
			return true
		}
		b, err := ctyjson.Marshal(v, v.Type())
		if err != nil || !jsonEqual(b, o.Value) {
			return true
		}
	}
	return false
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

func (p *planner) add(c *Change) {
	p.mu.Lock()
	p.changes = append(p.changes, c)
	p.mu.Unlock()
	if p.r.log.Enabled(context.Background(), slog.LevelDebug) {
		p.r.log.Debug("plan", slog.String("resource", c.Addr), slog.String("action", string(c.Action)))
	}
}

// priorObject decodes, upgrades and refreshes one state instance. A nil result value means
// the object no longer exists.
func (p *planner) priorObject(ctx context.Context, c Client, typ, addr string, in StateInstance) (cty.Value, []byte, error) {
	ps, err := c.Schema(ctx)
	if err != nil {
		return cty.NilVal, nil, err
	}
	s, err := resourceSchema(ps, typ)
	if err != nil {
		return cty.NilVal, nil, fmt.Errorf("%s: %w", addr, err)
	}
	attrs := in.Attributes
	if len(attrs) == 0 {
		attrs = []byte("{}")
	}
	// State written at the schema's current version that decodes as the schema's type needs
	// no upgrade: the provider's UpgradeResourceState would only re-encode it. Anything else
	// (an older version, attributes the schema no longer has) goes to the provider.
	v := cty.NilVal
	if in.SchemaVersion == s.Version {
		if dv, err := s.DecodeState(attrs); err == nil {
			v = dv
		}
	}
	if v == cty.NilVal {
		if v, err = c.UpgradeResourceState(ctx, typ, in.SchemaVersion, attrs); err != nil {
			return cty.NilVal, nil, fmt.Errorf("%s: %w", addr, err)
		}
	}
	if v.IsNull() {
		return v, in.Private, nil
	}
	nv, priv, err := c.ReadResource(ctx, typ, v, in.Private)
	if err != nil {
		return cty.NilVal, nil, fmt.Errorf("%s: %w", addr, err)
	}
	if err := p.ev.budget.provided(addr+": refreshed object", nv); err != nil {
		return cty.NilVal, nil, err
	}
	return nv, priv, nil
}

func (p *planner) planOrphan(ctx context.Context, addr string, sr *StateResource) error {
	if sr == nil {
		return nil
	}
	pkey := stateProviderKey(sr.Provider)
	rm := p.cfg.removedFor(addr)
	for _, in := range sr.Instances {
		key := normalizeKey(in.IndexKey)
		c := &Change{Addr: addr + keyString(key), Res: addr, Module: sr.Module, Mode: sr.Mode, Type: sr.Type, Name: sr.Name, Key: key,
			ProviderKey: pkey, Provider: sr.Provider, Each: sr.Each, Action: Delete}
		if rm != nil && !rm.Destroy && in.Deposed == "" {
			// A removed block keeps the object: only the state forgets it.
			c.Action, c.Removed, c.Reason = Forget, true, "removed block (lifecycle.destroy = false)"
			p.add(c)
			continue
		}
		if sr.Mode == "data" {
			c.Action = Forget
			p.add(c)
			continue
		}
		if in.Deposed != "" {
			c.Deposed = in.Deposed
			c.Addr += " (deposed " + in.Deposed + ")"
		}
		client, _, err := p.sess.provider(ctx, pkey)
		if err != nil {
			return err
		}
		prior, priv, err := p.priorObject(ctx, client, sr.Type, c.Addr, in)
		if err != nil {
			return err
		}
		c.Prior, c.PriorPrivate = prior, priv
		if prior.IsNull() {
			c.Action = Forget
		}
		ps, _ := client.Schema(ctx)
		c.Planned = cty.NullVal(ps.Resources[sr.Type].Type())
		c.Sensitive = ps.Resources[sr.Type].Block.SensitivePaths(prior)
		c.PriorSensitive = priorSensitivePaths(ps.Resources[sr.Type], prior, in)
		p.noteSecrets(prior, c.PriorSensitive)
		p.add(c)
	}
	return nil
}

// priorSensitivePaths are the paths of prior, read from the state instance in, that were
// sensitive when it was written: the schema's, and those in.SensitiveAttributes records. A
// sensitive_attributes that does not parse marks every attribute sensitive.
func priorSensitivePaths(s *Schema, prior cty.Value, in StateInstance) []cty.Path {
	paths := s.Block.SensitivePaths(prior)
	recorded, err := unmarshalPaths(in.SensitiveAttributes)
	if err != nil {
		if prior != cty.NilVal && prior.Type().IsObjectType() {
			for name := range prior.Type().AttributeTypes() {
				paths = append(paths, cty.GetAttrPath(name))
			}
		}
		return paths
	}
	return append(paths, recorded...)
}

// stateProviderKey is the provider configuration ("local", "local.alias") of a state
// provider address (provider["HOST/NS/TYPE"], with ".alias").
func stateProviderKey(p string) string {
	key := localFromStateProvider(p)
	if alias := stateProviderAlias(p); alias != "" {
		key += "." + alias
	}
	return key
}

// stateProviderAlias returns the alias of provider["..."].alias, if any.
func stateProviderAlias(p string) string {
	if i := len(p) - 1; i > 0 && p[i] != ']' {
		for j := len(p) - 1; j >= 0; j-- {
			if p[j] == ']' && j+2 < len(p) && p[j+1] == '.' {
				return p[j+2:]
			}
		}
	}
	return ""
}

// expansion is the instances a resource's count or for_each yields.
type expansion struct {
	// scope is the module instance of the expanded block (nil: the root).
	scope  *modScope
	each   string // "", "list", "map"
	keys   []instanceKey
	values map[string]cty.Value // for_each values by key
}

func expand(rc *ResourceConfig, ev *evalState) (expansion, error) {
	return expandIn(rc, ev, rc.Address())
}

// expandIn expands rc's count or for_each in its scope; where names it in errors.
func expandIn(rc *ResourceConfig, ev *evalState, where string) (expansion, error) {
	sc := instance{scope: rc.scope}
	switch {
	case rc.Count != nil:
		v, err := ev.eval(rc.Count, sc, where+": count")
		if err != nil {
			return expansion{}, err
		}
		if sensitiveValue(v) {
			return expansion{}, fmt.Errorf("%s: count: sensitive values, or values derived from sensitive values, cannot be used as count arguments", where)
		}
		v, _ = v.UnmarkDeep()
		if !v.IsWhollyKnown() {
			return expansion{}, fmt.Errorf("%s: count depends on values known only after apply", where)
		}
		if v.Type() == cty.String && numberPrefix(v.AsString()) > MaxNumberText {
			return expansion{}, fmt.Errorf("%s: count must be a whole number (a string of %d digits is over the %d-byte limit of a number's text)", where, numberPrefix(v.AsString()), MaxNumberText)
		}
		n, err := convert.Convert(v, cty.Number)
		if err != nil || n.IsNull() {
			return expansion{}, fmt.Errorf("%s: count must be a whole number", where)
		}
		i, acc := n.AsBigFloat().Int64()
		if acc != big.Exact || i < 0 {
			return expansion{}, fmt.Errorf("%s: count must be a whole number >= 0", where)
		}
		if i > MaxValueElements {
			// A key each, before any instance is planned (1e9 ran the process out of memory).
			return expansion{}, fmt.Errorf("%s: %w", where, &LimitError{Func: "count",
				Reason: fmt.Sprintf("%d instances, more than %d, the limit of one resource's instances", i, MaxValueElements)})
		}
		e := expansion{scope: rc.scope, each: "list"}
		for k := int64(0); k < i; k++ {
			e.keys = append(e.keys, k)
		}
		return e, nil
	case rc.ForEach != nil:
		v, err := ev.eval(rc.ForEach, sc, where+": for_each")
		if err != nil {
			return expansion{}, err
		}
		// As OpenTofu: a sensitive for_each would put the value into instance addresses; a
		// map's sensitive element values stay marked in each.value.
		if sensitiveValue(v) {
			return expansion{}, fmt.Errorf("%s: for_each: %s", where, sensitiveForEach)
		}
		v, _ = v.Unmark()
		if !v.IsWhollyKnown() {
			return expansion{}, fmt.Errorf("%s: for_each depends on values known only after apply", where)
		}
		if v.IsNull() {
			return expansion{}, fmt.Errorf("%s: for_each is null", where)
		}
		e := expansion{scope: rc.scope, each: "map", values: map[string]cty.Value{}}
		ty := v.Type()
		switch {
		case ty.IsObjectType() || ty.IsMapType():
			for it := v.ElementIterator(); it.Next(); {
				k, ev := it.Element()
				e.values[k.AsString()] = ev
			}
		case ty.IsSetType() || ty.IsTupleType() || ty.IsListType():
			if !ty.IsSetType() {
				// Terraform accepts only sets of strings; JSON arrays of strings are converted.
				sv, err := convert.Convert(v, cty.Set(cty.String))
				if err != nil {
					return expansion{}, fmt.Errorf("%s: for_each must be a map or a set of strings", where)
				}
				// A set takes its elements' marks: a sensitive element marks the set.
				if sensitiveValue(sv) {
					return expansion{}, fmt.Errorf("%s: for_each: %s", where, sensitiveForEach)
				}
				v, _ = sv.Unmark()
			}
			for it := v.ElementIterator(); it.Next(); {
				_, ev := it.Element()
				if ev.Type() != cty.String || ev.IsNull() {
					return expansion{}, fmt.Errorf("%s: for_each set elements must be strings", where)
				}
				e.values[ev.AsString()] = ev
			}
		default:
			return expansion{}, fmt.Errorf("%s: for_each must be a map or a set of strings", where)
		}
		for _, k := range sortedKeys(e.values) {
			e.keys = append(e.keys, k)
		}
		return e, nil
	}
	return expansion{scope: rc.scope, keys: []instanceKey{nil}}, nil
}

// sensitiveForEach is OpenTofu's reason for refusing a sensitive for_each.
const sensitiveForEach = "sensitive values, or values derived from sensitive values, cannot be used as for_each arguments (the value would become part of the instance addresses)"

// sensitiveValue reports whether v itself (not only something inside it) is sensitive: marked by
// sensitive(), a sensitive variable or a sensitive attribute.
func sensitiveValue(v cty.Value) bool {
	return v.HasMark(sensitiveMark) || v.HasMark(attributeSensitiveMark)
}

// instance returns what count.index or each.* mean for one instance.
func (e expansion) instance(key instanceKey) instance {
	in := instance{scope: e.scope}
	switch k := key.(type) {
	case int64:
		in.countIndex = cty.NumberIntVal(k)
	case string:
		in.eachKey, in.eachValue = cty.StringVal(k), e.values[k]
	}
	return in
}

// assemble builds the value references to a resource see from its instances' values.
func (e expansion) assemble(vals map[string]cty.Value, ty cty.Type) cty.Value {
	switch e.each {
	case "list":
		if len(e.keys) == 0 {
			return cty.EmptyTupleVal
		}
		out := make([]cty.Value, len(e.keys))
		for i, k := range e.keys {
			out[i] = vals[keyString(k)]
		}
		return cty.TupleVal(out)
	case "map":
		out := map[string]cty.Value{}
		for _, k := range e.keys {
			out[k.(string)] = vals[keyString(k)]
		}
		return cty.ObjectVal(out)
	}
	if v, ok := vals[""]; ok {
		return v
	}
	return cty.NullVal(ty)
}

func (p *planner) planResource(ctx context.Context, rc *ResourceConfig, sr *StateResource) error {
	addr := rc.Address()
	client, paddr, err := p.sess.provider(ctx, rc.ProviderKey)
	if err != nil {
		return err
	}
	ps, err := client.Schema(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	var schema *Schema
	if rc.Mode == "data" {
		schema, err = dataSchema(ps, rc.Type)
	} else {
		schema, err = resourceSchema(ps, rc.Type)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	ty := schema.Type()
	exp, err := expand(rc, p.ev)
	if err != nil {
		return err
	}
	priors := map[string]StateInstance{}
	var deposed []StateInstance
	if sr != nil {
		for _, in := range sr.Instances {
			if in.Deposed != "" {
				deposed = append(deposed, in)
				continue
			}
			priors[keyString(normalizeKey(in.IndexKey))] = in
		}
	}
	provider := paddr.StateString()
	if alias := providerAliasOf(rc.ProviderKey); alias != "" {
		provider += "." + alias
	}
	if sr != nil && sameProviderOtherHost(sr.Provider, provider) {
		// Keep the registry host the state already names (a state written by terraform says
		// registry.terraform.io), so the engines never fight over it.
		provider = sr.Provider
	}
	vals := map[string]cty.Value{}
	priorVals := map[string]cty.Value{}
	for _, key := range exp.keys {
		ks := keyString(key)
		c := &Change{Addr: addr + ks, Res: addr, Module: rc.Module, Mode: rc.Mode, Type: rc.Type, Name: rc.Name, Key: key,
			ProviderKey: rc.ProviderKey, Provider: provider, Each: exp.each, CreateBeforeDestroy: rc.CreateBeforeDestroy || p.forcedCBD[addr]}
		config, marked, err := p.ev.decodeInstance(schema.Block, rc, exp.instance(key), c.Addr)
		if err != nil {
			return err
		}
		p.noteSecrets(config, marked)
		if rc.Mode == "data" {
			delete(priors, ks)
			if err := client.ValidateDataResourceConfig(ctx, rc.Type, config); err != nil {
				return fmt.Errorf("%s: %w", c.Addr, err)
			}
			c.Prior = cty.NullVal(ty)
			if config.IsWhollyKnown() && !p.dependsOnChanges(rc) {
				v, err := client.ReadDataSource(ctx, rc.Type, config)
				if err != nil {
					return fmt.Errorf("%s: %w", c.Addr, err)
				}
				if err := p.ev.budget.provided(c.Addr+": data source result", v); err != nil {
					return err
				}
				c.Action, c.Planned = NoOp, v
			} else {
				c.Action, c.Planned = Read, cty.UnknownVal(ty)
			}
			c.Sensitive = schema.Block.SensitivePaths(c.Planned)
			p.noteSecrets(c.Planned, c.Sensitive)
			if err := p.postconditions(rc, exp.instance(key), c.Planned, c.Addr); err != nil {
				return err
			}
			vals[ks] = markSensitive(c.Planned, instanceSensitivePaths(schema, c.Planned, marked))
			p.add(c)
			continue
		}
		if err := p.sess.validate(ctx, client, paddr, rc.Type, config); err != nil {
			return fmt.Errorf("%s: %w", c.Addr, err)
		}
		prior := cty.NullVal(ty)
		replace := false
		var priorIn *StateInstance
		if in, ok := priors[ks]; ok {
			priorIn = &in
			delete(priors, ks)
			prior, c.PriorPrivate, err = p.priorObject(ctx, client, rc.Type, c.Addr, in)
			if err != nil {
				return err
			}
			c.Gone = prior.IsNull()
			if in.Status == "tainted" && !prior.IsNull() {
				replace, c.Reason = true, "the object is tainted"
			}
		} else if im := p.imports[c.Addr]; im != nil {
			if prior, c.PriorPrivate, err = p.importObject(ctx, client, rc.Type, c.Addr, im); err != nil {
				return err
			}
			c.ImportID = p.importIDs[c.Addr]
		}
		c.Prior = prior
		priorVals[ks] = prior
		if !replace && !prior.IsNull() {
			if c.Reason, err = p.triggered(rc, exp.instance(key), c.Addr); err != nil {
				return err
			}
			replace = c.Reason != ""
		}
		if err := planInstance(ctx, client, schema, rc, c, config, replace); err != nil {
			return err
		}
		if c.Action == Replace && c.Reason == "" {
			c.Reason = "changes to " + strings.Join(c.ReplacePaths, ", ") + " force replacement"
		}
		c.Marked = marked
		c.Sensitive = instanceSensitivePaths(schema, c.Planned, marked)
		if c.Action == NoOp && c.ImportID == "" && sensitivityChanged(schema, priorIn, c.Planned, c.Sensitive) {
			c.Action, c.Reason = Update, "attributes become sensitive or stop being sensitive"
		}
		if err := p.postconditions(rc, exp.instance(key), c.Planned, c.Addr); err != nil {
			return err
		}
		p.noteSecrets(c.Planned, c.Sensitive)
		if priorIn != nil {
			c.PriorSensitive = priorSensitivePaths(schema, c.Prior, *priorIn)
		} else {
			c.PriorSensitive = schema.Block.SensitivePaths(c.Prior)
		}
		p.noteSecrets(c.Prior, c.PriorSensitive)
		vals[ks] = markSensitive(c.Planned, c.Sensitive)
		p.add(c)
	}
	// Old objects left by an interrupted create-before-destroy replacement are deleted.
	for _, in := range deposed {
		c := &Change{Addr: addr + keyString(normalizeKey(in.IndexKey)) + " (deposed " + in.Deposed + ")", Res: addr, Module: rc.Module, Mode: rc.Mode,
			Type: rc.Type, Name: rc.Name, Key: normalizeKey(in.IndexKey), ProviderKey: rc.ProviderKey, Provider: provider,
			Each: exp.each, Action: Delete, Planned: cty.NullVal(ty), Deposed: in.Deposed}
		prior, priv, err := p.priorObject(ctx, client, rc.Type, c.Addr, in)
		if err != nil {
			return err
		}
		c.Prior, c.PriorPrivate = prior, priv
		c.PriorSensitive = priorSensitivePaths(schema, prior, in)
		p.noteSecrets(prior, c.PriorSensitive)
		if prior.IsNull() {
			c.Action = Forget
		}
		p.add(c)
	}
	for ks, in := range priors {
		c := &Change{Addr: addr + ks, Res: addr, Module: rc.Module, Mode: rc.Mode, Type: rc.Type, Name: rc.Name, Key: normalizeKey(in.IndexKey),
			ProviderKey: rc.ProviderKey, Provider: provider, Each: exp.each, Action: Delete, Planned: cty.NullVal(ty)}
		if rc.Mode == "data" {
			c.Action = Forget
			p.add(c)
			continue
		}
		prior, priv, err := p.priorObject(ctx, client, rc.Type, c.Addr, in)
		if err != nil {
			return err
		}
		c.Prior, c.PriorPrivate = prior, priv
		c.PriorSensitive = priorSensitivePaths(schema, prior, in)
		p.noteSecrets(prior, c.PriorSensitive)
		if prior.IsNull() {
			c.Action = Forget
		}
		p.add(c)
	}
	p.ev.set(addr, exp.assemble(vals, ty))
	p.priorEv.set(addr, exp.assemble(priorVals, ty))
	return nil
}

// triggered evaluates lifecycle.replace_triggered_by for one instance: a reason when a
// referenced resource or attribute changes in this plan (its planned value differs from its
// prior value, or is not known until apply), "" otherwise.
func (p *planner) triggered(rc *ResourceConfig, in instance, addr string) (string, error) {
	for _, x := range rc.ReplaceTriggeredBy {
		now, err := p.ev.eval(x, in, addr+": lifecycle.replace_triggered_by")
		if err != nil {
			return "", err
		}
		before, err := p.priorEv.eval(x, in, addr+": lifecycle.replace_triggered_by")
		if err != nil {
			return "", err
		}
		now, _ = now.UnmarkDeep()
		before, _ = before.UnmarkDeep()
		if !valuesEqual(now, before) {
			return fmt.Sprintf("replace_triggered_by %s changes", expressionText(x)), nil
		}
	}
	return "", nil
}

// postconditions checks lifecycle.postcondition with self as the planned (or applied) value;
// a condition not known until apply passes now and is checked again then.
func (p *planner) postconditions(rc *ResourceConfig, in instance, self cty.Value, addr string) error {
	if len(rc.Postconditions) == 0 {
		return nil
	}
	in.self = self
	return p.ev.checkRules(rc.Postconditions, in, addr+": postcondition")
}

// PreventDestroyError is a plan that would destroy or replace an instance whose resource has
// lifecycle.prevent_destroy set. Nothing is applied.
type PreventDestroyError struct {
	// Address is the instance; Reason why the plan destroys it.
	Address, Reason string
}

func (e *PreventDestroyError) Error() string {
	return fmt.Sprintf("%s: lifecycle.prevent_destroy is set, but the plan would destroy it (%s); remove prevent_destroy first to destroy it", e.Address, e.Reason)
}

// checkPreventDestroy fails the plan when it destroys or replaces a protected instance.
func (p *planner) checkPreventDestroy(destroy bool) error {
	byAddr := map[string]*ResourceConfig{}
	// An instance of a module instance that left its call's count or for_each is still
	// protected by its resource block (configuration address without instance keys).
	byConfig := map[string]*ResourceConfig{}
	for _, rc := range p.cfg.Resources {
		byAddr[rc.Address()] = rc
		if rc.PreventDestroy {
			byConfig[configAddress(rc.Address())] = rc
		}
	}
	var errs []error
	for _, c := range p.changes {
		if c.Deposed != "" || c.Action != Delete && c.Action != Replace {
			continue
		}
		rc := byAddr[c.Res]
		if rc == nil && !destroy && p.cfg.removedFor(c.Res) == nil {
			rc = byConfig[configAddress(c.Res)]
		}
		if !p.cfg.protected[configAddress(c.Res)] && (rc == nil || !rc.PreventDestroy) {
			continue
		}
		reason := c.Reason
		switch {
		case c.Action == Replace:
		case destroy:
			reason = "destroy of the whole configuration"
		default:
			reason = "its count or for_each no longer includes this instance"
		}
		errs = append(errs, &PreventDestroyError{Address: c.Addr, Reason: reason})
	}
	return errors.Join(errs...)
}

func providerAliasOf(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] == '.' {
			return key[i+1:]
		}
	}
	return ""
}

// planInstance asks the provider for a managed instance's plan and folds it into an action.
// With tainted (a tainted object, or replace_triggered_by) the instance is replaced.
func planInstance(ctx context.Context, client Client, schema *Schema, rc *ResourceConfig, c *Change, config cty.Value, tainted bool) error {
	ty := schema.Type()
	prior := c.Prior
	planPrior := prior
	if tainted {
		planPrior = cty.NullVal(ty)
	}
	cfg := applyIgnoreChanges(rc, planPrior, config)
	res, err := client.PlanResourceChange(ctx, rc.Type, planPrior, proposedNew(schema.Block, planPrior, cfg), config, c.PriorPrivate)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Addr, err)
	}
	switch {
	case prior.IsNull():
		c.Action = Create
	case tainted:
		c.Action = Replace
	default:
		rep := changedReplacePaths(res.RequiresReplace, prior, res.Planned)
		switch {
		case len(rep) > 0:
			c.Action = Replace
			for _, rp := range rep {
				c.ReplacePaths = append(c.ReplacePaths, pathString(rp))
			}
			null := cty.NullVal(ty)
			res, err = client.PlanResourceChange(ctx, rc.Type, null, proposedNew(schema.Block, null, config), config, nil)
			if err != nil {
				return fmt.Errorf("%s: plan replacement: %w", c.Addr, err)
			}
		case valuesEqual(prior, res.Planned):
			c.Action = NoOp
		default:
			c.Action = Update
		}
	}
	c.Planned, c.PlannedPrivate = res.Planned, res.PlannedPrivate
	if c.Action == NoOp {
		c.Planned = prior
	}
	return nil
}

// noteSecrets remembers the text of sensitive values, to redact them from errors.
func (p *planner) noteSecrets(v cty.Value, paths []cty.Path) {
	collectSecrets(v, paths, &p.mu, p.secrets)
}

func collectSecrets(v cty.Value, paths []cty.Path, mu *sync.Mutex, into map[string]bool) {
	if v == cty.NilVal || v.IsNull() || !v.IsKnown() || len(paths) == 0 {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range paths {
		sv, err := p.Apply(v)
		if err != nil || !sv.IsWhollyKnown() || sv.IsNull() {
			continue
		}
		if sv.Type() == cty.String {
			if s := sv.AsString(); s != "" {
				into[s] = true
			}
			continue
		}
		if b, err := ctyjson.Marshal(sv, sv.Type()); err == nil {
			into[string(b)] = true
		}
	}
}

// sameProviderOtherHost reports whether two state provider references name the same
// namespace/type (and alias) on possibly different registry hosts.
func sameProviderOtherHost(a, b string) bool {
	strip := func(s string) string {
		const pre = `provider["`
		if !strings.HasPrefix(s, pre) {
			return s
		}
		rest := s[len(pre):]
		if i := strings.IndexByte(rest, '/'); i >= 0 && strings.Count(rest[:strings.IndexByte(rest, '"')+1], "/") == 2 {
			return rest[i+1:]
		}
		return rest
	}
	return strip(a) == strip(b)
}

// evalImports evaluates the import blocks' ids (variables and locals only).
func (p *planner) evalImports() error {
	p.imports, p.importIDs = map[string]*ImportConfig{}, map[string]string{}
	for _, im := range p.cfg.Imports {
		if _, dup := p.imports[im.To]; dup {
			return fmt.Errorf("import: %s is the target of two import blocks", im.To)
		}
		v, err := p.ev.eval(im.ID, instance{}, "import "+im.To+": id")
		if err != nil {
			return err
		}
		// An import id is printed in plans and errors, so it cannot be sensitive (OpenTofu:
		// "Invalid import id argument").
		if hasMarkDeep(v, sensitiveMark) || hasMarkDeep(v, attributeSensitiveMark) {
			return fmt.Errorf("import %s: id is sensitive: an import id cannot be a sensitive value (it is shown in plans and errors)", im.To)
		}
		v, _ = v.UnmarkDeep()
		sv, err := convert.Convert(v, cty.String)
		if err != nil || !sv.IsKnown() || sv.IsNull() || sv.AsString() == "" {
			return fmt.Errorf("import %s: id must be a known, non-empty string", im.To)
		}
		p.imports[im.To], p.importIDs[im.To] = im, sv.AsString()
	}
	return nil
}

// importObject imports an instance that has no state yet (ImportResourceState, then a
// refresh), as tofu plan does for an import block.
func (p *planner) importObject(ctx context.Context, c Client, typ, addr string, _ *ImportConfig) (cty.Value, []byte, error) {
	id := p.importIDs[addr]
	v, priv, err := c.ImportResourceState(ctx, typ, id)
	if err != nil {
		return cty.NilVal, nil, fmt.Errorf("%s: import %q: %w", addr, id, err)
	}
	nv, npriv, err := c.ReadResource(ctx, typ, v, priv)
	if err != nil {
		return cty.NilVal, nil, fmt.Errorf("%s: import %q: %w", addr, id, err)
	}
	if nv.IsNull() {
		return cty.NilVal, nil, fmt.Errorf("%s: import %q: the object does not exist", addr, id)
	}
	if err := p.ev.budget.provided(addr+": imported object", nv); err != nil {
		return cty.NilVal, nil, err
	}
	return nv, npriv, nil
}

// checkImportTargets fails when an import block names an instance the configuration does
// not have (a count or for_each key it does not expand to).
func (p *planner) checkImportTargets() error {
	have := map[string]bool{}
	for _, c := range p.changes {
		have[c.Addr] = true
	}
	for _, to := range sortedKeys(p.imports) {
		if !have[to] {
			return fmt.Errorf("import: %s is not an instance of the configuration", to)
		}
	}
	return nil
}

// removedFor returns the removed block naming a state resource (its address without
// instance keys) or a module call holding it; nil when none does.
func (c *Config) removedFor(addr string) *RemovedConfig {
	ca := configAddress(addr)
	if r := c.Removed[ca]; r != nil {
		return r
	}
	for from, r := range c.Removed {
		if strings.HasPrefix(from, "module.") && strings.HasPrefix(ca, from+".") {
			return r
		}
	}
	return nil
}
