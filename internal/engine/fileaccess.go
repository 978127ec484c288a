package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/lava-operator/lava/internal/lang/policy"
)

// FileBlock is what [FileAccess.Check] reads of a resource or data source schema: its
// attributes and nested block types, each engine converting its own schema form (the plugin
// protocol's in the embedded engine, `tofu providers schema -json` in the tofu engine).
type FileBlock struct {
	// Attributes by name.
	Attributes map[string]*FileAttribute
	// Blocks are the nested block types by name.
	Blocks map[string]*FileBlock
	// Keyed: the block (or nested attribute object) is written as an object keyed by label
	// or key (nesting mode map), not as one object or a list of them.
	Keyed bool
}

// FileAttribute is one attribute of a [FileBlock].
type FileAttribute struct {
	// Type is the attribute's type; cty.NilType when Nested is set.
	Type cty.Type
	// Nested are the attributes of an attribute with nested attributes (protocol 6).
	Nested *FileBlock
	// Required: the configuration must set it.
	Required bool
}

// SchemaKind says which schema of a provider [Schemas] returns.
type SchemaKind int

const (
	// ManagedSchema is a resource type's schema.
	ManagedSchema SchemaKind = iota
	// DataSchema is a data source's schema.
	DataSchema
)

// Schemas gives [FileAccess.Check] the schemas of the providers an operation uses.
type Schemas interface {
	// FileSchema returns the fully qualified address of the provider configuration ref
	// (its local name, or NAME.ALIAS: what a resource's provider meta-argument names, else
	// the first word of its type) ("registry.opentofu.org/example/testkit") and the schema of
	// its resource type or data source typ (nil when the provider has no such type: the
	// engine reports that itself).
	FileSchema(ctx context.Context, ref string, kind SchemaKind, typ string) (provider string, b *FileBlock, err error)
}

// ErrPolicyRejected reports a configuration the tenant policy refuses at plan time: a path a
// provider would touch outside the policy's fileWriteRoots and fileReadRoots, or inside what
// Lava keeps ([FileAccessError]). Not retried: the configuration or the policy must change.
var ErrPolicyRejected = errors.New("engine: refused by the tenant policy")

// FileAccessError lists the paths of one configuration that the tenant policy refuses; it
// wraps [ErrPolicyRejected].
type FileAccessError struct {
	// Violations are "resource TYPE.NAME attribute ATTR: the path ... (why)", one per path.
	Violations []string
}

// Error is "policy: VIOLATION; VIOLATION".
func (e *FileAccessError) Error() string { return "policy: " + strings.Join(e.Violations, "; ") }

// Unwrap returns [ErrPolicyRejected].
func (e *FileAccessError) Unwrap() error { return ErrPolicyRejected }

// FileAccess holds both engines' providers to the tenant policy's file roots at plan time,
// with the provider schemas (docs/design/0022-file-access-from-schemas.md): every attribute of
// every resource and data source (nested ones included) that names a path by the file model
// ([policy.FileAttribute]: the name rule on the schema's string attributes and
// [policy.KnownFileAttributes]), and every import id (and identity) of a resource type that
// takes a path (one with a required path attribute), must be a literal absolute clean path
// under the roots its access is held to, which also, once symbolic links are resolved
// (filepath.EvalSymlinks of the longest existing prefix), stays under them and never reaches a
// protected directory. A nil *FileAccess checks nothing.
type FileAccess struct {
	// Policy is the tenant policy document ([policy.File]; its zero value is the built-in
	// policy, whose empty roots refuse every path).
	Policy *policy.File
	// Protected are directories no path may reach or hold, whatever the roots: the provider
	// mirror and cache, the engines' work directory and `lava up`'s state directory.
	Protected []string
}

// CheckRoots refuses a policy document one of whose fileWriteRoots or fileReadRoots overlaps a
// protected directory (equal, inside it, or holding it; symbolic links resolved): such a
// policy would let a provider write the binaries that run or the keys Lava keeps. It names the
// setting, the root and the directory. A process that runs engines calls it at start.
func (fa *FileAccess) CheckRoots() error {
	if fa == nil {
		return nil
	}
	cfg, err := fa.Policy.Load()
	if err != nil {
		return err
	}
	for _, r := range cfg.Roots() {
		if p := fa.protectedOverlap(r[1]); p != "" {
			return fmt.Errorf("policy: %s: %s overlaps %s, which Lava keeps (provider mirror or cache, work or state directory); choose a directory of its own", r[0], r[1], p)
		}
	}
	return nil
}

// protectedOverlap returns the protected directory the absolute path s overlaps (the same,
// inside it or holding it), as written or with symbolic links resolved on either side; ""
// when none.
func (fa *FileAccess) protectedOverlap(s string) string {
	paths := []string{s}
	if real, err := resolve(s); err == nil && real != s {
		paths = append(paths, real)
	}
	for _, p := range fa.Protected {
		abs, err := filepath.Abs(p)
		if p == "" || err != nil {
			continue
		}
		dirs := []string{abs}
		if real, err := resolve(abs); err == nil && real != abs {
			dirs = append(dirs, real)
		}
		for _, a := range paths {
			for _, d := range dirs {
				if policy.Overlaps(a, d) {
					return p
				}
			}
		}
	}
	return ""
}

// resolve returns the absolute clean path s with the symbolic links of its longest existing
// prefix resolved (filepath.EvalSymlinks); an error when an existing prefix cannot be resolved
// (a dangling or looping link, which a write would follow).
func resolve(s string) (string, error) {
	rest := ""
	p := filepath.Clean(s)
	for {
		if _, err := os.Lstat(p); err == nil {
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				return "", err
			}
			return filepath.Join(real, rest), nil
		}
		parent := filepath.Dir(p)
		if parent == p {
			return s, nil
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// Check applies the rule to the rendered document of an object in namespace (its root module
// and the modules bundled in it) with the providers' schemas, before any provider reads or
// writes anything for it. It returns nil, a *[FileAccessError] listing every refused path
// (sorted), or the error of loading the policy or a schema.
func (fa *FileAccess) Check(ctx context.Context, namespace string, rendered []byte, schemas Schemas) error {
	if fa == nil {
		return nil
	}
	cfg, err := fa.Policy.Load()
	if err != nil {
		return err
	}
	c := &fileCheck{fa: fa, p: cfg.For(namespace), schemas: schemas}
	docs := map[string][]byte{"": rendered}
	mods, err := ReadBundle(rendered)
	if err != nil {
		return err
	}
	maps.Copy(docs, mods)
	for _, dir := range slices.Sorted(maps.Keys(docs)) {
		if err := c.document(ctx, dir, docs[dir]); err != nil {
			return err
		}
	}
	if len(c.out) == 0 {
		return nil
	}
	slices.Sort(c.out)
	return &FileAccessError{Violations: slices.Compact(c.out)}
}

type fileCheck struct {
	fa      *FileAccess
	p       policy.Policy
	schemas Schemas
	out     []string
}

func (c *fileCheck) add(format string, args ...any) {
	c.out = append(c.out, fmt.Sprintf(format, args...))
}

// document checks one module's resources, data sources (in check blocks too) and import
// blocks; dir is the bundled module's directory ("" for the root).
func (c *fileCheck) document(ctx context.Context, dir string, body []byte) error {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("engine: read the configuration for its file paths: %w", err)
	}
	in := ""
	if dir != "" {
		in = "module " + dir + ": "
	}
	resources := map[string]string{} // TYPE.NAME -> provider configuration, for imports
	for _, kind := range []SchemaKind{ManagedSchema, DataSchema} {
		key := "resource"
		if kind == DataSchema {
			key = "data"
		}
		blocks := []json.RawMessage{doc[key]}
		if kind == DataSchema {
			for _, check := range jsonObjects(doc["check"]) {
				for _, byName := range check {
					for _, b := range jsonObjects(byName) {
						blocks = append(blocks, b["data"])
					}
				}
			}
		}
		for _, raw := range blocks {
			for _, byType := range jsonObjects(raw) {
				for _, typ := range slices.Sorted(maps.Keys(byType)) {
					for _, byName := range jsonObjects(byType[typ]) {
						for _, name := range slices.Sorted(maps.Keys(byName)) {
							for _, b := range jsonObjects(byName[name]) {
								ref := providerRef(typ, b["provider"])
								if kind == ManagedSchema {
									resources[typ+"."+name] = ref
								}
								if err := c.resource(ctx, in, kind, typ, name, ref, b); err != nil {
									return err
								}
							}
						}
					}
				}
			}
		}
	}
	for _, im := range jsonObjects(doc["import"]) {
		if err := c.importBlock(ctx, in, im, resources); err != nil {
			return err
		}
	}
	return nil
}

// providerRef is the provider configuration a resource or import block uses: its provider
// meta-argument ("aws" or "aws.west"), else the type's first word.
func providerRef(typ string, meta json.RawMessage) string {
	var p string
	if json.Unmarshal(meta, &p) == nil && p != "" {
		return p
	}
	name, _, _ := strings.Cut(typ, "_")
	return name
}

// resource checks one resource or data source body against its schema.
func (c *fileCheck) resource(ctx context.Context, in string, kind SchemaKind, typ, name, ref string, body map[string]json.RawMessage) error {
	provider, schema, err := c.schemas.FileSchema(ctx, ref, kind, typ)
	if err != nil {
		return err
	}
	if schema == nil {
		return nil
	}
	what, key := in+"resource "+typ+"."+name, typ
	if kind == DataSchema {
		what, key = in+"data source "+typ+"."+name, "data."+typ
	}
	c.block(provider, key, what, "", schema, body)
	return nil
}

// block checks a (nested) block body against its schema; prefix is the attribute path of the
// block below the type ("" at the top, "source." in a source block).
func (c *fileCheck) block(provider, key, what, prefix string, b *FileBlock, body map[string]json.RawMessage) {
	for _, name := range slices.Sorted(maps.Keys(b.Attributes)) {
		raw, ok := body[name]
		if !ok || isJSONNull(raw) {
			continue
		}
		a := b.Attributes[name]
		if a.Nested != nil {
			for _, nb := range nestedBodies(raw, a.Nested.Keyed) {
				c.block(provider, key, what, prefix+name+".", a.Nested, nb)
			}
			continue
		}
		c.attribute(provider, key, what, prefix+name, a.Type, raw)
	}
	dynamic := map[string][]map[string]json.RawMessage{}
	for _, d := range jsonObjects(body["dynamic"]) {
		for name, raw := range d {
			for _, db := range jsonObjects(raw) {
				dynamic[name] = append(dynamic[name], jsonObjects(db["content"])...)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(b.Blocks)) {
		nb := b.Blocks[name]
		bodies := dynamic[name]
		if raw, ok := body[name]; ok && !isJSONNull(raw) {
			bodies = append(bodies, nestedBodies(raw, nb.Keyed)...)
		}
		for _, inner := range bodies {
			c.block(provider, key, what, prefix+name+".", nb, inner)
		}
	}
}

// attribute checks one attribute value when the file model says it names a path: a string,
// or a list or set of strings, each a literal path the policy accepts.
func (c *fileCheck) attribute(provider, key, what, attr string, ty cty.Type, raw json.RawMessage) {
	access, isPath, modelled := policy.FileAttribute(provider, key, attr)
	if !isPath {
		return
	}
	var vals []string
	switch {
	case ty == cty.String:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			c.add("%s attribute %s: want a literal absolute path under one of %s", what, attr, c.p.RootsText(access))
			return
		}
		vals = []string{s}
	case (ty.IsListType() || ty.IsSetType()) && ty.ElementType() == cty.String:
		if json.Unmarshal(raw, &vals) != nil {
			c.add("%s attribute %s: want a list of literal absolute paths under one of %s", what, attr, c.p.RootsText(access))
			return
		}
	default:
		return // a number, a bool or a structure names no path
	}
	for _, s := range vals {
		if why := c.problem(s, access); why != "" {
			c.add("%s attribute %s: the path %q %s%s", what, attr, policy.Clip(s), why, policy.UnmodelledNote(modelled, provider, key))
		}
	}
}

// importBlock checks one import block: when its target's type takes a path (a required path
// attribute: the import id of testkit_file and local_file is a filename), the id and every
// path attribute of its identity must be a path under fileWriteRoots, since the import reads
// the file and the resource then writes and deletes it.
func (c *fileCheck) importBlock(ctx context.Context, in string, im map[string]json.RawMessage, resources map[string]string) error {
	var to string
	if json.Unmarshal(im["to"], &to) != nil {
		return nil // the engine refuses an import without a static address
	}
	typ, name, ok := importTarget(to)
	if !ok {
		return nil
	}
	ref, ok := resources[typ+"."+name]
	if _, meta := im["provider"]; meta || !ok {
		ref = providerRef(typ, im["provider"])
	}
	provider, schema, err := c.schemas.FileSchema(ctx, ref, ManagedSchema, typ)
	if err != nil || schema == nil {
		return err
	}
	pathAttr := ""
	for _, a := range slices.Sorted(maps.Keys(schema.Attributes)) {
		if _, isPath, _ := policy.FileAttribute(provider, typ, a); isPath && schema.Attributes[a].Required {
			pathAttr = a
			break
		}
	}
	if pathAttr == "" {
		return nil
	}
	what := fmt.Sprintf("%simport of %s (%s takes a path: its required attribute %s)", in, to, typ, pathAttr)
	if raw, ok := im["id"]; ok && !isJSONNull(raw) {
		var id string
		if json.Unmarshal(raw, &id) != nil {
			c.add("%s: the id must be a literal absolute path under one of fileWriteRoots", what)
		} else if why := c.problem(id, policy.FileWrite); why != "" {
			c.add("%s: the id %q names a file, which the import reads and the resource then writes and deletes; the path %s", what, policy.Clip(id), why)
		}
	}
	if raw, ok := im["identity"]; ok && !isJSONNull(raw) {
		var identity map[string]json.RawMessage
		if json.Unmarshal(raw, &identity) != nil {
			c.add("%s: the identity must be a literal object", what)
			return nil
		}
		for _, k := range slices.Sorted(maps.Keys(identity)) {
			if _, isPath, _ := policy.FileAttribute(provider, typ, k); !isPath {
				continue
			}
			var s string
			if json.Unmarshal(identity[k], &s) != nil {
				c.add("%s: the identity's %s must be a literal absolute path under one of fileWriteRoots", what, k)
			} else if why := c.problem(s, policy.FileWrite); why != "" {
				c.add("%s: the identity's %s %q names a file, which the import reads and the resource then writes and deletes; the path %s", what, k, policy.Clip(s), why)
			}
		}
	}
	return nil
}

// importTarget returns the resource type and name of an import's target address
// ("testkit_file.a", `module.m[0].local_file.b["k"]`).
func importTarget(to string) (typ, name string, ok bool) {
	tr, diags := hclsyntax.ParseTraversalAbs([]byte(to), "to", hcl.InitialPos)
	if diags.HasErrors() {
		return "", "", false
	}
	var names []string
	for _, step := range tr {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			names = append(names, s.Name)
		case hcl.TraverseAttr:
			names = append(names, s.Name)
		}
	}
	for len(names) >= 2 && names[0] == "module" {
		names = names[2:]
	}
	if len(names) != 2 {
		return "", "", false
	}
	return names[0], names[1], true
}

// problem says why a provider may not touch the path s with access ("" when it may): a
// literal absolute clean path ([policy.PathFormProblem]) that reaches and holds no protected
// directory (as written and with symbolic links resolved), lies under the roots access is held
// to ([policy.Policy.FilePathProblem]) and, resolved, still does.
func (c *fileCheck) problem(s string, access policy.FileAccess) string {
	if access == policy.NotAFile {
		return ""
	}
	if why := policy.PathFormProblem(s); why != "" {
		return why
	}
	if p := c.fa.protectedOverlap(s); p != "" {
		return fmt.Sprintf("reaches %s, which Lava keeps (provider mirror or cache, work or state directory): no provider may touch it, whatever the roots", p)
	}
	if why := c.p.FilePathProblem(s, access); why != "" {
		return why
	}
	real, err := resolve(s)
	if err != nil {
		return fmt.Sprintf("cannot be resolved (%v): a provider would follow the link", err)
	}
	if real == s {
		return ""
	}
	var roots []string
	for _, r := range c.p.FileRoots(access) {
		if rr, err := resolve(r); err == nil {
			roots = append(roots, rr)
		}
	}
	if !policy.UnderAny(real, roots) {
		return fmt.Sprintf("resolves through a symbolic link to %s, outside the allowed directories (%s)", real, c.p.RootsText(access))
	}
	return ""
}

// jsonObjects is [policy.JSONObjects], nil for anything but an object or an array of objects.
func jsonObjects(raw json.RawMessage) []map[string]json.RawMessage {
	l, _ := policy.JSONObjects(raw)
	return l
}

// nestedBodies reads a nested block's or nested attribute's value: one object or a list of
// them, or (keyed) an object of them by label or key.
func nestedBodies(raw json.RawMessage, keyed bool) []map[string]json.RawMessage {
	if !keyed {
		return jsonObjects(raw)
	}
	var out []map[string]json.RawMessage
	for _, byKey := range jsonObjects(raw) {
		for _, k := range slices.Sorted(maps.Keys(byKey)) {
			out = append(out, jsonObjects(byKey[k])...)
		}
	}
	return out
}

func isJSONNull(raw json.RawMessage) bool { return strings.TrimSpace(string(raw)) == "null" }
