package policy

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/hclnest"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// Violation is one rule an architecture breaks: where (the resource, provider, output or
// local form; the architecture form when nothing closer is known) and what, in a message that
// names the rule and what the policy expects.
type Violation struct {
	Pos     arch.Pos
	Message string
}

// Check applies p to an evaluated architecture and its rendered Terraform JSON (rendered may
// be nil; it is read for what the typed model cannot hold: the terraform block, module calls
// and the modules bundled under "//", docs/design/0017-modules-and-bundled-sources.md).
// It returns every violation, in source order of the checks: provider sources, the resource
// limit (bundled modules' instances included), each resource and data source, providers'
// settings, locals, outputs, imports, module arguments, variable validations, check
// assertions, moved and removed addresses, then the rendered JSON's top-level
// blocks, module calls and bundled modules. A nil or empty result means the architecture
// passes.
func Check(a *arch.Architecture, rendered []byte, p Policy) []Violation {
	c := &checker{p: p, a: a}
	if a == nil {
		return nil
	}
	for i := range a.Providers {
		pr := &a.Providers[i]
		c.providerSource(c.pos(pr.Pos), pr.Name, pr.Source)
		if pr.Alias != "" && !hclsyntax.ValidIdentifier(pr.Alias) {
			c.add(c.pos(pr.Pos), "provider %s: the alias %q is not an identifier (letters, digits, _ and -, not starting with a digit)", pr.Name, Clip(pr.Alias))
		}
	}
	c.impliedProviders()
	// The bundled modules' violations are reported with the top-level blocks; their
	// instances count toward the limit here.
	out := c.out
	c.out = nil
	modInstances := c.modules(rendered)
	modOut := c.out
	c.out = out
	if n := addSat(instances(a), modInstances); p.MaxResources > 0 && n > int64(p.MaxResources) {
		c.add(a.Pos, "the architecture has %d resource and data source instances (count and for_each expanded); the policy allows at most %d (maxResources)", n, p.MaxResources)
	}
	for i := range a.Resources {
		c.resource(&a.Resources[i], false)
	}
	for i := range a.DataSources {
		c.resource(&a.DataSources[i], true)
	}
	for i := range a.Providers {
		pr := &a.Providers[i]
		for k, v := range pr.Config.All() {
			c.value(c.pos(pr.Pos), "provider "+pr.Name+" setting "+k, v)
		}
		c.providerPaths(pr)
	}
	for k, v := range a.Locals.All() {
		c.value(c.keyPos("local."+k), "local "+k, v)
	}
	for k, v := range a.Outputs.All() {
		c.value(c.keyPos("output."+k), "output "+k, v)
	}
	for _, im := range a.Imports {
		c.template(a.Pos, "import of "+im.To, im.ID)
		c.traversal(a.Pos, "import address", im.To)
	}
	for i := range a.Modules {
		m := &a.Modules[i]
		for k, v := range m.Arguments.All() {
			c.value(c.pos(m.Pos), "module "+m.Name+" argument "+k, v)
		}
	}
	c.blocks(a)
	c.topLevel(rendered)
	c.out = append(c.out, modOut...)
	if n := len(c.out) - tlisp.MaxDiagnostics; n > 0 {
		c.out = append(c.out[:tlisp.MaxDiagnostics], Violation{Pos: a.Pos,
			Message: fmt.Sprintf("policy: … and %d more violation(s)", n)})
	}
	if len(c.out) == 0 {
		c.document(rendered)
	}
	return c.out
}

// blocks checks the variable, check, moved and removed blocks: the rules' conditions and
// messages as templates (a check's error message is shown in every plan), the moved and
// removed addresses as static addresses.
func (c *checker) blocks(a *arch.Architecture) {
	rules := func(pos arch.Pos, what string, rs []arch.Rule) {
		for _, r := range rs {
			c.value(pos, what+" condition", r.Condition)
			c.value(pos, what+" error message", r.ErrorMessage)
		}
	}
	for i := range a.Variables {
		v := &a.Variables[i]
		rules(c.pos(v.Pos), "variable "+v.Name+" validation", v.Validations)
		c.typeConstraint(c.pos(v.Pos), "variable "+v.Name+" type", v.Type)
	}
	for i := range a.Checks {
		ck := &a.Checks[i]
		rules(c.pos(ck.Pos), "check "+ck.Name+" assert", ck.Asserts)
	}
	for _, m := range a.Moves {
		c.traversal(a.Pos, "moved address", m.From)
		c.traversal(a.Pos, "moved address", m.To)
	}
	for _, r := range a.Removed {
		c.traversal(a.Pos, "removed address", r.From)
	}
}

// typeConstraint refuses a variable's type s that is not a type constraint of type names,
// constructors and literal defaults ([hclnest.TypeExpressionProblem]): the engines evaluate
// optional()'s defaults while they read the configuration, outside any evaluation limit.
func (c *checker) typeConstraint(pos arch.Pos, what, s string) {
	if s == "" {
		return
	}
	e, diags := hclnest.ParseExpression([]byte(s), "type", hcl.InitialPos)
	switch {
	case diags.HasErrors():
		c.add(pos, "%s %q does not parse: %s", what, Clip(s), diags.Errs()[0])
	case e != nil:
		if p := hclnest.TypeExpressionProblem(e); p != "" {
			c.add(pos, "%s %q: %s", what, Clip(s), p)
		}
	}
}

// traversal refuses s unless it is a static address (hclsyntax.ParseTraversalAbs: names,
// attributes and literal [N] / ["key"] indexes), as the import address and a reference's
// attribute path must be: anything else would be an expression an engine evaluates.
func (c *checker) traversal(pos arch.Pos, what, s string) {
	if _, diags := hclsyntax.ParseTraversalAbs([]byte(s), "addr", hcl.InitialPos); diags.HasErrors() {
		c.add(pos, "%s %q is not a static address (expected TYPE.NAME with literal [N] or [\"key\"] indexes): %s", what, Clip(s), diags.Errs()[0])
	}
}

// expressionKeys are the Terraform JSON properties whose strings an engine parses as
// expressions rather than templates (the import address, references in depends_on and in
// lifecycle, moved and removed addresses).
var expressionKeys = map[string]bool{"to": true, "from": true, "depends_on": true, "ignore_changes": true,
	"replace_triggered_by": true, "provider": true, "providers": true}

// document is the last line of defence behind the typed checks: it walks every string and key
// of the rendered JSON, whatever part of the dialect produced it, parses it as an engine would
// (a template; an expression under [expressionKeys]) and refuses every denied function. A
// rendered string the typed model did not see (a reference built from its parts, an import
// address) is checked here; it is reported at the architecture form, with its JSON path.
func (c *checker) document(rendered []byte) {
	if len(rendered) == 0 {
		return
	}
	var doc any
	if err := json.Unmarshal(rendered, &doc); err != nil {
		return // topLevel reported it
	}
	c.walk(c.a.Pos, "$", doc)
}

// walk checks every string and key of a decoded Terraform JSON document (the root, or a
// bundled module's) with [checker.expression], reporting at pos with the JSON path from root.
func (c *checker) walk(pos arch.Pos, root string, doc any) {
	// ref: under lifecycle.replace_triggered_by, whose strings must be references.
	var walk func(path string, v any, expr, ref bool)
	walk = func(path string, v any, expr, ref bool) {
		switch v := v.(type) {
		case string:
			c.expression(pos, path, v, expr)
			if ref {
				c.reference(pos, path, v)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), e, expr, ref)
			}
		case map[string]any:
			for k, e := range v {
				c.expression(pos, path+" key", k, false)
				// At the top level "provider" is the block of provider configurations, not a
				// meta-argument.
				meta := path != root
				walk(path+"."+k, e, expr || (expressionKeys[k] && meta), ref || (k == "replace_triggered_by" && meta))
			}
		}
	}
	walk(root, doc, false, false)
}

// expression parses s (an expression when expr, and a template unless it parses as one) and
// refuses the denied functions it calls; a string that parses as neither is left to the
// engine, which refuses it too.
func (c *checker) expression(pos arch.Pos, path, s string, expr bool) {
	if d := nestingRefused(s, expr); d != nil {
		c.add(pos, "rendered JSON %s: %s, in %q", path, d.Detail, Clip(s))
		return
	}
	// nestingRefused checked s both ways: hclsyntax may parse it directly.
	var e hclsyntax.Expression
	parsed := false
	if expr {
		var diags hcl.Diagnostics
		e, diags = hclsyntax.ParseExpression([]byte(s), "attr", hcl.InitialPos)
		parsed = !diags.HasErrors()
	}
	if !parsed && (strings.Contains(s, "${") || strings.Contains(s, "%{")) {
		// A template that does not parse is visited as far as it parsed; the engine refuses it.
		e, _ = hclsyntax.ParseTemplate([]byte(s), "attr", hcl.InitialPos)
	}
	if e == nil {
		return
	}
	seen, in := map[string]bool{}, clipOnce(s)
	_ = hclsyntax.VisitAll(e, func(n hclsyntax.Node) hcl.Diagnostics {
		if call, ok := n.(*hclsyntax.FunctionCallExpr); ok && c.p.functionDenied(call.Name) && !seen[call.Name] {
			seen[call.Name] = true
			c.add(pos, "rendered JSON %s: the function %s is not allowed (it reads Lava's filesystem or runs provider code; deniedFunctions), in %q",
				path, call.Name, in())
		}
		return nil
	})
}

// reference refuses s unless it parses as a reference ([hclnest.ReferenceProblem]), as the
// engines require of lifecycle.replace_triggered_by: a tenant learns it here, with the
// architecture's position, rather than from the applier's plan.
func (c *checker) reference(pos arch.Pos, path, s string) {
	e, diags := hclnest.ParseExpression([]byte(hclnest.UnwrapInterpolation(s)), "attr", hcl.InitialPos)
	if diags.HasErrors() {
		c.add(pos, "rendered JSON %s: replace_triggered_by takes a reference to a resource, an instance or its attribute: %s, in %q", path, diags.Errs()[0], Clip(s))
		return
	}
	if p := hclnest.ReferenceProblem(e); p != "" {
		c.add(pos, "rendered JSON %s: replace_triggered_by takes a reference to a resource, an instance or its attribute, not %s, in %q", path, p, Clip(s))
	}
}

type checker struct {
	p   Policy
	a   *arch.Architecture
	out []Violation
}

func (c *checker) add(pos arch.Pos, format string, args ...any) {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = HideSensitive(s)
		}
	}
	c.out = append(c.out, Violation{Pos: pos, Message: "policy: " + fmt.Sprintf(format, args...)})
}

// sensitiveLiteral matches the form in which synth renders a Secret binding's value,
// `${sensitive("VALUE")}` with VALUE an HCL quoted literal (render.SensitiveTemplate).
var sensitiveLiteral = regexp.MustCompile(`\$\{sensitive\("(?:[^"\\]|\\.)*"\)\}`)

// HideSensitive returns s with every Secret binding's value rendered in it (the
// `${sensitive("VALUE")}` form of render.SensitiveTemplate) replaced by "(sensitive value)",
// OpenTofu's wording, so a violation that quotes an attribute never shows a Secret, whole or
// clipped.
func HideSensitive(s string) string {
	if !strings.Contains(s, "${sensitive(") {
		return s
	}
	return sensitiveLiteral.ReplaceAllLiteralString(s, "(sensitive value)")
}

// pos is p, or the architecture's position when p is unknown.
func (c *checker) pos(p arch.Pos) arch.Pos {
	if p.IsValid() {
		return p
	}
	return c.a.Pos
}

func (c *checker) keyPos(key string) arch.Pos { return c.pos(c.a.KeyPos[key]) }

// providerSource checks one :providers :source against the registry grammar and the
// allow-list.
func (c *checker) providerSource(pos arch.Pos, name, src string) {
	if src == "" {
		src = "hashicorp/" + name
	}
	host, ns, typ, err := ProviderAddress(src)
	if err != nil {
		c.add(pos, "provider %s: %v", name, err)
		return
	}
	if fq := host + "/" + ns + "/" + typ; !c.p.providerAllowed(fq) {
		c.add(pos, "provider %s: source %s is not in the allowed providers (%s)", name, fq, strings.Join(c.p.AllowedProviders, ", "))
	}
}

// impliedProviders checks, like providerSource, the provider each resource and data source
// uses without a :providers entry: the one its provider meta-argument names, else the first
// word of its type ("local" for local_file), which Terraform and both engines take as
// hashicorp/<name> (Terraform "Provider Requirements": implied local names). The built-in
// terraform provider (terraform_data) needs none. Each local name is reported once, at the
// first resource that implies it.
func (c *checker) impliedProviders() {
	declared := map[string]bool{"terraform": true}
	for _, pr := range c.a.Providers {
		declared[pr.Name] = true
	}
	for _, rs := range [][]arch.Resource{c.a.Resources, c.a.DataSources} {
		for i := range rs {
			r := &rs[i]
			name, _, _ := strings.Cut(r.Type, "_")
			if r.Provider != nil {
				name = r.Provider.Name
			} else if v, ok := r.Attributes.Get("provider"); ok {
				// A :provider attribute is rendered as the provider meta-argument, which both
				// engines read ("NAME" or "NAME.ALIAS").
				ref, ok := metaProviderName(v)
				if !ok {
					c.add(c.pos(r.Pos), "%s: the provider meta-argument must name a provider configuration (NAME or NAME.ALIAS)", r.Address())
					continue
				}
				name = ref
			}
			if declared[name] {
				continue
			}
			declared[name] = true
			c.impliedProvider(c.pos(r.Pos), r.Address(), name)
		}
	}
}

// impliedProvider checks the provider hashicorp/NAME that what uses without declaring it.
func (c *checker) impliedProvider(pos arch.Pos, what, name string) {
	host, ns, typ, err := ProviderAddress("hashicorp/" + name)
	if err != nil {
		c.add(pos, "%s implies provider %s: %v", what, name, err)
		return
	}
	if fq := host + "/" + ns + "/" + typ; !c.p.providerAllowed(fq) {
		c.add(pos, "%s implies provider %s (source %s, not declared in :providers), which is not in the allowed providers (%s)",
			what, name, fq, strings.Join(c.p.AllowedProviders, ", "))
	}
}

// metaProviderName is the provider local name a provider meta-argument value names: the NAME
// of "NAME" or "NAME.ALIAS" (Terraform "The provider Meta-Argument"); ok is false for any
// other value.
func metaProviderName(v arch.Value) (string, bool) {
	if v.Kind != arch.KindString {
		return "", false
	}
	name, alias, hasAlias := strings.Cut(v.Str, ".")
	if !providerLocalName.MatchString(name) || (hasAlias && !providerLocalName.MatchString(alias)) {
		return "", false
	}
	return name, true
}

// providerLocalName is the grammar of a provider local name or alias (an HCL identifier).
var providerLocalName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

// instances is the number of resource and data source instances a renders: a resource's
// :count, the entries of its :for-each, else one (saturating at math.MaxInt64).
func instances(a *arch.Architecture) int64 {
	var n int64
	for _, rs := range [][]arch.Resource{a.Resources, a.DataSources} {
		for i := range rs {
			k := int64(1)
			switch r := &rs[i]; {
			case r.Count != nil:
				k = max(*r.Count, 0)
			case r.ForEach != nil:
				k = int64(r.ForEach.Len())
			}
			if n > math.MaxInt64-k {
				return math.MaxInt64
			}
			n += k
		}
	}
	return n
}

func (c *checker) resource(r *arch.Resource, data bool) {
	pos := c.pos(r.Pos)
	// A plain :for_each or :count attribute is rendered as the meta-argument, past the
	// dialect's typed :for-each and :count, whose instances maxResources counts.
	for _, meta := range []string{"for_each", "count"} {
		if _, ok := r.Attributes.Get(meta); ok {
			c.add(pos, "%s: a %s attribute is not allowed: write :%s, whose instances the policy counts (maxResources)",
				r.Address(), meta, strings.ReplaceAll(meta, "_", "-"))
		}
	}
	what := "resource " + r.Address()
	if data {
		what = "data source " + r.Address()
		for _, d := range c.p.DeniedDataSources {
			if r.Type == d {
				c.add(pos, "%s: the %s data source is not allowed (deniedDataSources)", what, r.Type)
			}
		}
	} else if slices.Contains(c.p.DeniedResources, r.Type) {
		c.add(pos, "%s: the %s resource is not allowed (deniedResources)", what, r.Type)
	}
	key := r.Type
	if data {
		key = "data." + r.Type
	}
	provider := c.providerOf(r)
	for attr, v := range r.Attributes.All() {
		c.filePath(pos, what, provider, key, attr, v.Str, v.Kind == arch.KindString, v.Kind.String())
	}
	c.importIDs(pos, r)
	for k, v := range r.Attributes.All() {
		if (k == "provisioner" || k == "connection") && !c.p.AllowProvisioners {
			c.add(pos, "%s: a %s block is not allowed: it would run in Lava's applier (allowProvisioners is false)", what, k)
			continue
		}
		c.value(pos, what+" attribute "+k, v)
	}
	if r.ForEach != nil {
		c.value(pos, what+" for_each", arch.MapValue(r.ForEach))
	}
}

// providerPaths checks a provider configuration's settings against the file model as filePath
// checks a resource's (key "provider" of the provider's address), the settings of its nested
// blocks included ("kubernetes.config_path" of hashicorp/helm) and each element of a list: a
// provider reads or writes what they name (a kubeconfig, a chart cache) as soon as it is
// configured or used, for every resource of the configuration (a twenty-second trial wrote
// Lava's NATS admin seed through helm's repository_cache and read lava up's kubeconfig through
// the kubernetes provider's config_path).
func (c *checker) providerPaths(pr *arch.ProviderRef) {
	pos, addr, what := c.pos(pr.Pos), c.providerAddr(pr.Name), "provider "+pr.Name
	if pr.Alias != "" {
		what += "." + pr.Alias
	}
	for k, v := range pr.Config.All() {
		c.providerSetting(pos, what, addr, k, v)
	}
}

// providerSetting checks one setting (attr, its path below the provider block) of a provider
// configuration and, for a nested block or a list, each setting or element inside it.
func (c *checker) providerSetting(pos arch.Pos, what, addr, attr string, v arch.Value) {
	switch {
	case v.Kind == arch.KindMap:
		if v.Map == nil {
			return
		}
		for k, nv := range v.Map.All() {
			c.providerSetting(pos, what, addr, attr+"."+k, nv)
		}
	case v.Kind == arch.KindList:
		for _, e := range v.List {
			c.providerSetting(pos, what, addr, attr, e)
		}
	default:
		c.filePath(pos, what, addr, "provider", attr, v.Str, v.Kind == arch.KindString, v.Kind.String())
	}
}

// filePath checks one top-level attribute of a resource or data source (key "TYPE" or
// "data.TYPE" of the fully qualified provider) against the file model ([FileAttribute]): an
// attribute that names a path must be a literal string (s; isString false for any other value,
// of kind) that [Policy.FilePathProblem] accepts. The gate sees no provider schema, so it
// checks top-level attributes only; the engines check every attribute the schema declares,
// nested ones included (internal/engine, CheckFileAccess).
func (c *checker) filePath(pos arch.Pos, what, provider, key, attr, s string, isString bool, kind string) {
	access, isPath, modelled := FileAttribute(provider, key, attr)
	if !isPath {
		return
	}
	if !isString {
		c.add(pos, "%s attribute %s: want a literal absolute path under one of %s, not a %s (%s)", what, attr, rootNames(access), kind, c.p.rootsText(access))
		return
	}
	if why := c.p.FilePathProblem(s, access); why != "" {
		c.add(pos, "%s attribute %s: the path %q %s%s", what, attr, Clip(s), why, UnmodelledNote(modelled, provider, key))
	}
}

// importIDs checks the import ids of the imports into r (any instance of it): when r sets an
// attribute that names a path, its id names a file too (testkit_file's import id is its
// filename), which the import reads and the resource then manages, so the id is held to
// fileWriteRoots. The engines apply the same rule from the provider schema, to every type
// with a required path attribute.
func (c *checker) importIDs(pos arch.Pos, r *arch.Resource) {
	takesPath := false
	provider := c.providerOf(r)
	for attr, v := range r.Attributes.All() {
		if _, isPath, _ := FileAttribute(provider, r.Type, attr); isPath && v.Kind == arch.KindString {
			takesPath = true
			break
		}
	}
	if !takesPath {
		return
	}
	for _, im := range c.a.Imports {
		if to := im.To; to != r.Address() && !strings.HasPrefix(to, r.Address()+"[") {
			continue
		}
		if why := c.p.FilePathProblem(im.ID, FileWrite); why != "" {
			c.add(pos, "import of %s: the id %q names a file (%s sets a path), which the import reads and the resource then writes and deletes; the path %s",
				im.To, Clip(im.ID), r.Address(), why)
		}
	}
}

// providerOf is the fully qualified address of the provider r uses: the configuration its
// :provider names, else the provider its :provider meta-argument or the first word of its type
// names, by its :providers source, else hashicorp/NAME ("" when the address does not parse:
// the provider checks report it).
func (c *checker) providerOf(r *arch.Resource) string {
	name, _, _ := strings.Cut(r.Type, "_")
	if r.Provider != nil {
		name = r.Provider.Name
	} else if v, ok := r.Attributes.Get("provider"); ok {
		if ref, ok := metaProviderName(v); ok {
			name = ref
		}
	}
	return c.providerAddr(name)
}

// providerAddr is the fully qualified address of the provider local name (its :providers
// source, else hashicorp/NAME; "" when it does not parse).
func (c *checker) providerAddr(name string) string {
	src := "hashicorp/" + name
	for _, pr := range c.a.Providers {
		if pr.Name == name && pr.Source != "" {
			src = pr.Source
			break
		}
	}
	host, ns, typ, err := ProviderAddress(src)
	if err != nil {
		return ""
	}
	return host + "/" + ns + "/" + typ
}

// value checks every string (map keys included: Terraform JSON reads them as templates too)
// inside v.
func (c *checker) value(pos arch.Pos, what string, v arch.Value) {
	switch v.Kind {
	case arch.KindString:
		c.template(pos, what, v.Str)
	case arch.KindRef:
		c.traversal(pos, what+" reference", v.Ref.Address()+"."+v.Ref.Attribute)
	case arch.KindList:
		for _, e := range v.List {
			c.value(pos, what, e)
		}
	case arch.KindMap:
		if v.Map == nil {
			return
		}
		for k, e := range v.Map.All() {
			c.template(pos, what, k)
			c.value(pos, what, e)
		}
	}
}

// template parses s as an HCL native template, as an engine reading Terraform JSON does, and
// refuses every denied function it calls. A string that is not a valid template cannot be
// checked and is refused (an engine would reject it as well).
func (c *checker) template(pos arch.Pos, what, s string) {
	if !strings.Contains(s, "${") && !strings.Contains(s, "%{") {
		return
	}
	expr, diags := hclnest.ParseTemplate([]byte(s), "attr", hcl.InitialPos)
	if diags.HasErrors() && diags[0].Summary == hclnest.Summary {
		c.add(pos, "%s: %s, in %q", what, diags[0].Detail, Clip(s))
		return
	}
	if diags.HasErrors() {
		c.add(pos, "%s: the template %q does not parse, so it cannot be checked: %s", what, Clip(s), diags.Errs()[0])
		return
	}
	seen, in := map[string]bool{}, clipOnce(s)
	_ = hclsyntax.VisitAll(expr, func(n hclsyntax.Node) hcl.Diagnostics {
		if call, ok := n.(*hclsyntax.FunctionCallExpr); ok && c.p.functionDenied(call.Name) && !seen[call.Name] {
			seen[call.Name] = true
			c.add(pos, "%s: the function %s is not allowed (it reads Lava's filesystem or runs provider code; deniedFunctions), at column %d of %q",
				what, call.Name, call.NameRange.Start.Column, in())
		}
		return nil
	})
}

// topLevel checks that the rendered JSON parses and has no terraform block.
func (c *checker) topLevel(rendered []byte) {
	if len(rendered) == 0 {
		return
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(rendered, &doc); err != nil {
		c.add(c.a.Pos, "the rendered JSON cannot be checked: %v", err)
		return
	}
	if _, ok := doc["terraform"]; ok {
		c.add(c.a.Pos, "a terraform block is not allowed in the architecture (the engine writes its own)")
	}
	// Module calls and the bundled modules: [checker.modules].
}

// Clip shortens s for a message, a Secret binding's value hidden. Its work is linear in s:
// call it once per string ([clipOnce]), not once per violation the string has.
func Clip(s string) string {
	s = HideSensitive(s)
	if utf8.RuneCountInString(s) <= 80 {
		return s
	}
	i, n := 0, 0
	for n < 80 {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		n++
	}
	return s[:i] + "…"
}

// clipOnce returns a function that returns Clip(s), computed at its first call: a string with
// many violations is clipped once.
func clipOnce(s string) func() string {
	return sync.OnceValue(func() string { return Clip(s) })
}

// nestingRefused returns hclnest's diagnostic for s read as an expression (when expr) or as a
// template, nil when neither nests too deeply: such a string is refused before anything
// parses it (hclsyntax's parser would overflow the stack).
func nestingRefused(s string, expr bool) *hcl.Diagnostic {
	if expr {
		if d := hclnest.Check([]byte(s), false, "attr", hcl.InitialPos); d.HasErrors() {
			return d[0]
		}
	}
	if strings.Contains(s, "${") || strings.Contains(s, "%{") {
		if d := hclnest.Check([]byte(s), true, "attr", hcl.InitialPos); d.HasErrors() {
			return d[0]
		}
	}
	return nil
}
