package embedded

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// addrStep is one module call in an address: its name and instance key (HasKey false: no
// key written).
type addrStep struct {
	Name   string
	Key    instanceKey
	HasKey bool
}

// absAddr is an absolute address as moved and removed blocks write it: module calls, then
// optionally a resource ("type.name"), then optionally its instance key
// (`module.a[0].terraform_data.x["k"]`, "module.a", "terraform_data.x").
type absAddr struct {
	Module []addrStep
	Res    string
	Key    instanceKey
	HasKey bool
}

// parseAbsAddr reads an absolute address from a traversal.
func parseAbsAddr(tr hcl.Traversal) (absAddr, error) {
	var ad absAddr
	var names []string
	i := 0
	name := func() (string, bool) {
		if i >= len(tr) {
			return "", false
		}
		switch s := tr[i].(type) {
		case hcl.TraverseRoot:
			i++
			return s.Name, true
		case hcl.TraverseAttr:
			i++
			return s.Name, true
		}
		return "", false
	}
	key := func() (instanceKey, bool, error) {
		if i >= len(tr) {
			return nil, false, nil
		}
		s, ok := tr[i].(hcl.TraverseIndex)
		if !ok {
			return nil, false, nil
		}
		i++
		switch {
		case s.Key.Type() == cty.String:
			return s.Key.AsString(), true, nil
		case s.Key.Type() == cty.Number:
			n, _ := s.Key.AsBigFloat().Int64()
			return n, true, nil
		}
		return nil, false, fmt.Errorf("bad index in %s", traversalText(tr))
	}
	for i < len(tr) {
		n, ok := name()
		if !ok {
			return absAddr{}, fmt.Errorf("%s is not an address", traversalText(tr))
		}
		if n == "module" && len(names) == 0 {
			call, ok := name()
			if !ok {
				return absAddr{}, fmt.Errorf("%s: want module.NAME", traversalText(tr))
			}
			k, has, err := key()
			if err != nil {
				return absAddr{}, err
			}
			ad.Module = append(ad.Module, addrStep{Name: call, Key: k, HasKey: has})
			continue
		}
		names = append(names, n)
		if len(names) == 2 && names[0] != "data" || len(names) == 3 {
			k, has, err := key()
			if err != nil {
				return absAddr{}, err
			}
			ad.Key, ad.HasKey = k, has
			if i != len(tr) {
				return absAddr{}, fmt.Errorf("%s is not a resource instance address", traversalText(tr))
			}
			break
		}
	}
	if len(names) != 0 && (len(names) < 2 || names[0] == "data" && len(names) != 3) {
		return absAddr{}, fmt.Errorf("%s is not a resource or module address", traversalText(tr))
	}
	ad.Res = strings.Join(names, ".")
	if ad.Res == "" && len(ad.Module) == 0 {
		return absAddr{}, fmt.Errorf("empty address")
	}
	return ad, nil
}

// parseAddrString parses an address written as text ("module.a[0].terraform_data.x").
func parseAddrString(s string) (absAddr, error) {
	tr, diags := hclsyntax.ParseTraversalAbs([]byte(s), "", hcl.InitialPos)
	if diags.HasErrors() {
		return absAddr{}, fmt.Errorf("%q is not an address", s)
	}
	return parseAbsAddr(tr)
}

// modulePath renders module steps as state writes them (`module.a["k"].module.b`).
func modulePath(steps []addrStep) string {
	var b strings.Builder
	for i, st := range steps {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString("module." + st.Name)
		if st.HasKey {
			b.WriteString(keyString(st.Key))
		}
	}
	return b.String()
}

// parseModulePath reads a state resource's module field.
func parseModulePath(s string) ([]addrStep, error) {
	if s == "" {
		return nil, nil
	}
	ad, err := parseAddrString(s)
	if err != nil || ad.Res != "" {
		return nil, fmt.Errorf("%q is not a module path", s)
	}
	return ad.Module, nil
}

// String renders the address as Terraform does.
func (a absAddr) String() string {
	s := modulePath(a.Module)
	if a.Res != "" {
		if s != "" {
			s += "."
		}
		s += a.Res
		if a.HasKey {
			s += keyString(a.Key)
		}
	}
	return s
}

// hasKeys reports whether any step of the address has an instance key.
func (a absAddr) hasKeys() bool {
	if a.HasKey {
		return true
	}
	for _, st := range a.Module {
		if st.HasKey {
			return true
		}
	}
	return false
}

// configAddress drops the instance keys of a resource address's module path and of the
// resource ("module.a[0].x.y[1]" -> "module.a.x.y"): the address Terraform state records
// in dependencies.
func configAddress(addr string) string {
	if !strings.Contains(addr, "[") {
		return addr
	}
	ad, err := parseAddrString(addr)
	if err != nil {
		return stripIndex(addr)
	}
	for i := range ad.Module {
		ad.Module[i].Key, ad.Module[i].HasKey = nil, false
	}
	ad.Key, ad.HasKey = nil, false
	return ad.String()
}

// resourceKey is a state resource's address ("module.a[0].type.name", "data.type.name").
func resourceKey(r *StateResource) string {
	a := r.Type + "." + r.Name
	if r.Mode == "data" {
		a = "data." + a
	}
	if r.Module != "" {
		return r.Module + "." + a
	}
	return a
}
