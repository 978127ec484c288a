package catalog_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	version "github.com/hashicorp/go-version"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/catalog"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// schemaDir holds one provider schema per local provider name (NAME.json.gz), derived by
// hack/providerschema; its README.md names the packages and the regenerate command.
const schemaDir = "testdata/providerschemas"

// unschemaed are the providers of bundled architectures that have no prebuilt package to
// derive a schema from, nor a module the Go module proxy serves to build them from
// (testdata/providerschemas/README.md names what was looked for): their pins are checked,
// their resources are not.
var unschemaed = map[string]string{
	"akeyless": "akeyless-community/akeyless",
	"discord":  "Lucky3028/discord",
}

// schemaBags are bindings beyond the minimal bag and the golden cases, for the architectures
// whose defaults leave resources out, so that every resource form is validated.
var schemaBags = map[string][]tlisp.Bindings{
	"github-org-repos": {{
		Scalars: map[string]string{"owner": "pleme-io"},
		Records: map[string][]map[string]string{
			"repos": {{"slug": "lava", "description": "Lava", "visibility": "public",
				"labels": "true", "readme": "true", "protect": "true", "import": "true"}},
			"labels": {{"name": "bug", "color": "d73a4a", "description": "Something is broken"}},
		},
	}},
}

// Schema shapes: the subset of `tofu providers schema -json` hack/providerschema writes.
type (
	schemaFile struct {
		Lava struct {
			Package         string   `json:"package"`
			PackageVersion  string   `json:"package_version"`
			ProviderVersion string   `json:"provider_version"`
			ResourceTypes   []string `json:"resource_types"`
			DataSourceTypes []string `json:"data_source_types"`
		} `json:"lava"`
		ProviderSchemas map[string]*struct {
			Provider          *typeSchema            `json:"provider"`
			ResourceSchemas   map[string]*typeSchema `json:"resource_schemas"`
			DataSourceSchemas map[string]*typeSchema `json:"data_source_schemas"`
		} `json:"provider_schemas"`
	}
	typeSchema struct {
		Block *schemaBlock `json:"block"`
	}
	schemaBlock struct {
		Attributes map[string]*schemaAttr      `json:"attributes"`
		BlockTypes map[string]*schemaBlockType `json:"block_types"`
	}
	schemaAttr struct {
		Type       any `json:"type"`
		NestedType *struct {
			Attributes  map[string]*schemaAttr `json:"attributes"`
			NestingMode string                 `json:"nesting_mode"`
		} `json:"nested_type"`
		Required bool `json:"required"`
	}
	schemaBlockType struct {
		NestingMode string       `json:"nesting_mode"`
		Block       *schemaBlock `json:"block"`
		MinItems    int          `json:"min_items"`
		MaxItems    int          `json:"max_items"`
	}
)

// providerSchema is one provider's loaded schema.
type providerSchema struct {
	source    string // "cloudflare/cloudflare"
	version   *version.Version
	file      *schemaFile
	provider  *typeSchema
	resources map[string]*typeSchema
	data      map[string]*typeSchema
}

func loadSchemas(t *testing.T) map[string]*providerSchema {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(schemaDir, "*.json.gz"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no provider schemas in %s (%v)", schemaDir, err)
	}
	out := map[string]*providerSchema{}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		var f schemaFile
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		v, err := version.NewVersion(f.Lava.ProviderVersion)
		if err != nil || len(f.ProviderSchemas) != 1 {
			t.Fatalf("%s: provider version %q (%v), %d provider schemas, want one", p, f.Lava.ProviderVersion, err, len(f.ProviderSchemas))
		}
		for addr, ps := range f.ProviderSchemas {
			parts := strings.Split(addr, "/")
			out[strings.TrimSuffix(filepath.Base(p), ".json.gz")] = &providerSchema{
				source: strings.Join(parts[len(parts)-2:], "/"), version: v, file: &f,
				provider: ps.Provider, resources: ps.ResourceSchemas, data: ps.DataSourceSchemas,
			}
		}
	}
	return out
}

// schemaCase is one architecture rendered with one bag.
type schemaCase struct {
	name string
	arch string
	b    tlisp.Bindings
}

func schemaCases(t *testing.T) []schemaCase {
	t.Helper()
	var out []schemaCase
	for _, e := range catalog.List() {
		iface, err := catalog.Interface(e.Name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, schemaCase{e.Name + "/minimal", e.Name, minimalBag(t, iface)})
		for i, b := range schemaBags[e.Name] {
			out = append(out, schemaCase{e.Name + "/bag" + strconv.Itoa(i), e.Name, b})
		}
	}
	for _, g := range goldenCases {
		out = append(out, schemaCase{g.arch + "/" + g.golden, g.arch, g.b})
	}
	return out
}

// TestSchemas_catalogValidAgainstPinnedProviders renders every bundled architecture with the
// minimal bag, the golden cases' bags and schemaBags, and validates the Terraform JSON against
// the schema of the provider version it pins (testdata/providerschemas): every provider it
// uses is declared with a :version admitting that version and the schema's source; every
// resource and data source type exists; every argument and block name is the schema's; no
// required argument or block is missing; and no literal has the wrong type (a string where a
// number, bool, list or block is wanted, a list where a string is, ...). Each error names the
// architecture, the address and the argument.
func TestSchemas_catalogValidAgainstPinnedProviders(t *testing.T) {
	schemas := loadSchemas(t)
	for _, tc := range schemaCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, out, _ := renderArch(t, tc.arch, tc.b)
			var doc map[string]any
			if err := json.Unmarshal(out, &doc); err != nil {
				t.Fatal(err)
			}
			for _, p := range schemaProblems(a, doc, schemas) {
				t.Errorf("%s: %s", tc.arch, p)
			}
		})
	}
}

// schemaProblems validates one rendered document; each problem names the address and argument.
func schemaProblems(a *arch.Architecture, doc map[string]any, schemas map[string]*providerSchema) []string {
	v := &schemaValidator{a: a, schemas: schemas, pinned: map[string]bool{}}
	for name, cfg := range asMap(doc["provider"]) {
		ps := v.provider(name, "provider."+name)
		var blocks []any
		if l, ok := cfg.([]any); ok {
			blocks = l
		} else {
			blocks = []any{cfg}
		}
		for _, c := range blocks {
			if ps != nil && ps.provider != nil {
				v.block("provider."+name, ps.provider.Block, asMap(c), map[string]bool{"alias": true})
			}
		}
	}
	for _, kind := range []string{"resource", "data"} {
		for _, typ := range slices.Sorted(maps.Keys(asMap(doc[kind]))) {
			byName := asMap(asMap(doc[kind])[typ])
			for _, name := range slices.Sorted(maps.Keys(byName)) {
				v.object(kind, typ, name, asMap(byName[name]))
			}
		}
	}
	// A provider used without a default configuration is configured with an empty one, which
	// must satisfy its required arguments and blocks too (azurerm's features block).
	for _, local := range slices.Sorted(maps.Keys(v.pinned)) {
		if ps := schemas[local]; ps != nil && ps.provider != nil && !hasDefaultConfig(doc["provider"], local) {
			v.block("provider."+local+" (absent: an empty configuration)", ps.provider.Block, map[string]any{}, nil)
		}
	}
	return v.problems
}

// hasDefaultConfig reports whether the rendered provider object configures local without an
// alias.
func hasDefaultConfig(providers any, local string) bool {
	cfg := asMap(providers)[local]
	blocks, ok := cfg.([]any)
	if !ok {
		blocks = []any{cfg}
	}
	for _, b := range blocks {
		if m, ok := b.(map[string]any); ok && m["alias"] == nil {
			return true
		}
	}
	return false
}

type schemaValidator struct {
	a        *arch.Architecture
	schemas  map[string]*providerSchema
	pinned   map[string]bool
	problems []string
}

func (v *schemaValidator) errorf(format string, args ...any) {
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

var metaArguments = map[string]bool{"count": true, "for_each": true, "depends_on": true, "provider": true,
	"lifecycle": true, "provisioner": true, "connection": true}

// object validates one resource or data source body.
func (v *schemaValidator) object(kind, typ, name string, body map[string]any) {
	addr := typ + "." + name
	if kind == "data" {
		addr = "data." + addr
	}
	local, _, _ := strings.Cut(typ, "_")
	if p, ok := body["provider"].(string); ok {
		local, _, _ = strings.Cut(p, ".")
	}
	if typ == "terraform_data" {
		return
	}
	ps := v.provider(local, addr)
	if ps == nil {
		return
	}
	known, schemas := ps.file.Lava.ResourceTypes, ps.resources
	if kind == "data" {
		known, schemas = ps.file.Lava.DataSourceTypes, ps.data
	}
	s := schemas[typ]
	switch {
	case s == nil && !slices.Contains(known, typ):
		v.errorf("%s: %s type %s does not exist in %s %s", addr, kind, typ, ps.source, ps.version)
		return
	case s == nil:
		v.errorf("%s: %s type %s is not in %s/%s.json.gz: add it to the types file and regenerate (README.md there)", addr, kind, typ, schemaDir, local)
		return
	}
	v.block(addr, s.Block, body, metaArguments)
}

// provider checks the pin of the provider local (once per document) and returns its schema
// (nil for a provider without one, after reporting it when it is not an unschemaed one).
func (v *schemaValidator) provider(local, addr string) *providerSchema {
	ps := v.schemas[local]
	if !v.pinned[local] {
		v.pinned[local] = true
		v.checkPin(local, addr, ps)
	}
	return ps
}

func (v *schemaValidator) checkPin(local, addr string, ps *providerSchema) {
	source := unschemaed[local]
	if ps != nil {
		source = ps.source
	}
	if source == "" {
		v.errorf("%s: provider %s has no schema in %s and is not a known unschemaed provider", addr, local, schemaDir)
		return
	}
	var ref *arch.ProviderRef
	for i := range v.a.Providers {
		if v.a.Providers[i].Name == local && v.a.Providers[i].Version != "" {
			ref = &v.a.Providers[i]
			break
		}
	}
	if ref == nil {
		v.errorf("%s: provider %s is not pinned: declare (%s :source %q :version ...) in :providers", addr, local, local, source)
		return
	}
	if !strings.EqualFold(ref.Source, source) {
		v.errorf("%s: provider %s has source %q, want %q", addr, local, ref.Source, source)
	}
	if ps == nil {
		return
	}
	c, err := version.NewConstraint(ref.Version)
	if err != nil || !c.Check(ps.version) {
		v.errorf("%s: provider %s :version %q does not admit %s, the version of the schema in %s (%v)", addr, local, ref.Version, ps.version, schemaDir, err)
	}
}

// block validates body against b; allowed names meta-arguments that are not in the schema.
func (v *schemaValidator) block(addr string, b *schemaBlock, body map[string]any, allowed map[string]bool) {
	for _, k := range slices.Sorted(maps.Keys(body)) {
		val := body[k]
		switch {
		case allowed[k] || k == "//":
		case k == "dynamic":
			for name, d := range asMap(val) {
				bt := b.BlockTypes[name]
				if bt == nil {
					v.errorf("%s: dynamic %q: unsupported block type", addr, name)
					continue
				}
				v.block(addr+".dynamic."+name+".content", bt.Block, asMap(asMap(d)["content"]), nil)
			}
		case b.Attributes[k] != nil:
			v.attr(addr, k, b.Attributes[k], val)
		case b.BlockTypes[k] != nil:
			v.blockValue(addr, k, b.BlockTypes[k], val)
		default:
			v.errorf("%s: %s: unsupported argument or block (not in the schema)", addr, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b.Attributes)) {
		if _, ok := body[k]; !ok && b.Attributes[k].Required {
			v.errorf("%s: %s: missing required argument", addr, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b.BlockTypes)) {
		_, dyn := asMap(body["dynamic"])[k]
		if _, ok := body[k]; !ok && !dyn && b.BlockTypes[k].MinItems > 0 {
			v.errorf("%s: %s: missing required block (at least %d)", addr, k, b.BlockTypes[k].MinItems)
		}
	}
}

// blockValue validates a nested block's JSON value: an object, or an array of objects.
func (v *schemaValidator) blockValue(addr, name string, bt *schemaBlockType, val any) {
	var items []any
	switch x := val.(type) {
	case map[string]any:
		items = []any{x}
	case []any:
		items = x
	default:
		v.errorf("%s: %s: %s where a block is required", addr, name, describeJSON(val))
		return
	}
	if bt.MaxItems > 0 && len(items) > bt.MaxItems {
		v.errorf("%s: %s: %d blocks, at most %d allowed", addr, name, len(items), bt.MaxItems)
	}
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			v.errorf("%s: %s[%d]: %s where a block is required", addr, name, i, describeJSON(it))
			continue
		}
		v.block(fmt.Sprintf("%s.%s[%d]", addr, name, i), bt.Block, m, nil)
	}
}

// attr validates an argument's value against its type or nested type.
func (v *schemaValidator) attr(addr, name string, a *schemaAttr, val any) {
	if val == nil || isWholeExpr(val) {
		return
	}
	if nt := a.NestedType; nt != nil {
		inner := &schemaBlock{Attributes: nt.Attributes}
		switch nt.NestingMode {
		case "single":
			if m, ok := val.(map[string]any); ok {
				v.block(addr+"."+name, inner, m, nil)
				return
			}
			v.errorf("%s: %s: %s where an object is required", addr, name, describeJSON(val))
		case "map":
			m, ok := val.(map[string]any)
			if !ok {
				v.errorf("%s: %s: %s where a map of objects is required", addr, name, describeJSON(val))
				return
			}
			for k, e := range m {
				v.attr(addr+"."+name, k, &schemaAttr{NestedType: &struct {
					Attributes  map[string]*schemaAttr `json:"attributes"`
					NestingMode string                 `json:"nesting_mode"`
				}{nt.Attributes, "single"}}, e)
			}
		default:
			l, ok := val.([]any)
			if !ok {
				v.errorf("%s: %s: %s where a list of objects is required", addr, name, describeJSON(val))
				return
			}
			for i, e := range l {
				m, ok := e.(map[string]any)
				if !ok {
					v.errorf("%s: %s[%d]: %s where an object is required", addr, name, i, describeJSON(e))
					continue
				}
				v.block(fmt.Sprintf("%s.%s[%d]", addr, name, i), inner, m, nil)
			}
		}
		return
	}
	if msg := typeMismatch(a.Type, val); msg != "" {
		v.errorf("%s: %s: %s", addr, name, msg)
	}
}

// typeMismatch says why the literal val cannot convert to the cty type ty ("" when it can or
// when that is known only at plan), as Terraform converts: a number or bool to a string, a
// numeric string to a number, "true"/"false" to a bool.
func typeMismatch(ty, val any) string {
	if val == nil || isWholeExpr(val) {
		return ""
	}
	switch ty := ty.(type) {
	case string:
		return primitiveMismatch(ty, val)
	case []any:
		if len(ty) != 2 {
			return ""
		}
		kind, _ := ty[0].(string)
		switch kind {
		case "list", "set":
			l, ok := val.([]any)
			if !ok {
				return describeJSON(val) + " where a " + kind + " is required"
			}
			for i, e := range l {
				if m := typeMismatch(ty[1], e); m != "" {
					return fmt.Sprintf("element %d: %s", i, m)
				}
			}
		case "map":
			m, ok := val.(map[string]any)
			if !ok {
				return describeJSON(val) + " where a map is required"
			}
			for _, k := range slices.Sorted(maps.Keys(m)) {
				if msg := typeMismatch(ty[1], m[k]); msg != "" {
					return fmt.Sprintf("key %q: %s", k, msg)
				}
			}
		}
	}
	return ""
}

func primitiveMismatch(ty string, val any) string {
	switch x := val.(type) {
	case string:
		template := strings.Contains(x, "${") || strings.Contains(x, "%{")
		switch ty {
		case "number":
			if _, err := strconv.ParseFloat(x, 64); err != nil && !template {
				return describeJSON(val) + " where a number is required"
			}
		case "bool":
			if x != "true" && x != "false" && !template {
				return describeJSON(val) + " where a bool is required"
			}
		}
	case float64:
		if ty == "bool" {
			return describeJSON(val) + " where a bool is required"
		}
	case bool:
		if ty == "number" {
			return describeJSON(val) + " where a number is required"
		}
	case []any, map[string]any:
		if ty != "dynamic" {
			return describeJSON(val) + " where a " + ty + " is required"
		}
	}
	return ""
}

// isWholeExpr reports whether val is a string that is one interpolation ("${...}"), whose type
// is known only at plan.
func isWholeExpr(val any) bool {
	s, ok := val.(string)
	return ok && strings.HasPrefix(s, "${") && strings.HasSuffix(s, "}") && strings.Count(s, "${") == 1
}

func describeJSON(val any) string {
	switch x := val.(type) {
	case string:
		return "a string " + strconv.Quote(x)
	case float64:
		return "a number " + strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return "a bool " + strconv.FormatBool(x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return "null"
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// TestSchemas_typesFiles: testdata/providerschemas/NAME.types lists exactly what the schema
// cases use of provider NAME ("provider", "resource TYPE", "data TYPE", sorted), the types
// hack/providerschema writes schemas for; -update rewrites the files.
func TestSchemas_typesFiles(t *testing.T) {
	used := map[string]map[string]bool{}
	add := func(local, line string) {
		if unschemaed[local] != "" {
			return
		}
		if used[local] == nil {
			used[local] = map[string]bool{"provider": true}
		}
		used[local][line] = true
	}
	for _, tc := range schemaCases(t) {
		_, out, _ := renderArch(t, tc.arch, tc.b)
		var doc map[string]any
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatal(err)
		}
		for name := range asMap(doc["provider"]) {
			add(name, "provider")
		}
		for _, kind := range []string{"resource", "data"} {
			for typ, byName := range asMap(doc[kind]) {
				for _, body := range asMap(byName) {
					local, _, _ := strings.Cut(typ, "_")
					if p, ok := asMap(body)["provider"].(string); ok {
						local, _, _ = strings.Cut(p, ".")
					}
					if typ != "terraform_data" {
						add(local, kind+" "+typ)
					}
				}
			}
		}
	}
	for _, local := range slices.Sorted(maps.Keys(used)) {
		want := strings.Join(slices.Sorted(maps.Keys(used[local])), "\n") + "\n"
		path := filepath.Join(schemaDir, local+".types")
		if *update {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s is stale (%v): run go test ./internal/lang/catalog -run TestSchemas_typesFiles -update, then regenerate the schemas (README.md there); want:\n%s", path, err, want)
		}
	}
}

// TestSchemas_validatorFindsEachKind holds the validator to each kind of problem, on the real
// cloudflare and aws schemas.
func TestSchemas_validatorFindsEachKind(t *testing.T) {
	schemas := loadSchemas(t)
	a := &arch.Architecture{Providers: []arch.ProviderRef{
		{Name: "cloudflare", Source: "cloudflare/cloudflare", Version: "~> 5.14"},
		{Name: "aws", Source: "hashicorp/aws", Version: "~> 5.0"},
	}}
	var doc map[string]any
	if err := json.Unmarshal([]byte(`{"resource": {
  "cloudflare_tunnel": {"t": {"name": "x"}},
  "cloudflare_ruleset": {"r": {}},
  "cloudflare_dns_record": {"d": {"zone_id": "z", "name": "n", "type": "A", "ttl": "one",
    "proxied": "yes", "tags": "a", "data": [{"flags": 1}], "colour": "red", "comment": 3}},
  "github_repository": {"g": {"name": "x"}},
  "aws_eks_cluster": {"e": {"name": "x", "role_arn": "${aws_iam_role.r.arn}", "vpc_config": "subnets"}}}}`), &doc); err != nil {
		t.Fatal(err)
	}
	got := schemaProblems(a, doc, schemas)
	want := []string{
		`cloudflare_dns_record.d: proxied: a string "yes" where a bool is required`,
		`cloudflare_dns_record.d: ttl: a string "one" where a number is required`,
		`cloudflare_dns_record.d: tags: a string "a" where a list is required`,
		`cloudflare_dns_record.d: data: a list where an object is required`,
		`cloudflare_dns_record.d: colour: unsupported argument or block (not in the schema)`,
		`cloudflare_ruleset.r: resource type cloudflare_ruleset is not in testdata/providerschemas/cloudflare.json.gz`,
		`cloudflare_tunnel.t: resource type cloudflare_tunnel does not exist in cloudflare/cloudflare 5.14.0`,
		`github_repository.g: provider github is not pinned: declare (github :source "integrations/github" :version ...)`,
		`aws_eks_cluster.e: provider aws :version "~> 5.0" does not admit 6.25.0`,
		`aws_eks_cluster.e: vpc_config: a string "subnets" where a block is required`,
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
			t.Errorf("no problem starts with %q; got:\n%s", w, strings.Join(got, "\n"))
		}
	}
	for _, g := range got {
		if strings.Contains(g, "comment") {
			t.Errorf("a number where a string is wanted converts, as in Terraform; got %q", g)
		}
	}
}
