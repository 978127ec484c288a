package render

import (
	"strings"

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

// EscapeBindings returns a copy of b whose every value (scalars, list elements and record
// fields) went through [EscapeTemplate]. A binding is data: whatever text it holds reaches the
// engine as that literal text, never as an expression the engine evaluates (docs/security.md,
// "Rendering"). b is not modified.
func EscapeBindings(b tlisp.Bindings) tlisp.Bindings {
	out := tlisp.Bindings{}
	if b.Scalars != nil {
		out.Scalars = make(map[string]string, len(b.Scalars))
		for k, v := range b.Scalars {
			out.Scalars[k] = EscapeTemplate(v)
		}
	}
	if b.Lists != nil {
		out.Lists = make(map[string][]string, len(b.Lists))
		for k, l := range b.Lists {
			el := make([]string, len(l))
			for i, v := range l {
				el[i] = EscapeTemplate(v)
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
					m[f] = EscapeTemplate(v)
				}
				er[i] = m
			}
			out.Records[k] = er
		}
	}
	return out
}
