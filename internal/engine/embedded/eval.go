package embedded

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/lava-operator/lava/internal/lang/hclnest"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
)

// evalState holds the values references resolve to during one plan or apply: each resource's
// value (an object, a tuple of objects for count, an object of objects for for_each), the
// locals and the input variables. Expressions are evaluated by hcl/v2 in an [hcl.EvalContext]
// built from the references each expression holds ([hcl.Expression.Variables]).
type evalState struct {
	cfg *Config
	// budget bounds the evaluation; funcs is its function table.
	budget *budget
	funcs  map[string]function.Function

	// root is the module instance tree (a flattened configuration's; the root alone
	// otherwise).
	root *modScope

	mu     sync.RWMutex
	values map[string]cty.Value
	// locals are keyed by module instance path and name ("|name" in the root), once wholly
	// known; unknownLocals the others, each with the sets it was evaluated after: valid until
	// the next [evalState.set], which may make it known.
	locals        map[string]cty.Value
	unknownLocals map[string]unknownLocal
	sets          uint64
	vars          cty.Value
	// modVars are the module instances' var objects, by path, once wholly known.
	modVars map[string]cty.Value
	// pathVal and tfVal are path.* and terraform.*.
	pathVal, tfVal cty.Value
}

// workingDir is the process's working directory (path.cwd), read once: nothing in Lava changes
// it.
var workingDir = sync.OnceValue(func() string {
	cwd, _ := os.Getwd()
	return cwd
})

// newEvalState returns the evaluation state of cfg, whose expressions evaluate under b (its
// function table, [budget.functions]).
func newEvalState(cfg *Config, b *budget) *evalState {
	root := cfg.root
	if root == nil {
		root = &modScope{cfg: cfg}
	}
	return &evalState{cfg: cfg, budget: b, funcs: b.functions(), root: root, values: map[string]cty.Value{}, locals: map[string]cty.Value{},
		unknownLocals: map[string]unknownLocal{},
		modVars:       map[string]cty.Value{},
		vars:          cty.EmptyObjectVal,
		pathVal:       cty.ObjectVal(map[string]cty.Value{"module": cty.StringVal("."), "root": cty.StringVal("."), "cwd": cty.StringVal(workingDir())}),
		tfVal:         cty.ObjectVal(map[string]cty.Value{"workspace": cty.StringVal("default")}),
	}
}

func (e *evalState) set(addr string, v cty.Value) {
	e.mu.Lock()
	e.values[addr] = v
	e.sets++
	e.mu.Unlock()
}

// unknownLocal is a local's value that is not wholly known, and the count of sets it was
// evaluated after.
type unknownLocal struct {
	v    cty.Value
	sets uint64
}

// instance is what count.index, each.key, each.value and self mean in one evaluation
// (cty.NilVal: not available).
type instance struct {
	// scope is the module instance the expression is in (nil: the root).
	scope              *modScope
	countIndex         cty.Value
	eachKey, eachValue cty.Value
	self               cty.Value
}

// ctx returns the evaluation context for expressions holding refs.
func (e *evalState) ctx(refs []hcl.Traversal, in instance) (*hcl.EvalContext, error) {
	return e.ctxDepth(refs, in, 0)
}

// ctxDepth returns the evaluation context for expressions holding refs, made in the instance
// in; depth is the nesting of locals and module values being evaluated, which bounds cycles.
// Errors name the reference that is malformed, not valid where it is made, or undeclared or
// unevaluated.
func (e *evalState) ctxDepth(refs []hcl.Traversal, in instance, depth int) (*hcl.EvalContext, error) {
	sc := in.scope
	if sc == nil {
		sc = e.root
	}
	b := &ctxBuilder{
		e: e, in: in, sc: sc, prefix: sc.prefix(), outs: moduleOutputs(refs), depth: depth,
		vars:      map[string]cty.Value{},
		resources: map[string]map[string]cty.Value{},
		data:      map[string]map[string]cty.Value{},
		locals:    map[string]cty.Value{},
		modules:   map[string]cty.Value{},
		modVars:   map[string]cty.Value{},
	}
	for _, tr := range refs {
		if err := b.add(tr); err != nil {
			return nil, err
		}
	}
	return &hcl.EvalContext{Variables: b.variables(), Functions: e.funcs}, nil
}

// ctxBuilder gathers the values of one evaluation context's references ([evalState.ctxDepth]):
// where they are made, and what they resolve to so far, by namespace.
type ctxBuilder struct {
	e  *evalState
	in instance
	// sc is the module instance the references are made in (never nil), prefix its address
	// prefix ([modScope.prefix]).
	sc     *modScope
	prefix string
	// outs are the module outputs the references read, by module name ([moduleOutputs]).
	outs  map[string]map[string]bool
	depth int

	// vars are the top-level variables set directly (count, each, self, path, terraform, and
	// var in the root); the others are keyed by name (resources and data by type, then name).
	vars                     map[string]cty.Value
	resources, data          map[string]map[string]cty.Value
	locals, modules, modVars map[string]cty.Value
}

// add resolves the reference tr into b. Errors name tr when it is malformed, not valid in b's
// instance, or refers to something undeclared or unevaluated.
func (b *ctxBuilder) add(tr hcl.Traversal) error {
	switch root := tr.RootName(); root {
	case "count", "each", "self":
		return b.addInstance(tr, root)
	case "path":
		if b.sc.parent == nil {
			b.vars["path"] = b.e.pathVal
		} else {
			b.vars["path"] = cty.ObjectVal(map[string]cty.Value{"module": cty.StringVal(b.sc.dir()),
				"root": b.e.pathVal.GetAttr("root"), "cwd": b.e.pathVal.GetAttr("cwd")})
		}
	case "terraform":
		b.vars["terraform"] = b.e.tfVal
	case "var":
		return b.addVar(tr)
	case "local":
		return b.addLocal(tr)
	case "module":
		return b.addModule(tr)
	case "data":
		return b.addData(tr)
	default:
		return b.addResource(tr, root)
	}
	return nil
}

// addInstance resolves tr, rooted at count, each or self (root), from b's instance. It is an
// error when the instance has no such value.
func (b *ctxBuilder) addInstance(tr hcl.Traversal, root string) error {
	switch root {
	case "count":
		if b.in.countIndex == cty.NilVal {
			return refError(tr, "count.index is only valid in a resource or module with count")
		}
		b.vars["count"] = cty.ObjectVal(map[string]cty.Value{"index": b.in.countIndex})
	case "each":
		if b.in.eachKey == cty.NilVal {
			return refError(tr, "each is only valid in a resource or module with for_each")
		}
		b.vars["each"] = cty.ObjectVal(map[string]cty.Value{"key": b.in.eachKey, "value": b.in.eachValue})
	case "self":
		if b.in.self == cty.NilVal {
			return refError(tr, "self is only valid in a postcondition")
		}
		b.vars["self"] = b.in.self
	}
	return nil
}

// addVar resolves tr, a var.NAME reference: in the root, to all the input variables; in a
// module instance, to the variable NAME ([evalState.varOf]), whose errors it returns.
func (b *ctxBuilder) addVar(tr hcl.Traversal) error {
	if b.sc.parent == nil {
		b.e.mu.RLock()
		b.vars["var"] = b.e.vars
		b.e.mu.RUnlock()
		return nil
	}
	name, ok := attrStep(tr, 1)
	if !ok {
		return refError(tr, "want var.NAME")
	}
	v, err := b.e.varOf(b.sc, name, b.depth)
	if err != nil {
		return err
	}
	b.modVars[name] = v
	return nil
}

// addLocal resolves tr, a local.NAME reference ([evalState.local]), whose errors it returns.
func (b *ctxBuilder) addLocal(tr hcl.Traversal) error {
	name, ok := attrStep(tr, 1)
	if !ok {
		return refError(tr, "want local.NAME")
	}
	v, err := b.e.local(b.sc, name, b.depth)
	if err != nil {
		return err
	}
	b.locals[name] = v
	return nil
}

// addModule resolves tr, a module.NAME reference, to the module's value holding the outputs
// the context's references read ([evalState.moduleValue]), once per module. Errors name tr.
func (b *ctxBuilder) addModule(tr hcl.Traversal) error {
	name, ok := attrStep(tr, 1)
	if !ok {
		return refError(tr, "want module.NAME")
	}
	if _, done := b.modules[name]; done {
		return nil
	}
	v, err := b.e.moduleValue(b.sc, name, b.outs[name], b.depth)
	if err != nil {
		return refError(tr, err.Error())
	}
	b.modules[name] = v
	return nil
}

// addData resolves tr, a data.TYPE.NAME reference, to the data source's value. Errors name
// tr, and say when the data source is undeclared or not yet evaluated.
func (b *ctxBuilder) addData(tr hcl.Traversal) error {
	typ, ok1 := attrStep(tr, 1)
	name, ok2 := attrStep(tr, 2)
	if !ok1 || !ok2 {
		return refError(tr, "want data.TYPE.NAME")
	}
	v, err := b.e.resource(b.prefix + "data." + typ + "." + name)
	if err != nil {
		return refError(tr, err.Error())
	}
	if b.data[typ] == nil {
		b.data[typ] = map[string]cty.Value{}
	}
	b.data[typ][name] = v
	return nil
}

// addResource resolves tr, a TYPE.NAME reference whose type is root, to the resource's
// value. Errors name tr, and say when the resource is undeclared or not yet evaluated.
func (b *ctxBuilder) addResource(tr hcl.Traversal, root string) error {
	name, ok := attrStep(tr, 1)
	if !ok {
		return refError(tr, "want TYPE.NAME")
	}
	v, err := b.e.resource(b.prefix + root + "." + name)
	if err != nil {
		return refError(tr, err.Error())
	}
	if b.resources[root] == nil {
		b.resources[root] = map[string]cty.Value{}
	}
	b.resources[root][name] = v
	return nil
}

// variables returns the context's variables: those set directly, and one object per
// namespace holding the references resolved in it (resources, data, local, module, and var
// in a module instance).
func (b *ctxBuilder) variables() map[string]cty.Value {
	vars := b.vars
	for typ, byName := range b.resources {
		vars[typ] = cty.ObjectVal(byName)
	}
	if len(b.data) > 0 {
		d := map[string]cty.Value{}
		for typ, byName := range b.data {
			d[typ] = cty.ObjectVal(byName)
		}
		vars["data"] = cty.ObjectVal(d)
	}
	if len(b.locals) > 0 {
		vars["local"] = cty.ObjectVal(b.locals)
	}
	if len(b.modules) > 0 {
		vars["module"] = cty.ObjectVal(b.modules)
	}
	if len(b.modVars) > 0 {
		vars["var"] = cty.ObjectVal(b.modVars)
	}
	return vars
}

func (e *evalState) resource(addr string) (cty.Value, error) {
	e.mu.RLock()
	v, ok := e.values[addr]
	e.mu.RUnlock()
	if !ok {
		return cty.NilVal, fmt.Errorf("reference to undeclared or unevaluated %s", addr)
	}
	return v, nil
}

// eval evaluates one expression; where names it in errors.
func (e *evalState) eval(x hcl.Expression, in instance, where string) (cty.Value, error) {
	ctx, err := e.ctx(x.Variables(), in)
	if err != nil {
		return cty.NilVal, fmt.Errorf("%s: %w", where, err)
	}
	v, diags := exprValue(x, ctx)
	if diags.HasErrors() {
		return cty.NilVal, diagError(where, diags)
	}
	return v, nil
}

func (e *evalState) local(sc *modScope, name string, depth int) (cty.Value, error) {
	key := sc.path + "|" + name
	e.mu.RLock()
	v, ok := e.locals[key]
	u, uok := e.unknownLocals[key]
	sets := e.sets
	e.mu.RUnlock()
	if uok && u.sets == sets {
		// Evaluated since the last value was set: evaluating it again gives the same (a local
		// that refers to another twice would otherwise double the work at every level).
		v, ok = u.v, true
	}
	if ok {
		return v, nil
	}
	x, ok := sc.cfg.Locals[name]
	if !ok {
		return cty.NilVal, fmt.Errorf("%slocal.%s is not declared", sc.prefix(), name)
	}
	if depth > 32 {
		return cty.NilVal, fmt.Errorf("%slocal.%s: locals nest too deep (a cycle?)", sc.prefix(), name)
	}
	ctx, err := e.ctxDepth(x.Variables(), instance{scope: sc}, depth+1)
	if err != nil {
		return cty.NilVal, fmt.Errorf("%slocal.%s: %w", sc.prefix(), name, err)
	}
	v, diags := exprValue(x, ctx)
	if diags.HasErrors() {
		return cty.NilVal, diagError(sc.prefix()+"local."+name, diags)
	}
	e.mu.Lock()
	if v.IsWhollyKnown() {
		e.locals[key] = v
	} else {
		e.unknownLocals[key] = unknownLocal{v: v, sets: sets}
	}
	e.mu.Unlock()
	return v, nil
}

// setVariables evaluates the input variables (their defaults: the embedded engine takes no
// other input), checks their validations and marks sensitive ones.
func (e *evalState) setVariables() error {
	vals := map[string]cty.Value{}
	for _, name := range sortedKeys(e.cfg.Variables) {
		v := e.cfg.Variables[name]
		val := v.Default
		if val == cty.NilVal {
			return fmt.Errorf("var.%s: no value: the variable has no default and the embedded engine takes no other input", name)
		}
		if val.IsNull() && !v.Nullable {
			return fmt.Errorf("var.%s: null is not allowed (nullable = false)", name)
		}
		if val.IsNull() {
			val = cty.NullVal(v.Type)
		}
		vals[name] = val
	}
	obj := cty.ObjectVal(vals)
	for _, name := range sortedKeys(e.cfg.Variables) {
		v := e.cfg.Variables[name]
		for _, r := range v.Validations {
			ctx := &hcl.EvalContext{Variables: map[string]cty.Value{"var": obj}, Functions: e.funcs}
			if err := checkRule(r, ctx, "var."+name+": validation"); err != nil {
				return err
			}
		}
		if v.Sensitive {
			vals[name] = vals[name].Mark(sensitiveMark)
		}
	}
	e.mu.Lock()
	e.vars = cty.ObjectVal(vals)
	e.mu.Unlock()
	return nil
}

// sensitiveMark is the cty mark of a sensitive value (sensitive(), sensitive variables).
const sensitiveMark = "sensitive"

// CheckFailedError is a precondition, postcondition or validation whose condition is false.
type CheckFailedError struct {
	Where, Message string
}

func (e *CheckFailedError) Error() string { return e.Where + " failed: " + e.Message }

// checkRule evaluates a condition; false is a [CheckFailedError] with the rule's message. An
// unknown condition passes (it is checked again at apply).
func checkRule(r *CheckRule, ctx *hcl.EvalContext, where string) error {
	cv, diags := exprValue(r.Condition, ctx)
	if diags.HasErrors() {
		return diagError(where+": condition", diags)
	}
	cv, _ = cv.Unmark()
	cb, err := convert.Convert(cv, cty.Bool)
	if err != nil || cb.IsNull() {
		return fmt.Errorf("%s: condition must be a boolean", where)
	}
	if !cb.IsKnown() || cb.True() {
		return nil
	}
	mv, diags := exprValue(r.ErrorMessage, ctx)
	msg := "(error_message cannot be evaluated)"
	if !diags.HasErrors() {
		if mv.IsMarked() {
			msg = "(error_message is sensitive)"
		} else if s, err := convert.Convert(mv, cty.String); err == nil && s.IsKnown() && !s.IsNull() {
			msg = s.AsString()
		}
	}
	return &CheckFailedError{Where: where, Message: msg}
}

// checkRules evaluates rules in the instance's context.
func (e *evalState) checkRules(rules []*CheckRule, in instance, where string) error {
	for _, r := range rules {
		refs := append(r.Condition.Variables(), r.ErrorMessage.Variables()...)
		ctx, err := e.ctx(refs, in)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if err := checkRule(r, ctx, where); err != nil {
			return err
		}
	}
	return nil
}

func attrStep(tr hcl.Traversal, i int) (string, bool) {
	if i >= len(tr) {
		return "", false
	}
	switch s := tr[i].(type) {
	case hcl.TraverseAttr:
		return s.Name, true
	case hcl.TraverseRoot:
		return s.Name, true
	}
	return "", false
}

func refError(tr hcl.Traversal, msg string) error {
	r := tr.SourceRange()
	return fmt.Errorf("%s: %s (%s)", traversalText(tr), msg, rangeText(r))
}

// refAddress is the configuration address a reference depends on: "type.name",
// "data.type.name", "local.name", "var.name"; "" for count, each, self, path, terraform.
func refAddress(tr hcl.Traversal) (string, error) {
	root := tr.RootName()
	switch root {
	case "count", "each", "self", "path", "terraform":
		return "", nil
	case "local", "var":
		n, ok := attrStep(tr, 1)
		if !ok {
			return "", refError(tr, "want "+root+".NAME")
		}
		return root + "." + n, nil
	case "data":
		t, ok1 := attrStep(tr, 1)
		n, ok2 := attrStep(tr, 2)
		if !ok1 || !ok2 {
			return "", refError(tr, "want data.TYPE.NAME")
		}
		return "data." + t + "." + n, nil
	}
	n, ok := attrStep(tr, 1)
	if !ok {
		return "", refError(tr, "want TYPE.NAME")
	}
	return root + "." + n, nil
}

// dependencies returns the resource addresses (with module paths) each resource of a
// flattened configuration depends on, through locals, module variables and module outputs,
// and checks every reference names something declared.
func (c *Config) dependencies() (map[string][]string, error) {
	root := c.root
	if root == nil {
		root = &modScope{cfg: c}
	}
	d := &scopeDeps{declared: map[string]bool{}, memo: map[string][]string{}}
	for _, rc := range c.Resources {
		d.declared[rc.Address()] = true
	}
	deps := map[string][]string{}
	for _, rc := range c.Resources {
		sc := rc.scope
		if sc == nil {
			sc = root
		}
		set := map[string]bool{}
		if err := d.resolve(rc.refs, sc, nil, set); err != nil {
			return nil, fmt.Errorf("%s: %w", rc.Address(), err)
		}
		for _, dep := range rc.DependsOn {
			if err := d.dependsOn(dep, sc, set); err != nil {
				return nil, fmt.Errorf("%s: %w", rc.Address(), err)
			}
		}
		// A module call's depends_on holds for every resource in it.
		for s := sc; s.parent != nil; s = s.parent {
			for _, dep := range s.call.DependsOn {
				if err := d.dependsOn(dep, s.parent, set); err != nil {
					return nil, fmt.Errorf("%s: %w", s.path, err)
				}
			}
		}
		delete(set, rc.Address())
		deps[rc.Address()] = setKeys(set)
	}
	for _, name := range sortedKeys(c.Outputs) {
		o := c.Outputs[name]
		refs := o.Value.Variables()
		for _, r := range o.Preconditions {
			refs = append(refs, r.Condition.Variables()...)
			refs = append(refs, r.ErrorMessage.Variables()...)
		}
		for _, tr := range refs {
			switch tr.RootName() {
			case "count", "each", "self":
				return nil, fmt.Errorf("output %s: %w", name, refError(tr, "is not valid in an output"))
			}
		}
		if err := d.resolve(refs, root, nil, map[string]bool{}); err != nil {
			return nil, fmt.Errorf("output %s: %w", name, err)
		}
	}
	for _, im := range c.Imports {
		if !d.declared[im.Res] {
			return nil, fmt.Errorf("import: to names undeclared %s", im.Res)
		}
		for _, tr := range im.ID.Variables() {
			if a, _ := refAddress(tr); a != "" && !strings.HasPrefix(a, "var.") && !strings.HasPrefix(a, "local.") {
				return nil, fmt.Errorf("import %s: id: %w", im.To, refError(tr, "an import id may refer only to variables and locals"))
			}
		}
		if err := d.resolve(im.ID.Variables(), root, nil, map[string]bool{}); err != nil {
			return nil, fmt.Errorf("import %s: id: %w", im.To, err)
		}
	}
	return deps, nil
}

// jsonStringExpr reads a JSON string that holds a reference ("aws_instance.x" or
// "${aws_instance.x}") as a native expression, as Terraform does for replace_triggered_by.
func jsonStringExpr(e hcl.Expression) (hcl.Expression, error) {
	if !hcljson.IsJSONExpression(e) {
		return e, nil
	}
	v, diags := e.Value(nil)
	if diags.HasErrors() || v.Type() != cty.String || v.IsNull() {
		return nil, fmt.Errorf("want a string holding a reference")
	}
	x, diags := hclsyntaxParseExpression(hclnest.UnwrapInterpolation(v.AsString()), e.Range())
	if diags.HasErrors() {
		return nil, diagError("", diags)
	}
	return x, nil
}

func hclsyntaxParseExpression(src string, r hcl.Range) (hcl.Expression, hcl.Diagnostics) {
	return hclnest.ParseExpression([]byte(src), r.Filename, r.Start)
}

func stripIndex(addr string) string {
	if i := strings.IndexByte(addr, '['); i >= 0 {
		return addr[:i]
	}
	return addr
}

func setKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// decodeInstance evaluates one resource instance's body against its schema. The value has
// no marks: marked are the paths that held sensitive values (sensitive(), sensitive
// variables), to be treated as secrets.
func (e *evalState) decodeInstance(b *Block, rc *ResourceConfig, in instance, where string) (cty.Value, []cty.Path, error) {
	ctx, err := e.ctx(rc.refs, in)
	if err != nil {
		return cty.NilVal, nil, fmt.Errorf("%s: %w", where, err)
	}
	if err := e.checkRulesCtx(rc.Preconditions, ctx, where+": precondition"); err != nil {
		return cty.NilVal, nil, err
	}
	v, err := decodeBlock(b, rc.Body, ctx, where)
	if err != nil {
		return cty.NilVal, nil, err
	}
	v, pvm := v.UnmarkDeepWithPaths()
	var marked []cty.Path
	for _, pm := range pvm {
		marked = append(marked, pm.Path)
	}
	return v, marked, nil
}

func (e *evalState) checkRulesCtx(rules []*CheckRule, ctx *hcl.EvalContext, where string) error {
	for _, r := range rules {
		if err := checkRule(r, ctx, where); err != nil {
			return err
		}
	}
	return nil
}

// output evaluates an output's preconditions and value; marked reports a value that holds
// sensitive values (the value returned has no marks).
func (e *evalState) output(name string, o *OutputConfig) (cty.Value, bool, error) {
	where := "output " + name
	if err := e.checkRules(o.Preconditions, instance{}, where+": precondition"); err != nil {
		return cty.NilVal, false, err
	}
	v, err := e.eval(o.Value, instance{}, where)
	if err != nil {
		return cty.NilVal, false, err
	}
	marked := v.ContainsMarked()
	if marked && !o.Sensitive && hasMarkDeep(v, sensitiveMark) {
		return cty.NilVal, false, fmt.Errorf("%s: output refers to sensitive values: set sensitive = true on the output", where)
	}
	v, _ = v.UnmarkDeep()
	return v, marked, nil
}

// expressionText names an expression by its references ("terraform_data.a.input").
func expressionText(x hcl.Expression) string {
	var names []string
	for _, tr := range x.Variables() {
		names = append(names, traversalText(tr))
	}
	return strings.Join(names, ", ")
}
