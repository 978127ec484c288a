package embedded

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
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

// exprValue evaluates x in ctx exactly as x.Value(ctx) does. hashicorp/hcl/v2/json parses a
// JSON string's template (hclsyntax.ParseTemplate, at the position just past the opening
// quote) on every Value call with a context; exprValue parses it once per string and position and
// evaluates the parsed template, so a plan of a configuration seen before parses no template.
// Arrays and objects, a nil ctx, and a string whose template fails to parse go to x.Value,
// so results and diagnostics are hcl's own.
//
// An error over sensitive values has its detail hidden ([hideSensitiveDetail]).
func exprValue(x hcl.Expression, ctx *hcl.EvalContext) (cty.Value, hcl.Diagnostics) {
	if ctx == nil || x == nil {
		return x.Value(ctx)
	}
	var v cty.Value
	var diags hcl.Diagnostics
	if t := templateOf(x); t != noTemplate {
		v, diags = t.Value(ctx)
	} else {
		v, diags = x.Value(ctx)
	}
	return v, hideSensitiveDetail(diags, ctx)
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
		if c.Severity == hcl.DiagError {
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

// parseTemplate parses a string's template at its position; noTemplate when it does not parse.
func parseTemplate(k templateKey) hcl.Expression {
	t, diags := hclsyntax.ParseTemplate([]byte(k.lit), k.file, k.pos)
	if diags.HasErrors() {
		return noTemplate
	}
	return t
}
