package render

import (
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/hclnest"
)

// SensitiveOutputs returns the outputs of a that are rendered with "sensitive": true, so
// every engine stores them as sensitive and Lava puts them only in the outputs Secret, never
// in status, events, logs, receipts or anomalies (docs/security.md, "Rendering"). An output is
// sensitive when the source marks it (sensitive VALUE), when its value interpolates a secret
// binding, or when it references (a ref form or a ${} traversal) a resource, data source or
// local that derives from one: a resource whose attribute interpolates a secret binding or
// references such an address, and so on transitively.
func SensitiveOutputs(a *arch.Architecture) map[string]bool {
	out := map[string]bool{}
	if a == nil {
		return out
	}
	tainted := map[string]bool{}
	for i := range a.Resources {
		if a.Resources[i].Secret {
			tainted[a.Resources[i].Address()] = true
		}
	}
	for i := range a.DataSources {
		if a.DataSources[i].Secret {
			tainted["data."+a.DataSources[i].Address()] = true
		}
	}
	for k := range a.Locals.All() {
		if a.Secret["local."+k] {
			tainted["local."+k] = true
		}
	}
	for i := range a.Modules {
		if a.Modules[i].Secret {
			tainted["module."+a.Modules[i].Name] = true
		}
	}
	// The fixpoint of "references a tainted address".
	for changed := true; changed; {
		changed = false
		mark := func(addr string, refs func(func(string) bool) bool) {
			if !tainted[addr] && refs(func(r string) bool { return tainted[r] }) {
				tainted[addr], changed = true, true
			}
		}
		for i := range a.Resources {
			r := &a.Resources[i]
			mark(r.Address(), func(f func(string) bool) bool { return mapRefs(&r.Attributes, f) })
		}
		for i := range a.DataSources {
			r := &a.DataSources[i]
			mark("data."+r.Address(), func(f func(string) bool) bool { return mapRefs(&r.Attributes, f) })
		}
		for k, v := range a.Locals.All() {
			mark("local."+k, func(f func(string) bool) bool { return valueRefs(v, f) })
		}
		for i := range a.Modules {
			m := &a.Modules[i]
			mark("module."+m.Name, func(f func(string) bool) bool { return mapRefs(&m.Arguments, f) })
		}
	}
	if len(tainted) == 0 && len(a.Secret) == 0 && len(a.SensitiveOutputs) == 0 {
		return out
	}
	for k, v := range a.Outputs.All() {
		if a.SensitiveOutputs[k] || a.Secret["output."+k] || valueRefs(v, func(r string) bool { return tainted[r] }) {
			out[k] = true
		}
	}
	return out
}

// mapRefs reports whether any value of m references an address for which hit is true.
func mapRefs(m *arch.Map, hit func(string) bool) bool {
	for k, v := range m.All() {
		if stringRefs(k, hit) || valueRefs(v, hit) {
			return true
		}
	}
	return false
}

// valueRefs reports whether v references an address for which hit is true: a ref value's
// "type.name" (data sources as "data.type.name"), or a traversal inside a ${} of a string.
func valueRefs(v arch.Value, hit func(string) bool) bool {
	switch v.Kind {
	case arch.KindRef:
		return hit(v.Ref.Address())
	case arch.KindString:
		return stringRefs(v.Str, hit)
	case arch.KindList:
		for _, e := range v.List {
			if valueRefs(e, hit) {
				return true
			}
		}
	case arch.KindMap:
		if v.Map != nil {
			return mapRefs(v.Map, hit)
		}
	}
	return false
}

// stringRefs parses s as an HCL template (as engines read Terraform JSON strings) and reports
// whether a traversal names an address for which hit is true. A string that does not parse
// references nothing here (the policy gate refuses it).
func stringRefs(s string, hit func(string) bool) bool {
	if !strings.Contains(s, "${") && !strings.Contains(s, "%{") {
		return false
	}
	expr, diags := hclnest.ParseTemplate([]byte(s), "ref", hcl.InitialPos)
	if diags.HasErrors() {
		return false
	}
	for _, tr := range expr.Variables() {
		var parts []string
		parts = append(parts, tr.RootName())
		for _, step := range tr[1:] {
			if at, ok := step.(hcl.TraverseAttr); ok {
				parts = append(parts, at.Name)
			} else {
				break
			}
		}
		n := 2
		if parts[0] == "data" {
			n = 3
		}
		if len(parts) >= n && hit(strings.Join(parts[:n], ".")) {
			return true
		}
	}
	return false
}
