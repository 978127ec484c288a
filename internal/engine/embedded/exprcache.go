package embedded

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/lava-operator/lava/internal/lang/hclnest"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// maxTemplates and maxTemplateBytes bound the template cache: when it holds more entries, or
// its strings more bytes, it is emptied. A string longer than maxCachedTemplate is parsed on
// every use and never cached.
const (
	maxTemplates      = 1 << 12
	maxTemplateBytes  = 4 << 20
	maxCachedTemplate = 64 << 10
)

// templateKey identifies a Terraform JSON string expression by what its parsed template
// depends on: the string and where it starts. hcl/v2/json returns a new hcl.Expression for
// the same source on every Body.Content call, so an expression's identity would miss on every
// plan of a cached configuration.
type templateKey struct {
	file string
	pos  hcl.Pos
	lit  string
}

// templates maps a templateKey to its parsed template (hclsyntax.Expression), or to noTemplate
// for a string whose template does not parse. Safe for concurrent use: parsed templates are
// read-only syntax trees.
var (
	templates     sync.Map
	templateCount atomic.Int64
	templateBytes atomic.Int64
)

// noTemplate marks an expression that is evaluated by its own Value.
var noTemplate hcl.Expression = (*hclsyntax.LiteralValueExpr)(nil)

// exprValue evaluates x in ctx as x.Value(ctx) does. hashicorp/hcl/v2/json parses a JSON
// string's template (hclsyntax.ParseTemplate, at the position just past the opening quote) on
// every Value call with a context; exprValue parses it once per string and position and
// evaluates the parsed template, so a plan of a configuration seen before parses no template.
// A JSON array or object is evaluated element by element the same way ([jsonValue]), so every
// template of the configuration carries the evaluation limits' hooks ([instrument]). A nil
// ctx, a literal, and a string whose template fails to parse go to x.Value, so results and
// diagnostics are hcl's own.
//
// Under an evaluation budget (ctx's functions are an operation's, [budget.functions]) the
// value is checked against one value's limits and charged ([budget.value]), unless a check
// inside the expression covered it; a reference is charged at each use ([checkedWhole]).
// A refusal reads "Evaluation limit exceeded" with the limit ([limitDiags]); the detail of any
// other error over sensitive values is hidden ([hideSensitiveDetail]).
func exprValue(x hcl.Expression, ctx *hcl.EvalContext) (cty.Value, hcl.Diagnostics) {
	if ctx == nil || x == nil {
		return x.Value(ctx)
	}
	v, diags, whole := jsonValue(x, ctx)
	if b := budgetOf(ctx); b != nil && !diags.HasErrors() && !whole {
		if err := b.value("expression", v); err != nil {
			v, diags = cty.DynamicVal, append(diags, stopDiag(err, x.Range()))
		}
	}
	return v, hideSensitiveDetail(limitDiags(diags), ctx)
}

// checkedWhole reports whether the value of the template t (noTemplate: a JSON array, object
// or literal) needs no check of its own: a string without interpolation, or what instrument's
// checks or a function's guard already checked whole. A reference is checked, and charged,
// at every place it is used, as JSON would write it there: a 15 MB local referenced by 60
// instances (or by 200 check messages) is 900 MB of plan, state and log text, although its
// value was built once.
func checkedWhole(t hcl.Expression) bool {
	switch t := t.(type) {
	case checkExpr:
		return t.kind == checkValue
	case *hclsyntax.TemplateExpr:
		return t.IsStringLiteral()
	case *hclsyntax.TemplateWrapExpr:
		switch w := t.Wrapped.(type) {
		case *hclsyntax.FunctionCallExpr:
			return true
		case checkExpr:
			return w.kind == checkValue
		}
	}
	return false
}

// jsonValue evaluates x (ctx not nil): an array or object through its elements, as
// hcl/v2/json does (an array is a tuple; an object's keys are templates too, and a null,
// non-string or repeated key is an error, an unknown one makes the object unknown), a
// Terraform JSON string through its cached template. whole reports a value that needs no
// check of its own ([checkedWhole]).
func jsonValue(x hcl.Expression, ctx *hcl.EvalContext) (v cty.Value, diags hcl.Diagnostics, whole bool) {
	if hcljson.IsJSONExpression(x) {
		if l, ok := x.(interface{ ExprList() []hcl.Expression }); ok {
			if elems := l.ExprList(); elems != nil {
				vals := make([]cty.Value, len(elems))
				for i, e := range elems {
					v, d, _ := jsonValue(e, ctx)
					vals[i], diags = v, append(diags, d...)
				}
				return cty.TupleVal(vals), diags, false
			}
		}
		if m, ok := x.(interface{ ExprMap() []hcl.KeyValuePair }); ok {
			if pairs := m.ExprMap(); pairs != nil {
				v, diags := jsonObject(pairs, ctx)
				return v, diags, false
			}
		}
	}
	if t := templateOf(x); t != noTemplate {
		v, diags := t.Value(ctx)
		return v, diags, checkedWhole(t)
	}
	v, diags = x.Value(ctx)
	return v, diags, false
}

// jsonObject is the value of a JSON object's pairs, as hcl/v2/json makes it.
func jsonObject(pairs []hcl.KeyValuePair, ctx *hcl.EvalContext) (cty.Value, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	attrs := map[string]cty.Value{}
	ranges := map[string]hcl.Range{}
	known := true
	var keyMarks []cty.ValueMarks
	for _, kv := range pairs {
		name, nd, _ := jsonValue(kv.Key, ctx)
		val, vd, _ := jsonValue(kv.Value, ctx)
		diags = append(append(diags, nd...), vd...)
		keyRange := kv.Key.Range()
		name, err := convert.Convert(name, cty.String)
		switch {
		case err != nil:
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid object key expression",
				Detail: fmt.Sprintf("Cannot use this expression as an object key: %s.", err), Subject: &keyRange})
			continue
		case name.IsNull():
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid object key expression",
				Detail: "Cannot use null value as an object key.", Subject: &keyRange})
			continue
		case !name.IsKnown():
			known = false
			continue
		}
		name, marks := name.Unmark()
		keyMarks = append(keyMarks, marks)
		key := name.AsString()
		if _, dup := attrs[key]; dup {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate object attribute",
				Detail: fmt.Sprintf("An attribute named %q was already defined at %s.", key, ranges[key]), Subject: &keyRange})
			continue
		}
		attrs[key], ranges[key] = val, keyRange
	}
	if !known {
		return cty.DynamicVal, diags
	}
	return cty.ObjectVal(attrs).WithMarks(keyMarks...), diags
}

// sensitiveDetail replaces the detail of an error in an expression evaluated over sensitive
// values.
const sensitiveDetail = "(the detail is not shown: the expression uses a sensitive value)"

// hideSensitiveDetail returns diags with the detail of every error replaced by sensitiveDetail
// when a variable of ctx (or of a parent context) holds a sensitive value: hcl's own
// diagnostics quote values ("Duplicate object key: Two different items produced the key
// \"VALUE\""), and a value derived from a Secret binding must not reach a Failed condition
// (docs/security.md, "Rendering"). The summary and the position stay. Function errors are
// hidden before they get here ([hideSensitiveErrors]).
func hideSensitiveDetail(diags hcl.Diagnostics, ctx *hcl.EvalContext) hcl.Diagnostics {
	if !diags.HasErrors() || !ctxSensitive(ctx) {
		return diags
	}
	out := make(hcl.Diagnostics, len(diags))
	for i, d := range diags {
		c := *d
		if c.Severity == hcl.DiagError && stopOf(d) == nil {
			c.Detail = sensitiveDetail
		}
		c.Expression, c.EvalContext = nil, nil
		out[i] = &c
	}
	return out
}

// ctxSensitive reports whether a variable of ctx or of a parent context holds a value marked
// sensitive (by sensitive(), a sensitive variable, or a sensitive attribute).
func ctxSensitive(ctx *hcl.EvalContext) bool {
	for c := ctx; c != nil; c = c.Parent() {
		for _, v := range c.Variables {
			if hasMarkDeep(v, sensitiveMark) || hasMarkDeep(v, attributeSensitiveMark) {
				return true
			}
		}
	}
	return false
}

// templateOf returns x's parsed template, parsing it on first use; noTemplate when x is not
// a Terraform JSON string or its template does not parse.
func templateOf(x hcl.Expression) hcl.Expression {
	if !hcljson.IsJSONExpression(x) {
		return noTemplate
	}
	// With a nil context hcl/v2/json returns a string verbatim (and any other value as a
	// literal); the source range of a string expression is the quoted string's.
	lit, diags := x.Value(nil)
	if diags.HasErrors() || lit.IsNull() || !lit.IsKnown() || lit.Type() != cty.String {
		return noTemplate
	}
	r := x.Range()
	key := templateKey{file: r.Filename, pos: hcl.Pos{Line: r.Start.Line, Column: r.Start.Column + 1, Byte: r.Start.Byte + 1}, lit: lit.AsString()}
	if t, ok := templates.Load(key); ok {
		return t.(hcl.Expression)
	}
	t := parseTemplate(key)
	if len(key.lit) > maxCachedTemplate {
		return t
	}
	if templateCount.Add(1) > maxTemplates || templateBytes.Add(int64(len(key.lit))) > maxTemplateBytes {
		templates.Clear()
		templateCount.Store(1)
		templateBytes.Store(int64(len(key.lit)))
	}
	templates.Store(key, t)
	return t
}

// parseTemplate parses a string's template at its position, with the evaluation limits' hooks
// ([instrument]); noTemplate when it does not parse.
func parseTemplate(k templateKey) hcl.Expression {
	t, diags := hclnest.ParseTemplate([]byte(k.lit), k.file, k.pos)
	if diags.HasErrors() {
		return noTemplate
	}
	return instrument(t)
}
