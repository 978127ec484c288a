package hclnest

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Max is the deepest syntax tree accepted, counted as [Check] does. A configuration's
// expressions stay a few dozen levels deep; at Max, hclsyntax's parser uses about 8 MB of
// stack (about 33 KB a level, measured with a template nested 30,000 levels, which overflows
// Go's 1 GB stack limit).
const Max = 256

// Summary is the summary of the diagnostic [Check] returns.
const Summary = "Expression nested too deeply"

// Check returns an error diagnostic when the HCL native template (template true) or
// expression in src may build a syntax tree deeper than [Max] levels; nil otherwise. The
// bound counts, at each point of the source, the brackets, parentheses, braces, quotes,
// heredocs, interpolations and directives open there (an if or for directive stays open
// until its end directive), plus, inside each of them, every operator (unary, binary,
// conditional) and index seen so far, since each deepens the tree by one. It is an upper
// bound: a long chain of operators inside one bracket counts whole. The diagnostic's subject
// is the token where the bound passes Max, at filename and start as given to hclsyntax.
// Lexing errors are left to the parser.
func Check(src []byte, template bool, filename string, start hcl.Pos) hcl.Diagnostics {
	var toks hclsyntax.Tokens
	if template {
		toks, _ = hclsyntax.LexTemplate(src, filename, start)
	} else {
		toks, _ = hclsyntax.LexExpression(src, filename, start)
	}
	// levels holds, for each open level, the operators and indexes seen in it and what
	// closing it does; depth is the number of levels plus all their counts.
	type level struct {
		count     int
		directive bool // an if or for directive: its end directive closes one more level
		end       bool // an endif or endfor directive: closes the level of its directive
	}
	levels := []level{{}}
	depth := 0
	prev := hclsyntax.TokenNil
	for i, t := range toks {
		switch t.Type {
		case hclsyntax.TokenOBrack, hclsyntax.TokenOBrace, hclsyntax.TokenOParen, hclsyntax.TokenOQuote,
			hclsyntax.TokenOHeredoc, hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			if t.Type == hclsyntax.TokenOBrack && endsValue(prev) {
				levels[len(levels)-1].count++ // an index: a[b][c] nests like a + b + c
				depth++
			}
			l := level{}
			if t.Type == hclsyntax.TokenTemplateControl && i+1 < len(toks) && toks[i+1].Type == hclsyntax.TokenIdent {
				switch string(toks[i+1].Bytes) {
				case "if", "for":
					l.directive = true
				case "endif", "endfor":
					l.end = true
				}
			}
			levels = append(levels, l)
			depth++
		case hclsyntax.TokenCBrack, hclsyntax.TokenCBrace, hclsyntax.TokenCParen, hclsyntax.TokenCQuote,
			hclsyntax.TokenCHeredoc, hclsyntax.TokenTemplateSeqEnd:
			if len(levels) == 1 {
				break // unbalanced: the parser reports it
			}
			l := levels[len(levels)-1]
			levels = levels[:len(levels)-1]
			depth -= 1 + l.count
			switch {
			case l.directive:
				levels = append(levels, level{})
				depth++
			case l.end && len(levels) > 1:
				depth -= 1 + levels[len(levels)-1].count
				levels = levels[:len(levels)-1]
			}
		case hclsyntax.TokenPlus, hclsyntax.TokenMinus, hclsyntax.TokenStar, hclsyntax.TokenSlash,
			hclsyntax.TokenPercent, hclsyntax.TokenEqualOp, hclsyntax.TokenNotEqual, hclsyntax.TokenLessThan,
			hclsyntax.TokenLessThanEq, hclsyntax.TokenGreaterThan, hclsyntax.TokenGreaterThanEq,
			hclsyntax.TokenAnd, hclsyntax.TokenOr, hclsyntax.TokenBang, hclsyntax.TokenQuestion:
			levels[len(levels)-1].count++
			depth++
		}
		if depth > Max {
			r := t.Range
			return hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  Summary,
				Detail: fmt.Sprintf("This %s nests more than %d levels deep (brackets, quotes, interpolations and directives, "+
					"and the operators and indexes inside each, counted together), the limit of one expression.", what(template), Max),
				Subject: &r,
			}}
		}
		if t.Type != hclsyntax.TokenNewline && t.Type != hclsyntax.TokenComment {
			prev = t.Type
		}
	}
	return nil
}

// endsValue reports whether a token of type t can end a value, so that a bracket after it
// is an index rather than a tuple.
func endsValue(t hclsyntax.TokenType) bool {
	switch t {
	case hclsyntax.TokenIdent, hclsyntax.TokenNumberLit, hclsyntax.TokenCQuote, hclsyntax.TokenCParen,
		hclsyntax.TokenCBrack, hclsyntax.TokenCBrace, hclsyntax.TokenCHeredoc, hclsyntax.TokenStar:
		return true
	}
	return false
}

func what(template bool) string {
	if template {
		return "template"
	}
	return "expression"
}

// ParseTemplate is hclsyntax.ParseTemplate after [Check]: a nil expression and Check's
// diagnostic when src nests too deeply.
func ParseTemplate(src []byte, filename string, start hcl.Pos) (hclsyntax.Expression, hcl.Diagnostics) {
	if diags := Check(src, true, filename, start); diags.HasErrors() {
		return nil, diags
	}
	return hclsyntax.ParseTemplate(src, filename, start)
}

// ParseExpression is hclsyntax.ParseExpression after [Check]: a nil expression and Check's
// diagnostic when src nests too deeply.
func ParseExpression(src []byte, filename string, start hcl.Pos) (hclsyntax.Expression, hcl.Diagnostics) {
	if diags := Check(src, false, filename, start); diags.HasErrors() {
		return nil, diags
	}
	return hclsyntax.ParseExpression(src, filename, start)
}

// MaxSequences is the most template sequences (`${` and `%{`, escaped or not) one Terraform
// JSON document may hold. Every sequence is lexed, parsed, checked and evaluated by the
// engines on each plan, apply and drift scan (about 12 µs each in the embedded engine):
// 2.7 million made one object's plan and apply take 33 s of CPU. An architecture of 1,000
// resources with 20 interpolations each holds 20,000.
const MaxSequences = 100_000

// CountSequences returns how many `${` and `%{` doc holds, counting no further than
// MaxSequences+1.
func CountSequences(doc []byte) int {
	n := 0
	for i := 0; i+1 < len(doc) && n <= MaxSequences; i++ {
		if doc[i+1] == '{' && (doc[i] == '$' || doc[i] == '%') {
			n++
		}
	}
	return n
}

// SequencesError returns an error when doc holds more than [MaxSequences] template
// sequences, naming the limit; nil otherwise.
func SequencesError(doc []byte) error {
	if CountSequences(doc) > MaxSequences {
		return fmt.Errorf("the document holds more than %d template sequences (${ and %%{); every one is parsed and evaluated on each plan, apply and drift scan", MaxSequences)
	}
	return nil
}

// typeConstructors are the calls a type constraint is written with (hcl's ext/typeexpr).
var typeConstructors = map[string]bool{"list": true, "set": true, "map": true, "object": true, "tuple": true, "optional": true}

// MaxTypeParts bounds the syntax nodes of a type constraint (type names, constructors,
// literals of optional() defaults): hcl converts the defaults while the configuration is read,
// where nothing bounds the work (a set of 1,000 numbers that hash alike: 13 s).
const MaxTypeParts = 256

// TypeExpressionProblem returns what in e is not allowed in a variable's type constraint, ""
// when nothing is: type names and the constructors list, set, map, object, tuple and
// optional (without a default), [MaxTypeParts] parts at most. hcl's ext/typeexpr evaluates an
// optional attribute's default, and fills the defaults of every object it inserts, while the
// configuration is read, outside any evaluation limit: a for expression there built a cross
// product of any size (1 KB: 3 GB), and lists of objects nested 14 levels, 3^14 objects (700
// bytes: 2 GB). A variable's value is its literal default, so such defaults add nothing. hcl's ext/typeexpr evaluates an optional attribute's
// default itself, outside any evaluation limit, so a for expression there builds a cross
// product of any size (four nested loops over 100 elements in a 1 KB document: 3 GB).
func TypeExpressionProblem(e hclsyntax.Expression) string { return typeProblem(e, false) }

// TypeExpressionProblemDefaults is [TypeExpressionProblem] with literal optional() defaults
// allowed, as an engine reads a configuration (a bundled module's variables, Terraform's own
// documents), but no object inside a default's collection or object: hcl fills the defaults
// of every object it inserts, so lists of objects nested d levels build k^d objects.
func TypeExpressionProblemDefaults(e hclsyntax.Expression) string { return typeProblem(e, true) }

// typeProblem is [TypeExpressionProblem], with literal defaults when defaults is set.
func typeProblem(e hclsyntax.Expression, defaults bool) string {
	problem, parts := "", 0
	_ = hclsyntax.VisitAll(e, func(n hclsyntax.Node) hcl.Diagnostics {
		if problem != "" {
			return nil
		}
		if parts++; parts > MaxTypeParts {
			problem = fmt.Sprintf("the type has more than %d parts (names, constructors, literals)", MaxTypeParts)
			return nil
		}
		switch n := n.(type) {
		case *hclsyntax.ScopeTraversalExpr, *hclsyntax.LiteralValueExpr, *hclsyntax.TupleConsExpr,
			*hclsyntax.ObjectConsExpr, *hclsyntax.ObjectConsKeyExpr, *hclsyntax.ParenthesesExpr:
		case *hclsyntax.FunctionCallExpr:
			if !typeConstructors[n.Name] {
				problem = fmt.Sprintf("%s(...) is not a type constructor (want list, set, map, object, tuple or optional)", n.Name)
			}
			switch {
			case n.Name != "optional" || len(n.Args) < 2:
			case !defaults:
				problem = "optional() with a default (a variable's value is its literal default: write the attribute's value there; hcl fills optional() defaults while it reads the configuration, outside every evaluation limit)"
			case nestedObject(n.Args[1], false):
				problem = "an optional() default holds an object inside a collection or another object (hcl fills each inserted object's defaults, so nested defaults multiply)"
			}
		case *hclsyntax.TemplateExpr:
			if !n.IsStringLiteral() {
				problem = "a string with an interpolation or directive (a default must be a literal)"
			}
		case *hclsyntax.UnaryOpExpr:
			if _, ok := n.Val.(*hclsyntax.LiteralValueExpr); !ok {
				problem = "an operator on something other than a number (a default must be a literal)"
			}
		default:
			problem = strings.TrimPrefix(fmt.Sprintf("%T", n), "*hclsyntax.") + " (a type holds type names, constructors and literal defaults)"
		}
		return nil
	})
	return problem
}

// nestedObject reports whether the literal e holds an object constructor inside a tuple or
// another object (inside: e itself is such an element).
func nestedObject(e hclsyntax.Expression, inside bool) bool {
	switch e := e.(type) {
	case *hclsyntax.ObjectConsExpr:
		if inside {
			return true
		}
		for _, it := range e.Items {
			if nestedObject(it.ValueExpr, true) {
				return true
			}
		}
	case *hclsyntax.TupleConsExpr:
		for _, x := range e.Exprs {
			if nestedObject(x, true) {
				return true
			}
		}
	case *hclsyntax.ParenthesesExpr:
		return nestedObject(e.Expression, inside)
	}
	return false
}

// UnwrapInterpolation returns s without a "${" ... "}" wrapper around the whole of it: a
// Terraform JSON string that holds an expression (a lifecycle reference, a depends_on entry)
// may be written either way.
func UnwrapInterpolation(s string) string {
	if strings.HasPrefix(s, "${") && strings.HasSuffix(s, "}") {
		return s[2 : len(s)-1]
	}
	return s
}

// ReferenceProblem returns what in e is not a reference, "" when it is one: a traversal
// (a.b, a["k"], a[0]) whose indexes are literals or traversals themselves (each.key,
// count.index), as lifecycle.replace_triggered_by takes; anything that builds a value (a for
// expression, a splat, a call, a constructor, an operator) is named.
func ReferenceProblem(e hclsyntax.Expression) string {
	problem := ""
	_ = hclsyntax.VisitAll(e, func(n hclsyntax.Node) hcl.Diagnostics {
		switch n.(type) {
		case *hclsyntax.ScopeTraversalExpr, *hclsyntax.RelativeTraversalExpr, *hclsyntax.IndexExpr,
			*hclsyntax.LiteralValueExpr, *hclsyntax.TemplateWrapExpr, *hclsyntax.ParenthesesExpr:
		default:
			if problem == "" {
				problem = strings.TrimPrefix(fmt.Sprintf("%T", n), "*hclsyntax.") + " (want a reference)"
			}
		}
		return nil
	})
	return problem
}
