package tlisp

import (
	"github.com/lava-operator/lava/internal/lang/arch"
)

// moduleMeta are the meta-arguments of a Terraform module block the dialect does not write:
// count and for_each (the policy could not count the instances), providers and version
// (bundled modules inherit the root's providers), depends_on.
var moduleMeta = map[string]bool{"count": true, "for_each": true, "providers": true, "version": true, "depends_on": true}

// evalModules evaluates :modules ((NAME :source "./modules/DIR" :arg value ...) ...) into
// module calls. NAME is a symbol (the module block's name, a Terraform identifier); :source is
// required; every other key is an input variable of the module (dashes turned into
// underscores), its value evaluated as an attribute's.
func (e *evaluator) evalModules(n *Node) []arch.ModuleCall {
	if n.Kind != NodeList {
		e.errorf(n.Pos, "expected deflava-architecture form, got :modules not a list (expected ((NAME :source \"./modules/DIR\" :input value ...) ...))")
		return nil
	}
	var out []arch.ModuleCall
	for _, m := range n.List {
		if e.full {
			break
		}
		if m.Kind != NodeList {
			e.errorf(m.Pos, "expected deflava-architecture form, got module not a list (expected (NAME :source \"./modules/DIR\" :input value ...), got %s)", describe(m))
			continue
		}
		if len(m.List) == 0 || m.List[0].Kind != NodeSymbol {
			e.errorf(at(m, 0), "expected deflava-architecture form, got module head not sym (expected a module name like net)")
			continue
		}
		mc := arch.ModuleCall{Name: m.List[0].Text, Pos: m.Pos}
		if !validName(mc.Name) {
			e.errorf(m.List[0].Pos, "module name %q is not a Terraform identifier (letters, digits, _ and -, starting with a letter or _)", mc.Name)
			continue
		}
		if p, dup := e.modules[mc.Name]; dup {
			e.errorf(m.Pos, "duplicate module module.%s (first declared at %s)", mc.Name, p)
			continue
		}
		ok, hasSource := true, false
		taintMark := e.taints
		for i := 1; i < len(m.List); i += 2 {
			k := m.List[i]
			if k.Kind != NodeKeyword {
				e.errorf(k.Pos, "expected deflava-architecture form, got module key not :kw (expected (NAME :key value ...), got %s)", describe(k))
				ok = false
				continue
			}
			if i+1 >= len(m.List) {
				e.errorf(k.Pos, "module %s: :%s has no value", mc.Name, k.Text)
				ok = false
				break
			}
			v := m.List[i+1]
			key := kebabToSnake(k.Text)
			switch {
			case key == "source":
				if v.Kind != NodeString {
					e.errorf(v.Pos, "type mismatch: expected module :source string (\"./modules/DIR\"), got %s", describe(v))
					ok = false
					continue
				}
				if !e.noSecretName(v, "module source") {
					ok = false
					continue
				}
				s, sok := e.interp(v)
				if !sok {
					ok = false
					continue
				}
				mc.Source, hasSource = s, true
			case moduleMeta[key]:
				e.errorf(k.Pos, "module %s: :%s is not supported (a bundled module inherits the root's providers; count, for_each and depends_on are not written in the dialect)", mc.Name, k.Text)
				ok = false
			default:
				val, vok := e.evalValue(v)
				if !vok {
					ok = false
					continue
				}
				if _, dup := mc.Arguments.Get(key); dup {
					e.warnf(k.Pos, "module %s: :%s is set twice; the last value wins", mc.Name, k.Text)
				}
				mc.Arguments.Set(key, val)
			}
		}
		if !hasSource && ok {
			e.errorf(m.Pos, "module %s: missing :source (expected :source \"./modules/DIR\", a module directory bundled with the architecture)", mc.Name)
			ok = false
		}
		mc.Secret = e.taints > taintMark
		setMap(&e.modules, mc.Name, m.Pos)
		if ok {
			out = append(out, mc)
		}
	}
	return out
}
