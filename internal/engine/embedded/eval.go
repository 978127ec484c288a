package embedded

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/zclconf/go-cty/cty"
)

// evalState holds the values references resolve to during one plan or apply: each resource's
// value (an object, a tuple of objects for count, an object of objects for for_each) and the
// locals.
type evalState struct {
	cfg *Config

	mu     sync.RWMutex
	values map[string]cty.Value
	locals map[string]cty.Value
}

func newEvalState(cfg *Config) *evalState {
	return &evalState{cfg: cfg, values: map[string]cty.Value{}, locals: map[string]cty.Value{}}
}

func (e *evalState) set(addr string, v cty.Value) {
	e.mu.Lock()
	e.values[addr] = v
	e.mu.Unlock()
}

// instanceScope resolves references for one resource instance.
type instanceScope struct {
	ev                 *evalState
	countIndex         cty.Value
	eachKey, eachValue cty.Value
	depth              int
}

func (s instanceScope) resolve(r *ref) (cty.Value, error) {
	switch r.kind {
	case "count":
		if s.countIndex == cty.NilVal {
			return cty.NilVal, fmt.Errorf("${%s}: count.index is only valid in a resource with count", r.text)
		}
		if r.name != "index" {
			return cty.NilVal, fmt.Errorf("${%s}: count has only index", r.text)
		}
		return s.countIndex, nil
	case "each":
		if s.eachKey == cty.NilVal {
			return cty.NilVal, fmt.Errorf("${%s}: each is only valid in a resource with for_each", r.text)
		}
		switch r.name {
		case "key":
			return applySteps(s.eachKey, r.rest, r.text)
		case "value":
			return applySteps(s.eachValue, r.rest, r.text)
		}
		return cty.NilVal, fmt.Errorf("${%s}: each has only key and value", r.text)
	case "local":
		v, err := s.local(r.name)
		if err != nil {
			return cty.NilVal, err
		}
		return applySteps(v, r.rest, r.text)
	default:
		s.ev.mu.RLock()
		v, ok := s.ev.values[r.address()]
		s.ev.mu.RUnlock()
		if !ok {
			return cty.NilVal, fmt.Errorf("${%s}: reference to undeclared or unevaluated %s", r.text, r.address())
		}
		return applySteps(v, r.rest, r.text)
	}
}

func (s instanceScope) local(name string) (cty.Value, error) {
	s.ev.mu.RLock()
	v, ok := s.ev.locals[name]
	s.ev.mu.RUnlock()
	if ok {
		return v, nil
	}
	x, ok := s.ev.cfg.Locals[name]
	if !ok {
		return cty.NilVal, fmt.Errorf("local.%s is not declared", name)
	}
	if s.depth > 32 {
		return cty.NilVal, fmt.Errorf("local.%s: locals nest too deep (a cycle?)", name)
	}
	inner := instanceScope{ev: s.ev, depth: s.depth + 1}
	v, err := evalJSON(x, inner)
	if err != nil {
		return cty.NilVal, fmt.Errorf("local.%s: %w", name, err)
	}
	if v.IsWhollyKnown() {
		s.ev.mu.Lock()
		s.ev.locals[name] = v
		s.ev.mu.Unlock()
	}
	return v, nil
}

// dependencies returns the configuration addresses each resource depends on, through locals,
// and checks every reference names something declared.
func (c *Config) dependencies() (map[string][]string, error) {
	declared := map[string]bool{}
	for _, rc := range c.Resources {
		declared[rc.Address()] = true
	}
	localDeps := map[string][]string{}
	var visitLocal func(name string, stack []string) ([]string, error)
	visitLocal = func(name string, stack []string) ([]string, error) {
		if d, ok := localDeps[name]; ok {
			return d, nil
		}
		for _, s := range stack {
			if s == name {
				return nil, fmt.Errorf("locals form a cycle: %s", strings.Join(append(stack, name), " -> "))
			}
		}
		x, ok := c.Locals[name]
		if !ok {
			return nil, fmt.Errorf("local.%s is not declared", name)
		}
		refs, err := collectRefs(x)
		if err != nil {
			return nil, fmt.Errorf("local.%s: %w", name, err)
		}
		set := map[string]bool{}
		for _, r := range refs {
			switch r.kind {
			case "local":
				d, err := visitLocal(r.name, append(stack, name))
				if err != nil {
					return nil, err
				}
				for _, x := range d {
					set[x] = true
				}
			case "resource", "data":
				if !declared[r.address()] {
					return nil, fmt.Errorf("local.%s: reference to undeclared %s", name, r.address())
				}
				set[r.address()] = true
			default:
				return nil, fmt.Errorf("local.%s: ${%s} is not valid in a local", name, r.text)
			}
		}
		out := setKeys(set)
		localDeps[name] = out
		return out, nil
	}
	deps := map[string][]string{}
	for _, rc := range c.Resources {
		set := map[string]bool{}
		for _, r := range rc.refs {
			switch r.kind {
			case "local":
				d, err := visitLocal(r.name, nil)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", rc.Address(), err)
				}
				for _, x := range d {
					set[x] = true
				}
			case "resource", "data":
				if !declared[r.address()] {
					return nil, fmt.Errorf("%s: reference to undeclared %s", rc.Address(), r.address())
				}
				set[r.address()] = true
			}
		}
		for _, d := range rc.DependsOn {
			d = stripIndex(d)
			if !declared[d] {
				return nil, fmt.Errorf("%s: depends_on names undeclared %s", rc.Address(), d)
			}
			set[d] = true
		}
		delete(set, rc.Address())
		deps[rc.Address()] = setKeys(set)
	}
	for name, o := range c.Outputs {
		refs, err := collectRefs(o.Value)
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", name, err)
		}
		for _, r := range refs {
			switch r.kind {
			case "local":
				if _, err := visitLocal(r.name, nil); err != nil {
					return nil, fmt.Errorf("output %s: %w", name, err)
				}
			case "resource", "data":
				if !declared[r.address()] {
					return nil, fmt.Errorf("output %s: reference to undeclared %s", name, r.address())
				}
			default:
				return nil, fmt.Errorf("output %s: ${%s} is not valid in an output", name, r.text)
			}
		}
	}
	return deps, nil
}

func stripIndex(addr string) string {
	if i := strings.IndexByte(addr, '['); i >= 0 {
		return addr[:i]
	}
	return addr
}

func setKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
