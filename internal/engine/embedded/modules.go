package embedded

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/lava-operator/lava/internal/engine"
	enginebundle "github.com/lava-operator/lava/internal/lang/bundle"
)

// maxModuleDepth bounds module nesting.
const maxModuleDepth = 16

// ModuleCall is one module block.
type ModuleCall struct {
	Name, Source string
	// Dir is the called module's directory in the bundle; Config the module, parsed.
	Dir    string
	Config *Config
	// Count and ForEach are the meta-arguments (nil when absent).
	Count, ForEach hcl.Expression
	// Args are the input variables' values, by name.
	Args map[string]*hcl.Attribute
	// DependsOn are explicit dependencies (addresses in the calling module).
	DependsOn []string
}

var moduleMetaSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "source", Required: true}, {Name: "version"}, {Name: "count"}, {Name: "for_each"},
	{Name: "depends_on"}, {Name: "providers"}}}

func (c *Config) parseModuleCall(blk *hcl.Block, bundle map[string][]byte, stack []string) error {
	name := blk.Labels[0]
	where := "module." + name
	if !validName(name) {
		return fmt.Errorf("%s: invalid module name", where)
	}
	content, rest, diags := blk.Body.PartialContent(moduleMetaSchema)
	if diags.HasErrors() {
		return diagError(where, diags)
	}
	src, err := staticString(content.Attributes["source"].Expr)
	if err != nil {
		return fmt.Errorf("%s: source: %w", where, err)
	}
	for _, k := range []string{"version", "providers"} {
		if a, ok := content.Attributes[k]; ok {
			return fmt.Errorf("%s: %s: %s is not supported by the embedded engine (modules are bundled and inherit the root's providers)", rangeText(a.Range), where, k)
		}
	}
	if !enginebundle.IsLocal(src) {
		return fmt.Errorf("%s: %s: the source %q is not a bundled module: the embedded engine loads only modules bundled in the configuration (a local path such as ./modules/NAME); remote sources are refused", rangeText(content.Attributes["source"].Range), where, src)
	}
	dir, err := enginebundle.Resolve(c.Dir, src)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	body, ok := bundle[dir]
	if !ok {
		return fmt.Errorf("%s: source %q: no module %q is bundled with the configuration (the embedded engine never reads modules from disk)", where, src, dir)
	}
	for _, s := range stack {
		if s == dir {
			return fmt.Errorf("%s: module %s calls itself", where, dir)
		}
	}
	if len(stack) > maxModuleDepth {
		return fmt.Errorf("%s: modules nest deeper than %d", where, maxModuleDepth)
	}
	child, err := parseModule(body, dir, bundle, stack)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	mc := &ModuleCall{Name: name, Source: src, Dir: dir, Config: child}
	if a, ok := content.Attributes["count"]; ok {
		mc.Count = a.Expr
	}
	if a, ok := content.Attributes["for_each"]; ok {
		mc.ForEach = a.Expr
	}
	if mc.Count != nil && mc.ForEach != nil {
		return fmt.Errorf("%s: count and for_each cannot both be set", where)
	}
	if a, ok := content.Attributes["depends_on"]; ok {
		trs, err := traversalList(a.Expr)
		if err != nil {
			return fmt.Errorf("%s: depends_on: %w", where, err)
		}
		for _, tr := range trs {
			mc.DependsOn = append(mc.DependsOn, stripIndex(traversalText(tr)))
		}
	}
	if mc.Args, diags = rest.JustAttributes(); diags.HasErrors() {
		return diagError(where, diags)
	}
	for arg, a := range mc.Args {
		if _, ok := child.Variables[arg]; !ok {
			return fmt.Errorf("%s: %s: module %s has no variable %q", rangeText(a.NameRange), where, dir, arg)
		}
	}
	for vn, v := range child.Variables {
		if _, ok := mc.Args[vn]; !ok && v.Default == cty.NilVal {
			return fmt.Errorf("%s: the module's variable %q has no default and is not set", where, vn)
		}
	}
	if c.Modules == nil {
		c.Modules = map[string]*ModuleCall{}
	}
	if _, dup := c.Modules[name]; dup {
		return fmt.Errorf("%s declared twice", where)
	}
	c.Modules[name] = mc
	return nil
}

// CheckConfig is one check block: its assertions fail as warnings, never the plan (as in
// tofu).
type CheckConfig struct {
	Name    string
	Asserts []*CheckRule
}

var checkSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "assert"}, {Type: "data", LabelNames: []string{"type", "name"}}}}

func (c *Config) parseCheck(blk *hcl.Block) error {
	name := blk.Labels[0]
	where := "check." + name
	content, diags := blk.Body.Content(checkSchema)
	if diags.HasErrors() {
		return diagError(where, diags)
	}
	ck := &CheckConfig{Name: name}
	for _, b := range content.Blocks {
		if b.Type == "data" {
			return fmt.Errorf("%s: %s: a scoped data source in a check block is not supported by the embedded engine (declare the data source outside the check)", rangeText(b.DefRange), where)
		}
		r, err := parseCheckRule(b, where+": assert")
		if err != nil {
			return err
		}
		ck.Asserts = append(ck.Asserts, r)
	}
	if len(ck.Asserts) == 0 {
		return fmt.Errorf("%s: a check block needs at least one assert", where)
	}
	for _, o := range c.Checks {
		if o.Name == name {
			return fmt.Errorf("%s declared twice", where)
		}
	}
	c.Checks = append(c.Checks, ck)
	return nil
}

// modScope is one module instance of a flattened configuration.
type modScope struct {
	// path is the instance's address (`module.a["k"]`; "" for the root).
	path string
	cfg  *Config
	// parent is the calling instance and call the module block (nil for the root); in is
	// what count.index and each mean in the call's arguments.
	parent *modScope
	call   *ModuleCall
	in     instance
	// children are the instances of each module call, in key order; childExp their
	// expansions.
	children map[string][]*modScope
	childExp map[string]expansion
}

// prefix is what the instance's addresses start with ("" or `module.a["k"].`).
func (s *modScope) prefix() string {
	if s.path == "" {
		return ""
	}
	return s.path + "."
}

// dir is path.module of the instance ("." for the root, "modules/net").
func (s *modScope) dir() string {
	if s.cfg.Dir == "" {
		return "."
	}
	return s.cfg.Dir
}

// flatten expands cfg's module calls (their count and for_each evaluated with ev, which
// must have its variables set) into one configuration: every resource of every module
// instance with its module path and scope, the root's variables, locals, outputs and
// provider blocks, the modules' provider requirements where the root names none. cfg is
// not changed.
func flatten(cfg *Config, ev *evalState) (*Config, error) {
	flat := *cfg
	flat.Resources = nil
	flat.Requirements = map[string]ProviderRequirement{}
	for k, v := range cfg.Requirements {
		flat.Requirements[k] = v
	}
	root := &modScope{cfg: cfg}
	flat.root = root
	ev.root = root
	var scopes []*modScope
	var build func(s *modScope, depth int) error
	build = func(s *modScope, depth int) error {
		scopes = append(scopes, s)
		for _, rc := range s.cfg.Resources {
			cp := *rc
			cp.Module, cp.scope = s.path, s
			flat.Resources = append(flat.Resources, &cp)
		}
		for k, v := range s.cfg.Requirements {
			if _, ok := flat.Requirements[k]; !ok {
				flat.Requirements[k] = v
			}
		}
		s.children, s.childExp = map[string][]*modScope{}, map[string]expansion{}
		for _, name := range sortedKeys(s.cfg.Modules) {
			mc := s.cfg.Modules[name]
			where := s.prefix() + "module." + name
			pseudo := &ResourceConfig{Type: "module", Name: name, Count: mc.Count, ForEach: mc.ForEach, Module: s.path, scope: s}
			exp, err := expandIn(pseudo, ev, where)
			if err != nil {
				return fmt.Errorf("%w (the embedded engine expands modules before planning: their count and for_each may refer only to variables and locals known then)", err)
			}
			s.childExp[name] = exp
			for _, key := range exp.keys {
				in := exp.instance(key)
				in.scope = s
				ch := &modScope{path: where + keyString(key), cfg: mc.Config, parent: s, call: mc, in: in}
				s.children[name] = append(s.children[name], ch)
				if err := build(ch, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := build(root, 0); err != nil {
		return nil, err
	}
	sort.Slice(flat.Resources, func(i, j int) bool { return flat.Resources[i].Address() < flat.Resources[j].Address() })
	if err := checkMovesAndRemoved(&flat); err != nil {
		return nil, err
	}
	return &flat, nil
}

// checkMovesAndRemoved checks moved and removed blocks that name modules or instances
// against the expanded configuration: a moved resource's from is no longer declared and its
// to is; a removed address is not declared.
func checkMovesAndRemoved(flat *Config) error {
	declared := map[string]bool{}
	for _, rc := range flat.Resources {
		declared[configAddress(rc.Address())] = true
	}
	for _, m := range flat.Moves {
		from, _ := parseAddrString(m.From)
		to, _ := parseAddrString(m.To)
		if from.Res == "" || from.HasKey || to.HasKey {
			continue
		}
		if declared[configAddress(m.From)] {
			return fmt.Errorf("moved: %s is still declared: a moved block's from must no longer be in the configuration", m.From)
		}
		if !declared[configAddress(m.To)] {
			return fmt.Errorf("moved: %s is not declared: a moved block's to must be in the configuration", m.To)
		}
	}
	for from := range flat.Removed {
		if declared[from] {
			return fmt.Errorf("removed: %s is still declared: remove its block too", from)
		}
	}
	return nil
}

// varOf returns var.NAME in module instance s: its call's argument (evaluated in the
// calling instance) or its default, converted to its type, validated and marked sensitive as
// declared. Each variable is evaluated on its own, as in tofu, so a resource reading one
// variable does not wait for the others' references.
func (e *evalState) varOf(s *modScope, name string, depth int) (cty.Value, error) {
	key := s.path + "|" + name
	e.mu.RLock()
	v, ok := e.modVars[key]
	e.mu.RUnlock()
	if ok {
		return v, nil
	}
	vc := s.cfg.Variables[name]
	where := s.path + ": var." + name
	if vc == nil {
		return cty.NilVal, fmt.Errorf("%s: reference to undeclared input variable", where)
	}
	if depth > 64 {
		return cty.NilVal, fmt.Errorf("%s: variables nest too deep (a cycle?)", where)
	}
	val := vc.Default
	if a, ok := s.call.Args[name]; ok {
		ctx, err := e.ctxDepth(a.Expr.Variables(), s.in, depth+1)
		if err != nil {
			return cty.NilVal, fmt.Errorf("%s: %w", where, err)
		}
		x, diags := exprValue(a.Expr, ctx)
		if diags.HasErrors() {
			return cty.NilVal, diagError(where, diags)
		}
		if b := budgetOf(ctx); b != nil && x != cty.NilVal {
			// Under the budget, as a function's parameter: go-cty's conversion of a tuple of
			// mixed types or a set of numbers that hash alike costs the square of its elements.
			if x, err = b.convertible(where, x, vc.Type); err != nil {
				return cty.NilVal, err
			}
		}
		val = x
	}
	if val == cty.NilVal {
		return cty.NilVal, fmt.Errorf("%s: not set and without a default", where)
	}
	if vc.Defaults != nil && !val.IsNull() {
		val = vc.Defaults.Apply(val)
	}
	cv, err := convert.Convert(val, vc.Type)
	if err != nil {
		return cty.NilVal, fmt.Errorf("%s: want %s: %s", where, vc.Type.FriendlyName(), convertErrText(val, err))
	}
	if cv.IsNull() && !vc.Nullable {
		if vc.Default == cty.NilVal || vc.Default.IsNull() {
			return cty.NilVal, fmt.Errorf("%s: null is not allowed (nullable = false)", where)
		}
		cv = vc.Default
	}
	for _, r := range vc.Validations {
		ctx := &hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{name: cv})}, Functions: e.funcs}
		if err := checkRule(r, ctx, where+": validation"); err != nil {
			return cty.NilVal, err
		}
	}
	if vc.Sensitive {
		cv = cv.Mark(sensitiveMark)
	}
	if cv.IsWhollyKnown() {
		e.mu.Lock()
		e.modVars[key] = cv
		e.mu.Unlock()
	}
	return cv, nil
}

// moduleOutputs returns which outputs of module call name the references read (nil: all,
// for a reference to the whole module).
func moduleOutputs(refs []hcl.Traversal) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, tr := range refs {
		if tr.RootName() != "module" {
			continue
		}
		name, ok := attrStep(tr, 1)
		if !ok {
			continue
		}
		i := 2
		if i < len(tr) {
			if _, isIdx := tr[i].(hcl.TraverseIndex); isIdx {
				i++
			}
		}
		o, ok := attrStep(tr, i)
		if _, seen := out[name]; seen && out[name] == nil {
			continue
		}
		if !ok {
			out[name] = nil
			continue
		}
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		out[name][o] = true
	}
	return out
}

// moduleValue is module.NAME in scope s: an object of the named outputs (all when outs is
// nil), a tuple of them for count, an object of them by key for for_each.
func (e *evalState) moduleValue(s *modScope, name string, outs map[string]bool, depth int) (cty.Value, error) {
	mc := s.cfg.Modules[name]
	if mc == nil {
		return cty.NilVal, fmt.Errorf("reference to undeclared module %s", s.prefix()+"module."+name)
	}
	if depth > 64 {
		return cty.NilVal, fmt.Errorf("module.%s: outputs nest too deep (a cycle?)", name)
	}
	names := sortedKeys(mc.Config.Outputs)
	if outs != nil {
		names = sortedKeys(outs)
	}
	vals := map[string]cty.Value{}
	for _, ch := range s.children[name] {
		obj := map[string]cty.Value{}
		for _, o := range names {
			oc := mc.Config.Outputs[o]
			if oc == nil {
				return cty.NilVal, fmt.Errorf("module %s has no output %q", ch.path, o)
			}
			v, err := e.outputIn(ch, o, oc, depth+1)
			if err != nil {
				return cty.NilVal, err
			}
			obj[o] = v
		}
		vals[ch.path] = cty.ObjectVal(obj)
	}
	exp := s.childExp[name]
	switch exp.each {
	case "list":
		if len(exp.keys) == 0 {
			return cty.EmptyTupleVal, nil
		}
		out := make([]cty.Value, 0, len(exp.keys))
		for _, ch := range s.children[name] {
			out = append(out, vals[ch.path])
		}
		return cty.TupleVal(out), nil
	case "map":
		out := map[string]cty.Value{}
		for i, k := range exp.keys {
			out[k.(string)] = vals[s.children[name][i].path]
		}
		return cty.ObjectVal(out), nil
	}
	return vals[s.children[name][0].path], nil
}

// outputIn evaluates one output of a module instance (its preconditions first); a sensitive
// output's value is marked sensitive.
func (e *evalState) outputIn(s *modScope, name string, o *OutputConfig, depth int) (cty.Value, error) {
	where := s.path + ": output " + name
	in := instance{scope: s}
	for _, r := range o.Preconditions {
		refs := append(r.Condition.Variables(), r.ErrorMessage.Variables()...)
		ctx, err := e.ctxDepth(refs, in, depth+1)
		if err != nil {
			return cty.NilVal, fmt.Errorf("%s: %w", where, err)
		}
		if err := checkRule(r, ctx, where+": precondition"); err != nil {
			return cty.NilVal, err
		}
	}
	ctx, err := e.ctxDepth(o.Value.Variables(), in, depth+1)
	if err != nil {
		return cty.NilVal, fmt.Errorf("%s: %w", where, err)
	}
	v, diags := exprValue(o.Value, ctx)
	if diags.HasErrors() {
		return cty.NilVal, diagError(where, diags)
	}
	if v.ContainsMarked() && !o.Sensitive {
		return cty.NilVal, fmt.Errorf("%s: output refers to sensitive values: set sensitive = true on the output", where)
	}
	if o.Sensitive {
		v = v.Mark(sensitiveMark)
	}
	return v, nil
}

// scopeDeps resolves what the configuration's references depend on, module instance by
// module instance: resource addresses with their module paths.
type scopeDeps struct {
	declared map[string]bool
	memo     map[string][]string
}

func (d *scopeDeps) resolve(refs []hcl.Traversal, s *modScope, stack []string, set map[string]bool) error {
	for _, tr := range refs {
		root := tr.RootName()
		switch root {
		case "count", "each", "self", "path", "terraform":
			continue
		case "module":
			name, ok := attrStep(tr, 1)
			if !ok {
				return refError(tr, "want module.NAME")
			}
			mc := s.cfg.Modules[name]
			if mc == nil {
				return refError(tr, "reference to undeclared module "+s.prefix()+"module."+name)
			}
			outs := moduleOutputs([]hcl.Traversal{tr})[name]
			names := sortedKeys(mc.Config.Outputs)
			if outs != nil {
				names = sortedKeys(outs)
			}
			for _, ch := range s.children[name] {
				for _, o := range names {
					oc := mc.Config.Outputs[o]
					if oc == nil {
						return refError(tr, fmt.Sprintf("module %s has no output %q", mc.Dir, o))
					}
					_, err := d.memoized(ch.path+"|output."+o, stack, set, func(st []string, into map[string]bool) error {
						r := oc.Value.Variables()
						for _, pc := range oc.Preconditions {
							r = append(r, pc.Condition.Variables()...)
							r = append(r, pc.ErrorMessage.Variables()...)
						}
						return d.resolve(r, ch, st, into)
					})
					if err != nil {
						return err
					}
				}
			}
		case "var":
			name, ok := attrStep(tr, 1)
			if !ok {
				return refError(tr, "want var.NAME")
			}
			if _, ok := s.cfg.Variables[name]; !ok {
				return refError(tr, "reference to undeclared input variable var."+name)
			}
			if s.parent == nil {
				continue
			}
			a, ok := s.call.Args[name]
			if !ok {
				continue
			}
			if _, err := d.memoized(s.path+"|var."+name, stack, set, func(st []string, into map[string]bool) error {
				return d.resolve(a.Expr.Variables(), s.parent, st, into)
			}); err != nil {
				return err
			}
		case "local":
			name, ok := attrStep(tr, 1)
			if !ok {
				return refError(tr, "want local.NAME")
			}
			x, ok := s.cfg.Locals[name]
			if !ok {
				return refError(tr, "local."+name+" is not declared")
			}
			for _, t := range x.Variables() {
				switch t.RootName() {
				case "count", "each", "self":
					return fmt.Errorf("local.%s: %s", name, refError(t, "is not valid in a local"))
				}
			}
			if _, err := d.memoized(s.path+"|local."+name, stack, set, func(st []string, into map[string]bool) error {
				if err := d.resolve(x.Variables(), s, st, into); err != nil {
					return fmt.Errorf("local.%s: %w", name, err)
				}
				return nil
			}); err != nil {
				return err
			}
		default:
			a, err := refAddress(tr)
			if err != nil {
				return err
			}
			a = s.prefix() + a
			if !d.declared[a] {
				return refError(tr, "reference to undeclared resource "+a)
			}
			set[a] = true
		}
	}
	return nil
}

// memoized resolves one named node (a local, a module variable, a module output) once,
// adding its dependencies to set; a node met again on its own stack is a cycle.
func (d *scopeDeps) memoized(key string, stack []string, set map[string]bool, fn func([]string, map[string]bool) error) ([]string, error) {
	if deps, ok := d.memo[key]; ok {
		for _, x := range deps {
			set[x] = true
		}
		return deps, nil
	}
	for _, s := range stack {
		if s == key {
			return nil, fmt.Errorf("references form a cycle: %s", strings.ReplaceAll(strings.Join(append(stack, key), " -> "), "|", ": "))
		}
	}
	into := map[string]bool{}
	if err := fn(append(stack, key), into); err != nil {
		return nil, err
	}
	deps := setKeys(into)
	d.memo[key] = deps
	for _, x := range deps {
		set[x] = true
	}
	return deps, nil
}

// dependsOn resolves a depends_on entry in scope s: a resource, or every resource of a
// module call ("module.NAME").
func (d *scopeDeps) dependsOn(entry string, s *modScope, set map[string]bool) error {
	if name, ok := strings.CutPrefix(entry, "module."); ok {
		if s.cfg.Modules[name] == nil {
			return fmt.Errorf("depends_on names undeclared %s", s.prefix()+entry)
		}
		for _, ch := range s.children[name] {
			for a := range d.declared {
				if strings.HasPrefix(a, ch.path+".") {
					set[a] = true
				}
			}
		}
		return nil
	}
	a := s.prefix() + entry
	if !d.declared[a] {
		return fmt.Errorf("depends_on names undeclared %s", a)
	}
	set[a] = true
	return nil
}

// CheckResult is the outcome of one check block instance: "pass", "fail" (Messages holds
// each failed assertion's error_message) or "unknown" (a condition known only after apply).
// A failed check is a warning: it never fails the plan or the apply, as in tofu.
type CheckResult struct {
	// Config is the check's configuration address ("module.n.check.c"), Object its
	// instance's ("module.n[0].check.c").
	Config, Object string
	Status         string
	Messages       []string
}

// checks evaluates every check block of every module instance, in address order.
func (e *evalState) checks() []CheckResult {
	var out []CheckResult
	var visit func(s *modScope)
	visit = func(s *modScope) {
		for _, ck := range s.cfg.Checks {
			res := CheckResult{Object: s.prefix() + "check." + ck.Name, Status: "pass"}
			steps, _ := parseModulePath(s.path)
			for i := range steps {
				steps[i].Key, steps[i].HasKey = nil, false
			}
			res.Config = "check." + ck.Name
			if len(steps) > 0 {
				res.Config = modulePath(steps) + "." + res.Config
			}
			for i, r := range ck.Asserts {
				where := fmt.Sprintf("%s: assert[%d]", res.Object, i)
				refs := append(r.Condition.Variables(), r.ErrorMessage.Variables()...)
				ctx, err := e.ctx(refs, instance{scope: s})
				if err == nil {
					var cv cty.Value
					cv, diags := exprValue(r.Condition, ctx)
					if diags.HasErrors() {
						err = diagError(where, diags)
					} else if cv, _ = cv.Unmark(); !cv.IsKnown() {
						if res.Status == "pass" {
							res.Status = "unknown"
						}
						continue
					}
				}
				if err != nil {
					res.Status = "fail"
					res.Messages = append(res.Messages, err.Error())
					continue
				}
				if err := checkRule(r, ctx, where); err != nil {
					res.Status = "fail"
					var cf *CheckFailedError
					if errors.As(err, &cf) {
						res.Messages = append(res.Messages, cf.Message)
					} else {
						res.Messages = append(res.Messages, err.Error())
					}
				}
			}
			out = append(out, res)
		}
		for _, name := range sortedKeys(s.children) {
			for _, ch := range s.children[name] {
				visit(ch)
			}
		}
	}
	visit(e.root)
	return out
}

// maxCheckMessages bounds the failure messages one check keeps (one per failed assertion):
// the plan's warnings, the log and the state's check_results show at most this many, then
// how many more there were.
const maxCheckMessages = 8

// settleChecks bounds results' failure messages before anything shows or stores them: each
// is redacted with the operation's secrets (the values of its sensitive configuration, taken
// under mu), then cut to [engine.MaxWarningLen] bytes; a check keeps [maxCheckMessages] of
// them and a last one counting the rest. A message is an expression's value (an assertion's
// error_message), as large as the evaluation budget lets it be, and may hold a copy of a
// sensitive value the configuration lost the mark of (a terraform_data output).
func settleChecks(results []CheckResult, secrets map[string]bool, mu *sync.Mutex) {
	var red *engine.Redactor
	for i := range results {
		ms := results[i].Messages
		if len(ms) == 0 {
			continue
		}
		if red == nil {
			mu.Lock()
			vals := setKeys(secrets)
			mu.Unlock()
			if err := engine.CheckSecretBytes(vals); err != nil {
				// No redactor is built over them (the operation fails on them after the plan).
				results[i].Messages = []string{"(not shown: " + err.Error() + ")"}
				continue
			}
			red = engine.NewRedactor(vals...)
		}
		if len(ms) > maxCheckMessages {
			ms = append(ms[:maxCheckMessages:maxCheckMessages], fmt.Sprintf("(%d more failed assertions)", len(ms)-maxCheckMessages))
		}
		for j, m := range ms {
			ms[j] = engine.Cut(red.Redact(m))
		}
		results[i].Messages = ms
	}
}

// checkResultsJSON renders check results as tofu writes them in state ("check_results"):
// one entry per check configuration with its instances; nil when there are none.
func checkResultsJSON(results []CheckResult) json.RawMessage {
	if len(results) == 0 {
		return nil
	}
	type object struct {
		ObjectAddr      string   `json:"object_addr"`
		Status          string   `json:"status"`
		FailureMessages []string `json:"failure_messages,omitempty"`
	}
	type entry struct {
		ObjectKind string   `json:"object_kind"`
		ConfigAddr string   `json:"config_addr"`
		Status     string   `json:"status"`
		Objects    []object `json:"objects"`
	}
	var out []*entry
	byConfig := map[string]*entry{}
	rank := map[string]int{"pass": 0, "unknown": 1, "fail": 2}
	for _, r := range results {
		en := byConfig[r.Config]
		if en == nil {
			en = &entry{ObjectKind: "check", ConfigAddr: r.Config, Status: "pass"}
			byConfig[r.Config] = en
			out = append(out, en)
		}
		if rank[r.Status] > rank[en.Status] {
			en.Status = r.Status
		}
		en.Objects = append(en.Objects, object{ObjectAddr: r.Object, Status: r.Status, FailureMessages: r.Messages})
	}
	b, _ := json.Marshal(out)
	return b
}

// logChecks reports failed checks as warnings (addresses and error messages only).
func logChecks(log *slog.Logger, step string, results []CheckResult) {
	for _, r := range results {
		if r.Status == "fail" {
			log.Warn("check block assertion failed", slog.String("step", step), slog.String("check", r.Object), slog.String("message", strings.Join(r.Messages, "; ")))
		}
	}
}
