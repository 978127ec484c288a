package render

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// templateEscaper doubles the opening of a Terraform template sequence: "${" becomes "$${" and
// "%{" becomes "%%{", the escapes of the HCL native template syntax that Terraform JSON string
// values follow (HCL's "JSON Configuration Syntax" specification: a string in an expression
// position is parsed as a template).
var templateEscaper = strings.NewReplacer("${", "$${", "%{", "%%{")

// EscapeTemplate returns s escaped so that an engine evaluating it as a Terraform template
// yields s itself, whatever text stands next to it: every "${" becomes "$${" and every "%{"
// becomes "%%{", and a run of "$" and "%" at the end of s becomes the interpolation of that
// run as a string literal (`${"$"}`), so that a "{" that follows in the rendered string (the
// source's text or the next binding: "{a}{b}" with a = "$" and b = "{path.cwd}") cannot open a
// sequence with it. Other text, "$" and "%" elsewhere included, is unchanged.
func EscapeTemplate(s string) string {
	if strings.Contains(s, "{") {
		s = templateEscaper.Replace(s)
	}
	run := len(s) - len(strings.TrimRight(s, "$%"))
	if run == 0 {
		return s
	}
	return s[:len(s)-run] + `${"` + s[len(s)-run:] + `"}`
}

// SensitiveTemplate returns the template that yields s marked sensitive:
// `${sensitive("S")}`, S being s as an HCL quoted string literal (hclwrite's escaping: `"`,
// `\`, control characters, and "${" and "%{" doubled), so an engine evaluating it gets s itself,
// never an expression, with OpenTofu's sensitive mark. Both engines carry the mark through
// every function and expression over the value, print it as "(sensitive value)" in plans and
// diagnostics, and refuse it in count, for_each and object keys, so a value a source derives
// from a Secret binding is kept out of status, events and logs as the value itself is
// (docs/security.md, "Rendering").
func SensitiveTemplate(s string) string {
	return "${sensitive(" + string(hclwrite.TokensForValue(cty.StringVal(s)).Bytes()) + ")}"
}

// EscapeBindings returns a copy of b whose every value (scalars, list elements and record
// fields) went through [EscapeTemplate], or through [SensitiveTemplate] for a binding named in
// secret (its values come from a Secret). A binding is data: whatever text it holds reaches the
// engine as that literal text, never as an expression the engine evaluates (docs/security.md,
// "Rendering"). b is not modified.
func EscapeBindings(b tlisp.Bindings, secret map[string]bool) tlisp.Bindings {
	esc := func(k string) func(string) string {
		if secret[k] {
			return SensitiveTemplate
		}
		return EscapeTemplate
	}
	out := tlisp.Bindings{}
	if b.Scalars != nil {
		out.Scalars = make(map[string]string, len(b.Scalars))
		for k, v := range b.Scalars {
			out.Scalars[k] = esc(k)(v)
		}
	}
	if b.Lists != nil {
		out.Lists = make(map[string][]string, len(b.Lists))
		for k, l := range b.Lists {
			el := make([]string, len(l))
			for i, v := range l {
				el[i] = esc(k)(v)
			}
			out.Lists[k] = el
		}
	}
	if b.Records != nil {
		out.Records = make(map[string][]map[string]string, len(b.Records))
		for k, rows := range b.Records {
			er := make([]map[string]string, len(rows))
			for i, row := range rows {
				m := make(map[string]string, len(row))
				for f, v := range row {
					m[f] = esc(k)(v)
				}
				er[i] = m
			}
			out.Records[k] = er
		}
	}
	return out
}

// TemplateSequences returns the byte ranges [start, end) of s, read as a Terraform template
// (hclsyntax's template lexer: how both engines read a Terraform JSON string), that lie inside
// a template sequence: from a "${" or "%{" to its closing "}", the expression's quoted strings
// and nested sequences included; a sequence left open runs to the end of s. The template's
// text, "$${" and "%%{" escapes included, is in no range. It is tlisp.Options'
// TemplateSequences: the dialect refuses to interpolate a value inside a sequence, where a
// quote or parenthesis in it would be code (a binding could close the source's "\"{key}\""
// string and have path.cwd evaluated).
func TemplateSequences(s string) [][2]int {
	var out [][2]int
	depth, start := 0, 0
	toks, _ := hclsyntax.LexTemplate([]byte(s), "", hcl.InitialPos) // an invalid token is still a token
	for _, tok := range toks {
		switch tok.Type {
		case hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			if depth == 0 {
				start = tok.Range.Start.Byte
			}
			depth++
		case hclsyntax.TokenTemplateSeqEnd:
			if depth > 0 {
				depth--
				if depth == 0 {
					out = append(out, [2]int{start, tok.Range.End.Byte})
				}
			}
		}
	}
	if depth > 0 {
		out = append(out, [2]int{start, len(s)})
	}
	return out
}
