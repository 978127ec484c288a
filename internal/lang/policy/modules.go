package policy

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/bundle"
)

// maxModuleDepth bounds the module calls the policy follows (the embedded engine's bound).
const maxModuleDepth = 16

// modules checks the module calls of the rendered document and the modules bundled in it
// (docs/design/0017-modules-and-bundled-sources.md) and returns the resource and data source
// instances the bundled modules add (for maxResources). A local source passes only when it
// resolves inside the bundle (bundle.Resolve, the engines' rule) and names a bundled
// directory; a remote one only with allowRemoteModules. Every bundled module's body is held to
// the root's rules: denied resource and data source types (in check blocks too), provisioner
// and connection blocks, file paths outside fileWriteRoots, provider sources (its
// required_providers and the providers its resources imply) and denied functions in any
// string; it may not configure providers or hold import, moved or removed blocks, and its
// count and for_each must be literals the policy can count.
func (c *checker) modules(rendered []byte) int64 {
	if len(rendered) == 0 {
		return 0
	}
	var root map[string]json.RawMessage
	if err := json.Unmarshal(rendered, &root); err != nil {
		return 0 // topLevel reports it
	}
	mods, err := bundle.Read(rendered)
	if err != nil {
		c.add(c.a.Pos, "the bundled modules cannot be checked: %v", err)
		return 0
	}
	m := &moduleWalk{c: c, bundle: mods, reached: map[string]bool{}, total: map[string]int64{}}
	m.declared = map[string]bool{"terraform": true}
	for _, pr := range c.a.Providers {
		m.declared[pr.Name] = true
	}
	var n int64
	if raw, ok := root["module"]; ok {
		n = m.calls(c.a.Pos, "", raw, nil)
	}
	// A bundled directory no call reaches is checked all the same: it is part of the
	// document, and a reader other than the engines might load it.
	for _, dir := range slices.Sorted(maps.Keys(mods)) {
		if !m.reached[dir] {
			m.body(c.a.Pos, dir, nil)
		}
	}
	return n
}

type moduleWalk struct {
	c        *checker
	bundle   map[string][]byte
	declared map[string]bool // provider local names the root declares
	reached  map[string]bool
	total    map[string]int64 // a checked module's instances, its nested calls included
}

// calls checks the module calls of one module (caller "" is the root) and returns the
// instances they add. stack holds the directories of the calling modules.
func (m *moduleWalk) calls(pos arch.Pos, caller string, raw json.RawMessage, stack []string) int64 {
	c := m.c
	in := "" // a prefix of the messages: "" in the root
	if caller != "" {
		in = "bundled module " + caller + ": "
	}
	blocks, ok := JSONObjects(raw)
	if !ok {
		c.add(pos, "%smodule blocks cannot be checked (want an object of module calls)", in)
		return 0
	}
	var n int64
	for _, calls := range blocks {
		for _, name := range slices.Sorted(maps.Keys(calls)) {
			bodies, ok := JSONObjects(calls[name])
			if !ok {
				c.add(pos, "%smodule %s cannot be checked (want an object)", in, name)
				continue
			}
			for _, body := range bodies {
				n = addSat(n, m.call(pos, caller, in, name, body, stack))
			}
		}
	}
	return n
}

// call checks one module call and returns the instances it adds.
func (m *moduleWalk) call(pos arch.Pos, caller, in, name string, body map[string]json.RawMessage, stack []string) int64 {
	c := m.c
	if caller == "" {
		pos = c.modulePos(name)
	}
	var src string
	if err := json.Unmarshal(body["source"], &src); err != nil {
		c.add(pos, "%smodule %s: want a literal string source", in, name)
		return 0
	}
	if !bundle.IsLocal(src) {
		if !c.p.AllowRemoteModules {
			c.add(pos, "%smodule %s: the remote source %q is not allowed (allowRemoteModules is false)", in, name, Clip(src))
		}
		return 0
	}
	dir, err := bundle.Resolve(caller, src)
	if err != nil {
		c.add(pos, "%smodule %s: the local source %q is not allowed (%v)", in, name, Clip(src), err)
		return 0
	}
	if _, ok := m.bundle[dir]; !ok {
		c.add(pos, "%smodule %s: the local source %q names %s, which is not bundled in the rendered document (a local source resolves only inside the bundle; only a bundled architecture ships module directories)",
			in, name, Clip(src), dir)
		return 0
	}
	if slices.Contains(stack, dir) || caller == dir {
		c.add(pos, "%smodule %s: module %s calls itself", in, name, dir)
		return 0
	}
	if len(stack) >= maxModuleDepth {
		c.add(pos, "%smodule %s: modules nest deeper than %d", in, name, maxModuleDepth)
		return 0
	}
	k, ok := m.multiplicity(pos, in+"module "+name, body)
	if !ok {
		return 0
	}
	total, done := m.total[dir]
	if !done {
		if caller != "" {
			stack = append(stack, caller)
		}
		total = m.body(pos, dir, stack)
		m.total[dir] = total
	}
	return mulSat(k, total)
}

// body checks the bundled module dir (once) and returns its instances, nested calls included.
func (m *moduleWalk) body(pos arch.Pos, dir string, stack []string) int64 {
	c := m.c
	m.reached[dir] = true
	in := "bundled module " + dir
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(m.bundle[dir], &doc); err != nil {
		c.add(pos, "%s cannot be checked: %v", in, err)
		return 0
	}
	declared := maps.Clone(m.declared)
	if raw, ok := doc["terraform"]; ok {
		m.terraform(pos, in, raw, declared)
	}
	var n int64
	for _, key := range slices.Sorted(maps.Keys(doc)) {
		raw := doc[key]
		switch key {
		case "variable", "output", "locals", "terraform", "//", "module":
		case "resource", "data":
			n = addSat(n, m.blocks(pos, in, key == "data", raw, declared))
		case "check":
			checks, ok := JSONObjects(raw)
			if !ok {
				c.add(pos, "%s: check blocks cannot be checked", in)
				continue
			}
			for _, byName := range checks {
				for _, name := range slices.Sorted(maps.Keys(byName)) {
					bodies, _ := JSONObjects(byName[name])
					for _, b := range bodies {
						if d, ok := b["data"]; ok {
							m.blocks(pos, in+" check "+name, true, d, declared)
						}
					}
				}
			}
		case "provider", "import", "moved", "removed":
			c.add(pos, "%s: a %s block is not allowed in a module (modules inherit the root's providers; import, moved and removed blocks belong in the root)", in, key)
		default:
			c.add(pos, "%s: the top-level block %q is not allowed in a module", in, Clip(key))
		}
	}
	if raw, ok := doc["module"]; ok {
		n = addSat(n, m.calls(pos, dir, raw, stack))
	}
	var v any
	if json.Unmarshal(m.bundle[dir], &v) == nil {
		c.walk(pos, "bundled module "+dir+" $", v)
	}
	return n
}

// terraform checks a module's terraform block: required_providers (each source against the
// allow-list, its local names added to declared) and required_version only.
func (m *moduleWalk) terraform(pos arch.Pos, in string, raw json.RawMessage, declared map[string]bool) {
	c := m.c
	blocks, ok := JSONObjects(raw)
	if !ok {
		c.add(pos, "%s: the terraform block cannot be checked", in)
		return
	}
	for _, b := range blocks {
		for _, k := range slices.Sorted(maps.Keys(b)) {
			switch k {
			case "required_version":
			case "required_providers":
				reqs, ok := JSONObjects(b[k])
				if !ok {
					c.add(pos, "%s: required_providers cannot be checked", in)
					continue
				}
				for _, r := range reqs {
					for _, name := range slices.Sorted(maps.Keys(r)) {
						var req struct {
							Source string `json:"source"`
						}
						_ = json.Unmarshal(r[name], &req) // a bare version string: hashicorp/NAME
						c.providerSource(pos, name+" (required by "+in+")", req.Source)
						declared[name] = true
					}
				}
			default:
				c.add(pos, "%s: the terraform block may hold only required_providers and required_version, not %q", in, Clip(k))
			}
		}
	}
}

// blocks checks a module's resource or data blocks ({TYPE: {NAME: {...}}}) with the root's
// rules and returns their instances.
func (m *moduleWalk) blocks(pos arch.Pos, in string, data bool, raw json.RawMessage, declared map[string]bool) int64 {
	c := m.c
	types, ok := JSONObjects(raw)
	if !ok {
		c.add(pos, "%s: resource blocks cannot be checked", in)
		return 0
	}
	var n int64
	for _, byType := range types {
		for _, typ := range slices.Sorted(maps.Keys(byType)) {
			names, ok := JSONObjects(byType[typ])
			if !ok {
				c.add(pos, "%s: %s blocks cannot be checked", in, Clip(typ))
				continue
			}
			for _, byName := range names {
				for _, name := range slices.Sorted(maps.Keys(byName)) {
					bodies, ok := JSONObjects(byName[name])
					if !ok {
						c.add(pos, "%s: %s.%s cannot be checked (want an object)", in, Clip(typ), Clip(name))
						continue
					}
					for _, body := range bodies {
						n = addSat(n, m.block(pos, in, data, typ, name, body, declared))
					}
				}
			}
		}
	}
	return n
}

func (m *moduleWalk) block(pos arch.Pos, in string, data bool, typ, name string, body map[string]json.RawMessage, declared map[string]bool) int64 {
	c := m.c
	what := in + ": resource " + typ + "." + name
	key := typ
	if data {
		what = in + ": data source " + typ + "." + name
		key = "data." + typ
		if slices.Contains(c.p.DeniedDataSources, typ) {
			c.add(pos, "%s: the %s data source is not allowed (deniedDataSources)", what, typ)
		}
	} else if slices.Contains(c.p.DeniedResources, typ) {
		c.add(pos, "%s: the %s resource is not allowed (deniedResources)", what, typ)
	}
	for _, k := range []string{"provisioner", "connection"} {
		if _, ok := body[k]; ok && !c.p.AllowProvisioners {
			c.add(pos, "%s: a %s block is not allowed: it would run in Lava's applier (allowProvisioners is false)", what, k)
		}
	}
	local, _, _ := strings.Cut(typ, "_")
	if raw, ok := body["provider"]; ok {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			c.add(pos, "%s: the provider meta-argument must name a provider configuration (NAME or NAME.ALIAS)", what)
		} else if ref, ok := metaProviderName(arch.String(s)); ok {
			local = ref
		} else {
			c.add(pos, "%s: the provider meta-argument must name a provider configuration (NAME or NAME.ALIAS)", what)
		}
	}
	if !declared[local] {
		declared[local] = true
		c.impliedProvider(pos, what, local)
	}
	provider := c.providerAddr(local)
	for _, attr := range slices.Sorted(maps.Keys(body)) {
		var s string
		isString := json.Unmarshal(body[attr], &s) == nil
		c.filePath(pos, what, provider, key, attr, s, isString, "non-string value")
	}
	k, ok := m.multiplicity(pos, what, body)
	if !ok {
		return 0
	}
	return k
}

// multiplicity is the number of instances count or for_each make of a block: a literal
// count, the entries of a literal for_each, else 1. Anything else is refused: the policy
// could not count the instances (maxResources).
func (m *moduleWalk) multiplicity(pos arch.Pos, what string, body map[string]json.RawMessage) (int64, bool) {
	c := m.c
	if raw, ok := body["count"]; ok {
		var n int64
		if err := json.Unmarshal(raw, &n); err != nil || n < 0 {
			c.add(pos, "%s: count must be a literal non-negative number in a bundled module, so the policy can count its instances (maxResources)", what)
			return 0, false
		}
		return n, true
	}
	if raw, ok := body["for_each"]; ok {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) == nil {
			return int64(len(obj)), true
		}
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) == nil {
			return int64(len(list)), true
		}
		c.add(pos, "%s: for_each must be a literal object in a bundled module, so the policy can count its instances (maxResources)", what)
		return 0, false
	}
	return 1, true
}

// modulePos is the position of the :modules call name, else the architecture's.
func (c *checker) modulePos(name string) arch.Pos {
	for i := range c.a.Modules {
		if c.a.Modules[i].Name == name {
			return c.pos(c.a.Modules[i].Pos)
		}
	}
	return c.a.Pos
}

// objects reads a Terraform JSON block level: an object, or an array of objects (hcl's JSON
// syntax takes both); ok is false for anything else.
func JSONObjects(raw json.RawMessage) ([]map[string]json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err == nil && obj != nil {
		return []map[string]json.RawMessage{obj}, true
	}
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, false
	}
	for _, o := range list {
		if o == nil {
			return nil, false
		}
	}
	return list, true
}

func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func mulSat(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}
