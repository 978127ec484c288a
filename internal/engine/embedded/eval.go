package embedded

import (
	"fmt"
	"maps"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
)

// evalState holds the values references resolve to during one plan or apply: each resource's
// value (an object, a tuple of objects for count, an object of objects for for_each), the
// locals and the input variables. Expressions are evaluated by hcl/v2 in an [hcl.EvalContext]
// built from the references each expression holds ([hcl.Expression.Variables]).
type evalState struct {
	cfg   *Config
	funcs map[string]function.Function

	mu     sync.RWMutex
	values map[string]cty.Value
	locals map[string]cty.Value
	vars   cty.Value
	// pathVal and tfVal are path.* and terraform.*.
	pathVal, tfVal cty.Value
}

func newEvalState(cfg *Config) *evalState {
	cwd, _ := os.Getwd()
	funcs := maps.Clone(sharedFunctions())
	funcs["plantimestamp"] = planTimestampFunc(time.Now().UTC())
	funcs["core::plantimestamp"] = funcs["plantimestamp"]
	return &evalState{cfg: cfg, funcs: funcs, values: map[string]cty.Value{}, locals: map[string]cty.Value{},
		vars:    cty.EmptyObjectVal,
		pathVal: cty.ObjectVal(map[string]cty.Value{"module": cty.StringVal("."), "root": cty.StringVal("."), "cwd": cty.StringVal(cwd)}),
		tfVal:   cty.ObjectVal(map[string]cty.Value{"workspace": cty.StringVal("default")}),
	}
}

func (e *evalState) set(addr string, v cty.Value) {
	e.mu.Lock()
	e.values[addr] = v
	e.mu.Unlock()
}

// instance is what count.index, each.key, each.value and self mean in one evaluation
// (cty.NilVal: not available).
type instance struct {
	countIndex         cty.Value
	eachKey, eachValue cty.Value
	self               cty.Value
}

// ctx returns the evaluation context for expressions holding refs.
func (e *evalState) ctx(refs []hcl.Traversal, in instance) (*hcl.EvalContext, error) {
	return e.ctxDepth(refs, in, 0)
}

func (e *evalState) ctxDepth(refs []hcl.Traversal, in instance, depth int) (*hcl.EvalContext, error) {
	vars := map[string]cty.Value{}
	resources := map[string]map[string]cty.Value{}
	data := map[string]map[string]cty.Value{}
	locals := map[string]cty.Value{}
	for _, tr := range refs {
		root := tr.RootName()
		switch root {
		case "count":
			if in.countIndex == cty.NilVal {
				return nil, refError(tr, "count.index is only valid in a resource with count")
			}
			vars["count"] = cty.ObjectVal(map[string]cty.Value{"index": in.countIndex})
		case "each":
			if in.eachKey == cty.NilVal {
				return nil, refError(tr, "each is only valid in a resource with for_each")
			}
			vars["each"] = cty.ObjectVal(map[string]cty.Value{"key": in.eachKey, "value": in.eachValue})
		case "self":
			if in.self == cty.NilVal {
				return nil, refError(tr, "self is only valid in a postcondition")
			}
			vars["self"] = in.self
		case "path":
			vars["path"] = e.pathVal
		case "terraform":
			vars["terraform"] = e.tfVal
		case "var":
			e.mu.RLock()
			vars["var"] = e.vars
			e.mu.RUnlock()
		case "local":
			name, ok := attrStep(tr, 1)
			if !ok {
				return nil, refError(tr, "want local.NAME")
			}
			v, err := e.local(name, depth)
			if err != nil {
				return nil, err
			}
			locals[name] = v
		case "data":
			typ, ok1 := attrStep(tr, 1)
			name, ok2 := attrStep(tr, 2)
			if !ok1 || !ok2 {
				return nil, refError(tr, "want data.TYPE.NAME")
			}
			v, err := e.resource("data." + typ + "." + name)
			if err != nil {
				return nil, refError(tr, err.Error())
			}
			if data[typ] == nil {
				data[typ] = map[string]cty.Value{}
			}
			data[typ][name] = v
		case "module":
			return nil, refError(tr, "modules are not supported by the embedded engine")
		default:
			name, ok := attrStep(tr, 1)
			if !ok {
				return nil, refError(tr, "want TYPE.NAME")
			}
			v, err := e.resource(root + "." + name)
			if err != nil {
				return nil, refError(tr, err.Error())
			}
			if resources[root] == nil {
				resources[root] = map[string]cty.Value{}
			}
			resources[root][name] = v
		}
	}
	for typ, byName := range resources {
		vars[typ] = cty.ObjectVal(byName)
	}
	if len(data) > 0 {
		d := map[string]cty.Value{}
		for typ, byName := range data {
			d[typ] = cty.ObjectVal(byName)
		}
		vars["data"] = cty.ObjectVal(d)
	}
	if len(locals) > 0 {
		vars["local"] = cty.ObjectVal(locals)
	}
	return &hcl.EvalContext{Variables: vars, Functions: e.funcs}, nil
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
	v, diags := x.Value(ctx)
	if diags.HasErrors() {
		return cty.NilVal, diagError(where, diags)
	}
	return v, nil
}

func (e *evalState) local(name string, depth int) (cty.Value, error) {
	e.mu.RLock()
	v, ok := e.locals[name]
	e.mu.RUnlock()
	if ok {
		return v, nil
	}
	x, ok := e.cfg.Locals[name]
	if !ok {
		return cty.NilVal, fmt.Errorf("local.%s is not declared", name)
	}
	if depth > 32 {
		return cty.NilVal, fmt.Errorf("local.%s: locals nest too deep (a cycle?)", name)
	}
	ctx, err := e.ctxDepth(x.Variables(), instance{}, depth+1)
	if err != nil {
		return cty.NilVal, fmt.Errorf("local.%s: %w", name, err)
	}
	v, diags := x.Value(ctx)
	if diags.HasErrors() {
		return cty.NilVal, diagError("local."+name, diags)
	}
	if v.IsWhollyKnown() {
		e.mu.Lock()
		e.locals[name] = v
		e.mu.Unlock()
	}
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
	cv, diags := r.Condition.Value(ctx)
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
	mv, diags := r.ErrorMessage.Value(ctx)
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
	case "module":
		return "", refError(tr, "modules are not supported by the embedded engine")
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

// dependencies returns the configuration addresses each resource depends on, through locals,
// and checks every reference names something declared.
func (c *Config) dependencies() (map[string][]string, error) {
	declared := map[string]bool{}
	for _, rc := range c.Resources {
		declared[rc.Address()] = true
	}
	localDeps := map[string][]string{}
	var resolve func(refs []hcl.Traversal, stack []string, set map[string]bool) error
	var visitLocal func(name string, stack []string) ([]string, error)
	resolve = func(refs []hcl.Traversal, stack []string, set map[string]bool) error {
		for _, tr := range refs {
			a, err := refAddress(tr)
			if err != nil {
				return err
			}
			switch {
			case a == "":
			case strings.HasPrefix(a, "var."):
				if _, ok := c.Variables[a[4:]]; !ok {
					return refError(tr, "reference to undeclared input variable "+a)
				}
			case strings.HasPrefix(a, "local."):
				d, err := visitLocal(a[6:], stack)
				if err != nil {
					return err
				}
				for _, x := range d {
					set[x] = true
				}
			default:
				if !declared[a] {
					return refError(tr, "reference to undeclared resource "+a)
				}
				set[a] = true
			}
		}
		return nil
	}
	visitLocal = func(name string, stack []string) ([]string, error) {
		if d, ok := localDeps[name]; ok {
			return d, nil
		}
		for _, s := range stack {
			if s == name {
				return nil, fmt.Errorf("locals form a cycle: %s", strings.Join(append(stack, name), " -> "))
			}
		}
		x, ok := c.Locals[name]
		if !ok {
			return nil, fmt.Errorf("local.%s is not declared", name)
		}
		for _, tr := range x.Variables() {
			switch tr.RootName() {
			case "count", "each", "self":
				return nil, fmt.Errorf("local.%s: %s", name, refError(tr, "is not valid in a local"))
			}
		}
		set := map[string]bool{}
		if err := resolve(x.Variables(), append(stack, name), set); err != nil {
			return nil, fmt.Errorf("local.%s: %w", name, err)
		}
		out := setKeys(set)
		localDeps[name] = out
		return out, nil
	}
	deps := map[string][]string{}
	for _, rc := range c.Resources {
		set := map[string]bool{}
		if err := resolve(rc.refs, nil, set); err != nil {
			return nil, fmt.Errorf("%s: %w", rc.Address(), err)
		}
		for _, d := range rc.DependsOn {
			if !declared[d] {
				return nil, fmt.Errorf("%s: depends_on names undeclared %s", rc.Address(), d)
			}
			set[d] = true
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
		if err := resolve(refs, nil, map[string]bool{}); err != nil {
			return nil, fmt.Errorf("output %s: %w", name, err)
		}
	}
	for _, im := range c.Imports {
		if !declared[im.Res] {
			return nil, fmt.Errorf("import: to names undeclared %s", im.Res)
		}
		for _, tr := range im.ID.Variables() {
			if a, _ := refAddress(tr); a != "" && !strings.HasPrefix(a, "var.") && !strings.HasPrefix(a, "local.") {
				return nil, fmt.Errorf("import %s: id: %w", im.To, refError(tr, "an import id may refer only to variables and locals"))
			}
		}
		if err := resolve(im.ID.Variables(), nil, map[string]bool{}); err != nil {
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
	s := v.AsString()
	if strings.HasPrefix(s, "${") && strings.HasSuffix(s, "}") {
		s = s[2 : len(s)-1]
	}
	x, diags := hclsyntaxParseExpression(s, e.Range())
	if diags.HasErrors() {
		return nil, diagError("", diags)
	}
	return x, nil
}

func hclsyntaxParseExpression(src string, r hcl.Range) (hcl.Expression, hcl.Diagnostics) {
	return hclsyntax.ParseExpression([]byte(src), r.Filename, r.Start)
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
	if marked && !o.Sensitive {
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
