package render

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/functions"
	"github.com/lava-operator/lava/internal/lang/hclnest"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// checkReferences checks every reference in the rendered Terraform JSON of a (compact) as
// Terraform's static validation does before any provider runs: a reference names a declared
// resource, data source, local value, input variable or module of the document (a bundled
// module's references, of that module's document), and a resource type is followed by the
// resource's name (a resource type alone is not a value). Every function call names a function
// some engine knows, built in (plain or core::) or provider-defined (provider::...), with an
// argument count its signature accepts ([functions.Check]). Each error is reported at the
// architecture form that produced the string (the resource, the local or output key, else
// the architecture), with the JSON path and the column of the reference or function name in
// the string; at most tlisp.MaxDiagnostics of them, then one that counts the rest.
//
// A string that does not parse, or nests too deeply, is left to the tenant policy gate, which
// refuses it with its own message.
func checkReferences(a *arch.Architecture, compact []byte) tlisp.Diagnostics {
	var doc map[string]any
	if err := json.Unmarshal(compact, &doc); err != nil {
		return nil // the policy gate reports a document that does not decode
	}
	var ds tlisp.Diagnostics
	more := 0
	errorf := func(p arch.Pos, format string, args ...any) {
		if len(ds) == tlisp.MaxDiagnostics {
			more++
			return
		}
		ds = append(ds, tlisp.Diagnostic{Pos: p, Severity: tlisp.SeverityError, Message: fmt.Sprintf(format, args...)})
	}
	positions := refPositions(a)
	check := func(where string, doc map[string]any, at func(path []string) arch.Pos) {
		d := declarations(doc)
		var walk func(path []string, v any, expr bool, iterators map[string]bool)
		walk = func(path []string, v any, expr bool, iterators map[string]bool) {
			switch v := v.(type) {
			case string:
				// Clipped once per string: a string of many bad references is not re-read per
				// error.
				in := ""
				for i, p := range d.problems(v, expr, iterators) {
					if i == 0 {
						in = policy.Clip(v)
					}
					errorf(at(path), "%s%s: %s, in %q", where, strings.Join(path, "."), p, in)
				}
			case []any:
				for i, e := range v {
					walk(append(path, fmt.Sprint(i)), e, expr, iterators)
				}
			case map[string]any:
				for _, k := range sortedKeys(v) {
					e := v[k]
					p := append(append([]string(nil), path...), k)
					in := ""
					for i, prob := range d.problems(k, false, iterators) {
						if i == 0 {
							in = policy.Clip(k)
						}
						errorf(at(p), "%s%s (a key): %s, in %q", where, strings.Join(p, "."), prob, in)
					}
					switch {
					case k == "ignore_changes":
						// Attribute names of the resource itself, not references.
					case len(path) == 2 && (path[0] == "variable" && k == "default" || path[0] == "moved" && k == "from"):
						// A variable's default is a literal; a move's from names what is no
						// longer declared, by design.
					case len(path) >= 1 && path[len(path)-1] == "dynamic":
						// A dynamic block's content refers to its iterator: the block's label,
						// or the name its iterator argument gives.
						it := map[string]bool{k: true}
						if body, ok := e.(map[string]any); ok {
							if name, ok := body["iterator"].(string); ok {
								it = map[string]bool{name: true}
							}
						}
						for n := range iterators {
							it[n] = true
						}
						walk(p, e, false, it)
					default:
						walk(p, e, expr || (refExpressionKeys[k] && len(path) > 1), iterators)
					}
				}
			}
		}
		// removed names addresses that are no longer declared, by design.
		for _, block := range []string{"variable", "resource", "data", "locals", "output", "module", "provider", "import", "moved", "check"} {
			if b, ok := doc[block]; ok {
				walk([]string{block}, b, false, nil)
			}
		}
	}
	check("", doc, func(path []string) arch.Pos { return positions.at(a, path) })
	if bundle, ok := doc["//"].(map[string]any); ok {
		mods, _ := bundle["lava_modules"].(map[string]any)
		for _, dir := range sortedKeys(mods) {
			if m, ok := mods[dir].(map[string]any); ok {
				check("module directory "+dir+": ", m, func([]string) arch.Pos { return a.Pos })
			}
		}
	}
	if more > 0 {
		ds = append(ds, tlisp.Diagnostic{Pos: a.Pos, Severity: tlisp.SeverityError,
			Message: fmt.Sprintf("… and %d more reference or function call error(s)", more)})
	}
	return ds
}

// refExpressionKeys are the Terraform JSON properties whose strings are references rather
// than templates: depends_on, lifecycle's replace_triggered_by, and the import and moved
// addresses.
var refExpressionKeys = map[string]bool{"to": true, "depends_on": true, "replace_triggered_by": true}

// refDecls are what a Terraform JSON document declares: "TYPE.NAME" of resources, "TYPE.NAME"
// of data sources, and the names of locals, variables and module calls.
type refDecls struct {
	resources, data, locals, variables, modules map[string]bool
	// types are the resource types declared.
	types map[string]bool
}

func declarations(doc map[string]any) refDecls {
	d := refDecls{resources: map[string]bool{}, data: map[string]bool{}, locals: map[string]bool{},
		variables: map[string]bool{}, modules: map[string]bool{}, types: map[string]bool{}}
	typed := func(block any, into map[string]bool, types map[string]bool) {
		m, _ := block.(map[string]any)
		for t, names := range m {
			if types != nil {
				types[t] = true
			}
			nm, _ := names.(map[string]any)
			for n := range nm {
				into[t+"."+n] = true
			}
		}
	}
	typed(doc["resource"], d.resources, d.types)
	typed(doc["data"], d.data, nil)
	named := func(block any, into map[string]bool) {
		switch b := block.(type) {
		case map[string]any:
			for n := range b {
				into[n] = true
			}
		case []any: // Terraform JSON allows a block as an array of objects
			for _, e := range b {
				if m, ok := e.(map[string]any); ok {
					for n := range m {
						into[n] = true
					}
				}
			}
		}
	}
	named(doc["locals"], d.locals)
	named(doc["variable"], d.variables)
	named(doc["module"], d.modules)
	return d
}

// problems parses s (an expression when expr, else a template) and returns what is wrong with
// each reference it makes and each function it calls ([functions.Check]: a name no engine
// knows, an argument count no signature accepts), in source order; a string that does not
// parse gives none.
func (d refDecls) problems(s string, expr bool, iterators map[string]bool) []string {
	var e hclsyntax.Expression
	var diags hcl.Diagnostics
	switch {
	case expr:
		e, diags = hclnest.ParseExpression([]byte(s), "attr", hcl.InitialPos)
	case strings.Contains(s, "${") || strings.Contains(s, "%{"):
		e, diags = hclnest.ParseTemplate([]byte(s), "attr", hcl.InitialPos)
	default:
		return nil
	}
	if diags.HasErrors() || e == nil {
		return nil
	}
	type found struct {
		at  hcl.Pos
		msg string
	}
	var fs []found
	for _, tr := range e.Variables() {
		if p := d.problem(tr, iterators); p != "" {
			fs = append(fs, found{tr.SourceRange().Start, p})
		}
	}
	// Function calls: a name some engine knows, with an argument count its signature accepts.
	_ = hclsyntax.VisitAll(e, func(n hclsyntax.Node) hcl.Diagnostics {
		if call, ok := n.(*hclsyntax.FunctionCallExpr); ok {
			if p := functions.Check(call.Name, len(call.Args), call.ExpandFinal); p != "" {
				fs = append(fs, found{call.NameRange.Start, p})
			}
		}
		return nil
	})
	slices.SortStableFunc(fs, func(a, b found) int { return a.at.Byte - b.at.Byte })
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s (column %d)", f.msg, f.at.Column))
	}
	return out
}

// problem says what is wrong with one reference, "" when nothing is, in Terraform's words.
func (d refDecls) problem(tr hcl.Traversal, iterators map[string]bool) string {
	root := tr.RootName()
	step := func(i int) (string, bool) {
		if i >= len(tr) {
			return "", false
		}
		a, ok := tr[i].(hcl.TraverseAttr)
		return a.Name, ok
	}
	switch root {
	case "count", "each", "self", "path", "terraform":
		return ""
	case "var":
		n, ok := step(1)
		switch {
		case !ok:
			return "invalid reference: var must be followed by the variable's name (var.NAME)"
		case !d.variables[n]:
			return fmt.Sprintf("reference to undeclared input variable var.%s", n)
		}
	case "local":
		n, ok := step(1)
		switch {
		case !ok:
			return "invalid reference: local must be followed by the local value's name (local.NAME)"
		case !d.locals[n]:
			return fmt.Sprintf("reference to undeclared local value local.%s", n)
		}
	case "module":
		n, ok := step(1)
		switch {
		case !ok:
			return "invalid reference: module must be followed by the module call's name (module.NAME)"
		case !d.modules[n]:
			return fmt.Sprintf("reference to undeclared module module.%s", n)
		}
	case "data":
		t, ok1 := step(1)
		n, ok2 := step(2)
		switch {
		case !ok1 || !ok2:
			return "invalid reference: a data source is data.TYPE.NAME"
		case !d.data[t+"."+n]:
			return fmt.Sprintf("reference to undeclared data source data.%s.%s", t, n)
		}
	default:
		if iterators[root] {
			return ""
		}
		n, ok := step(1)
		switch {
		case !ok:
			return fmt.Sprintf("invalid reference: the resource type %s is not a value; a reference to a resource names it (%s.NAME)", root, root)
		case !d.resources[root+"."+n]:
			return fmt.Sprintf("reference to undeclared resource %s.%s", root, n)
		}
	}
	return ""
}

// positionIndex finds the architecture form a rendered JSON path comes from.
type positionIndex struct {
	resources, data map[string]arch.Pos
}

func refPositions(a *arch.Architecture) positionIndex {
	ix := positionIndex{resources: map[string]arch.Pos{}, data: map[string]arch.Pos{}}
	for i := range a.Resources {
		ix.resources[a.Resources[i].Address()] = a.Resources[i].Pos
	}
	for i := range a.DataSources {
		ix.data[a.DataSources[i].Address()] = a.DataSources[i].Pos
	}
	return ix
}

// at is the position of the form that rendered path: a resource's or data source's form, a
// local's or output's key, a variable's or check's form, else the architecture form.
func (ix positionIndex) at(a *arch.Architecture, path []string) arch.Pos {
	var p arch.Pos
	if len(path) >= 3 {
		switch path[0] {
		case "resource":
			p = ix.resources[path[1]+"."+path[2]]
		case "data":
			p = ix.data[path[1]+"."+path[2]]
		}
	}
	if len(path) >= 2 {
		switch path[0] {
		case "locals":
			p = a.KeyPos["local."+path[1]]
		case "output":
			p = a.KeyPos["output."+path[1]]
		case "variable", "check":
			p = a.KeyPos[path[0]+"."+path[1]]
		}
	}
	if !p.IsValid() {
		p = a.Pos
	}
	return p
}
