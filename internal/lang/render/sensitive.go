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
//
// Each address's references are read once (its templates parsed once), and taint spreads
// from the secret addresses along the reverse references in one walk: the work is the size of
// the architecture, however its references chain. (Looping to a fixpoint, re-reading every
// untainted address each pass, took 80 s for 2,000 locals declared in reverse order.)
func SensitiveOutputs(a *arch.Architecture) map[string]bool {
	out, _ := sensitiveOutputs(a)
	return out
}

// sensitiveOutputs is [SensitiveOutputs]; parses counts the templates it parsed.
func sensitiveOutputs(a *arch.Architecture) (out map[string]bool, parses int) {
	out = map[string]bool{}
	if a == nil {
		return out, 0
	}
	var rr refReader
	tainted := map[string]bool{}
	var queue []string
	seed := func(addr string) {
		if !tainted[addr] {
			tainted[addr] = true
			queue = append(queue, addr)
		}
	}
	for i := range a.Resources {
		if a.Resources[i].Secret {
			seed(a.Resources[i].Address())
		}
	}
	for i := range a.DataSources {
		if a.DataSources[i].Secret {
			seed("data." + a.DataSources[i].Address())
		}
	}
	for k := range a.Locals.All() {
		if a.Secret["local."+k] {
			seed("local." + k)
		}
	}
	for i := range a.Modules {
		if a.Modules[i].Secret {
			seed("module." + a.Modules[i].Name)
		}
	}
	if len(queue) > 0 {
		// referrers[r] are the addresses whose values reference r.
		referrers := map[string][]string{}
		edges := func(addr string, refs func(func(string) bool) bool) {
			if tainted[addr] {
				return // tainted already: what it references does not matter
			}
			refs(func(r string) bool {
				if l := referrers[r]; len(l) == 0 || l[len(l)-1] != addr {
					referrers[r] = append(l, addr)
				}
				return false
			})
		}
		for i := range a.Resources {
			r := &a.Resources[i]
			edges(r.Address(), func(f func(string) bool) bool { return rr.mapRefs(&r.Attributes, f) })
		}
		for i := range a.DataSources {
			r := &a.DataSources[i]
			edges("data."+r.Address(), func(f func(string) bool) bool { return rr.mapRefs(&r.Attributes, f) })
		}
		for k, v := range a.Locals.All() {
			edges("local."+k, func(f func(string) bool) bool { return rr.valueRefs(v, f) })
		}
		for i := range a.Modules {
			m := &a.Modules[i]
			edges("module."+m.Name, func(f func(string) bool) bool { return rr.mapRefs(&m.Arguments, f) })
		}
		for len(queue) > 0 {
			r := queue[len(queue)-1]
			queue = queue[:len(queue)-1]
			for _, addr := range referrers[r] {
				seed(addr)
			}
		}
	}
	if len(tainted) == 0 && len(a.Secret) == 0 && len(a.SensitiveOutputs) == 0 {
		return out, rr.parses
	}
	for k, v := range a.Outputs.All() {
		if a.SensitiveOutputs[k] || a.Secret["output."+k] || rr.valueRefs(v, func(r string) bool { return tainted[r] }) {
			out[k] = true
		}
	}
	return out, rr.parses
}

// refReader reads the references of values; parses counts the templates it parsed.
type refReader struct{ parses int }

// mapRefs reports whether any value of m references an address for which hit is true.
func (rr *refReader) mapRefs(m *arch.Map, hit func(string) bool) bool {
	for k, v := range m.All() {
		if rr.stringRefs(k, hit) || rr.valueRefs(v, hit) {
			return true
		}
	}
	return false
}

// valueRefs reports whether v references an address for which hit is true: a ref value's
// "type.name" (data sources as "data.type.name"), or a traversal inside a ${} of a string.
func (rr *refReader) valueRefs(v arch.Value, hit func(string) bool) bool {
	switch v.Kind {
	case arch.KindRef:
		return hit(v.Ref.Address())
	case arch.KindString:
		return rr.stringRefs(v.Str, hit)
	case arch.KindList:
		for _, e := range v.List {
			if rr.valueRefs(e, hit) {
				return true
			}
		}
	case arch.KindMap:
		if v.Map != nil {
			return rr.mapRefs(v.Map, hit)
		}
	}
	return false
}

// stringRefs parses s as an HCL template (as engines read Terraform JSON strings) and reports
// whether a traversal names an address for which hit is true. A string that does not parse
// references nothing here (the policy gate refuses it).
func (rr *refReader) stringRefs(s string, hit func(string) bool) bool {
	if !strings.Contains(s, "${") && !strings.Contains(s, "%{") {
		return false
	}
	rr.parses++
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
