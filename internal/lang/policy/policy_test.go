package policy

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/planpolicy"
)

func TestProviderAddress(t *testing.T) {
	for src, want := range map[string]string{
		"local":                                 "registry.opentofu.org/hashicorp/local",
		"example/testkit":                       "registry.opentofu.org/example/testkit",
		"registry.terraform.io/hashicorp/aws":   "registry.terraform.io/hashicorp/aws",
		"Registry.OpenTofu.org/HashiCorp/Local": "registry.opentofu.org/hashicorp/local",
	} {
		h, ns, typ, err := ProviderAddress(src)
		if err != nil || h+"/"+ns+"/"+typ != want {
			t.Errorf("ProviderAddress(%q) = %s/%s/%s, %v; want %s", src, h, ns, typ, err, want)
		}
	}
	for _, src := range []string{"..", "../x", "../../tmp/evil", "hashicorp/..", "a/b/c/d", "hashicorp/a\\b",
		"host/ns/a.b", "./local", "hashicorp/", "-/aws", "", "ns/ty pe", "..example.com/ns/t"} {
		if _, _, _, err := ProviderAddress(src); err == nil {
			t.Errorf("ProviderAddress(%q) passed, want an error", src)
		}
	}
}

func TestCheck_moduleAndTerraformBlocks(t *testing.T) {
	a := &arch.Architecture{Pos: arch.Pos{File: "m.tlisp", Line: 1, Col: 1}}
	rendered := []byte(`{"module":{"remote":{"source":"git::https://example.com/x.git"},"local":{"source":"../../../etc"}},"terraform":{"backend":{"s3":{}}}}`)
	got := joined(Check(a, rendered, Default()))
	for _, w := range []string{
		`m.tlisp:1:1: policy: module remote: the remote source "git::https://example.com/x.git" is not allowed`,
		`module local: the local source "../../../etc" is not allowed`,
		"a terraform block is not allowed",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("violations lack %q:\n%s", w, got)
		}
	}
	relaxed := Default()
	relaxed.AllowRemoteModules = true
	if got := joined(Check(a, []byte(`{"module":{"remote":{"source":"hashicorp/consul/aws"}}}`), relaxed)); got != "" {
		t.Errorf("allowRemoteModules still refuses: %s", got)
	}
}

// TestCheck_repeatedCoreNamespace: a denied function is refused under any number of core::
// prefixes. Synthesis already refuses core::core::file as an unknown function; the policy
// does not rely on that.
func TestCheck_repeatedCoreNamespace(t *testing.T) {
	a := &arch.Architecture{Pos: arch.Pos{File: "m.tlisp", Line: 1, Col: 1}}
	rendered := []byte(`{"resource":{"terraform_data":{"r":{"input":"${core::core::file(\"/etc/hostname\")}"}}}}`)
	a.Resources = []arch.Resource{{Type: "terraform_data", Name: "r", Attributes: arch.Map{}, Pos: arch.Pos{Line: 2, Col: 15}}}
	a.Resources[0].Attributes.Set("input", arch.String(`${core::core::file("/etc/hostname")}`))
	if got := joined(Check(a, rendered, Default())); !strings.Contains(got, "2:15: policy: resource terraform_data.r attribute input: the function core::core::file is not allowed") {
		t.Errorf("core::core::file passed: %q", got)
	}
}

func TestCheck_mapKeysAreTemplates(t *testing.T) {
	m := &arch.Map{}
	m.Set(`${file("/etc/passwd")}`, arch.String("v"))
	a := &arch.Architecture{Resources: []arch.Resource{{Type: "terraform_data", Name: "r",
		Attributes: arch.Map{}, Pos: arch.Pos{Line: 4, Col: 2}}}}
	a.Resources[0].Attributes.Set("input", arch.MapValue(m))
	if got := joined(Check(a, nil, Default())); !strings.Contains(got, "4:2: policy: resource terraform_data.r attribute input: the function file is not allowed") {
		t.Errorf("a denied function in a map key passed: %q", got)
	}
}

// TestConfig_planRules: a namespace's own planRules, else the cluster's, else the built-in
// rule; an empty list is no rule; rules set in code compile on first use.
func TestConfig_planRules(t *testing.T) {
	c, err := Parse([]byte("cluster: {planRules: [{name: big, verdict: requireApproval, plan: 'size(plan.changes) > 50'}]}\n" +
		"namespaces: {free: {planRules: []}, strict: {planRules: [{name: none, verdict: deny, change: 'true'}]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for ns, want := range map[string]int{"other": 1, "free": 0, "strict": 1} {
		set, err := c.PlanRules(ns)
		if err != nil || set.Len() != want {
			t.Errorf("%s: %d rules, %v; want %d", ns, set.Len(), err, want)
		}
	}
	if set, err := (Config{}).PlanRules("x"); err != nil || set != planpolicy.Default() {
		t.Errorf("no planRules anywhere: %v, %v; want the built-in rule", set, err)
	}
	bad := Config{Cluster: Settings{PlanRules: &[]planpolicy.Rule{{Name: "r", Verdict: planpolicy.Deny, Change: "nope("}}}}
	if _, err := bad.PlanRules("x"); err == nil || !strings.Contains(err.Error(), "policy: cluster.planRules[0] (r): change: 1:6") {
		t.Errorf("a rule set in code that does not compile: %v", err)
	}
}

func TestParse(t *testing.T) {
	c, err := Parse([]byte("cluster: {deniedFunctions: []}\nnamespaces: {t: {deniedFunctions: [file], maxResources: 2}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.For("x"); len(p.DeniedFunctions) != 0 || p.MaxResources != DefaultMaxResources || len(p.DeniedDataSources) != len(DefaultDeniedDataSources) {
		t.Errorf("cluster policy %+v", p)
	}
	if p := c.For("t"); len(p.DeniedFunctions) != 1 || p.MaxResources != 2 {
		t.Errorf("namespace policy %+v", p)
	}
	if c, err := Parse(nil); err != nil || len(c.For("x").DeniedFunctions) != len(DefaultDeniedFunctions) {
		t.Errorf("empty document: %+v, %v", c, err)
	}
	for doc, want := range map[string]string{
		"cluster: {maxResource: 1}":                                                               "unknown field",
		"cluster: {maxResources: -1}":                                                             "cluster.maxResources is -1",
		"namespaces: {a: {allowedProviders: ['[']}}":                                              `namespaces.a: pattern "["`,
		"cluster: {allowProvisioners: 'yes please'}":                                              "cannot unmarshal",
		"cluster: {fileWriteRoots: [tmp/x]}":                                                      `cluster.fileWriteRoots: "tmp/x" is not an absolute clean directory`,
		"namespaces: {a: {fileWriteRoots: [/x/]}}":                                                `namespaces.a.fileWriteRoots: "/x/" is not an absolute clean directory`,
		"cluster: {fileWriteRoots: [/x/../etc]}":                                                  `"/x/../etc" is not an absolute clean directory`,
		"namespaces: {a: {planRules: [{name: r, verdict: deny, change: 'change.tpye == 1 &&'}]}}": `policy: namespaces.a.planRules[0] (r): change: 1:20: Syntax error`,
		"cluster: {planRules: [{name: r, verdict: deny, plan: 'plan.changes'}]}":                  `policy: cluster.planRules[0] (r): plan: the expression is a dyn, want a bool`,
	} {
		if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", doc, err, want)
		}
	}
}

// TestCheck_fileWriteRoots: every path attribute of the file model passes only as a literal,
// absolute, clean path strictly under a root; the built-in default has no root, so it refuses
// them all. Each case is one attribute of one resource or data source.
func TestCheck_fileWriteRoots(t *testing.T) {
	roots := Default()
	roots.FileWriteRoots = []string{"/srv/lava-files", "/data/team-a"}
	res := func(typ, attr string, v arch.Value, data bool) *arch.Architecture {
		r := arch.Resource{Type: typ, Name: "f", Pos: arch.Pos{File: "m.tlisp", Line: 3, Col: 5}}
		r.Attributes.Set(attr, v)
		r.Attributes.Set("content", arch.String("x"))
		a := &arch.Architecture{Pos: arch.Pos{File: "m.tlisp", Line: 1, Col: 1}}
		if data {
			a.DataSources = []arch.Resource{r}
		} else {
			a.Resources = []arch.Resource{r}
		}
		return a
	}
	for _, tc := range []struct {
		typ, attr string
		data      bool
		path      string
		want      string // "" passes under roots
	}{
		{typ: "local_file", attr: "filename", path: "/srv/lava-files/a/b.txt"},
		{typ: "local_sensitive_file", attr: "filename", path: "/data/team-a/k"},
		{typ: "testkit_file", attr: "filename", path: "/srv/lava-files/kit.txt"},
		{typ: "archive_file", attr: "output_path", path: "/srv/lava-files/a.zip"},
		{typ: "archive_file", attr: "output_path", data: true, path: "/srv/lava-files/a.zip"},
		{typ: "local_file", attr: "filename", path: "/tmp/lava-up/signing.pub", want: "is outside the allowed directories (fileWriteRoots: /srv/lava-files, /data/team-a)"},
		{typ: "local_file", attr: "filename", path: "/srv/lava-files", want: "is outside the allowed directories"},
		{typ: "local_file", attr: "filename", path: "/srv/lava-filesystem/x", want: "is outside the allowed directories"},
		{typ: "local_file", attr: "filename", path: "/srv/lava-files/../../etc/passwd", want: `is not clean (want "/etc/passwd"`},
		{typ: "local_file", attr: "filename", path: "/srv/lava-files//x", want: "is not clean"},
		{typ: "local_file", attr: "filename", path: "x/../../signing.pub", want: "is relative"},
		{typ: "local_file", attr: "filename", path: "${path.module}/../x", want: "is a template"},
		{typ: "local_file", attr: "filename", path: "/srv/lava-files/%{ if true }x%{ endif }", want: "is a template"},
		{typ: "local_file", attr: "filename", path: "/srv/lava-files/$${x}", want: "is a template"},
		{typ: "local_file", attr: "source", path: "/var/run/secrets/kubernetes.io/serviceaccount/token", want: "is outside the allowed directories"},
		{typ: "local_sensitive_file", attr: "source", path: "/srv/lava-files/../token", want: "is not clean"},
		{typ: "archive_file", attr: "source_dir", path: "/etc", want: "is outside the allowed directories"},
		{typ: "archive_file", attr: "source_file", data: true, path: "/etc/shadow", want: "is outside the allowed directories"},
		{typ: "testkit_file", attr: "filename", path: "/usr/lib/lava/providers/terraform-provider-x", want: "is outside the allowed directories"},
		{typ: "local_file", attr: "filename", data: true, path: "/etc/hostname", want: "is outside the allowed directories"},
	} {
		a := res(tc.typ, tc.attr, arch.String(tc.path), tc.data)
		got := joined(Check(a, nil, roots))
		if tc.data {
			got = strings.ReplaceAll(got, "policy: data source "+tc.typ+".f: the "+tc.typ+" data source is not allowed (deniedDataSources)", "")
			got = strings.TrimSpace(got)
		}
		kind := "resource"
		if tc.data {
			kind = "data source"
		}
		switch {
		case tc.want == "" && got != "":
			t.Errorf("%s %s %s = %q: refused under the roots: %s", kind, tc.typ, tc.attr, tc.path, got)
		case tc.want != "" && !strings.Contains(got, "m.tlisp:3:5: policy: "+kind+" "+tc.typ+".f attribute "+tc.attr+": the path ") || !strings.Contains(got, tc.want):
			t.Errorf("%s %s %s = %q: violations %q, want m.tlisp:3:5 and %q", kind, tc.typ, tc.attr, tc.path, got, tc.want)
		}
		if d := joined(Check(a, nil, Default())); !strings.Contains(d, "attribute "+tc.attr+": the path ") {
			t.Errorf("the built-in default let %s %s %s = %q pass: %q", kind, tc.typ, tc.attr, tc.path, d)
		}
	}
	if got := joined(Check(res("local_file", "filename", arch.List(arch.String("/srv/lava-files/x")), false), nil, roots)); !strings.Contains(got, "want a literal absolute path under one of fileWriteRoots, not a list") {
		t.Errorf("a list filename: %q", got)
	}
	everything := roots
	everything.FileWriteRoots = []string{"/"}
	if got := joined(Check(res("local_file", "filename", arch.String("/etc/x"), false), nil, everything)); got != "" {
		t.Errorf("root / refuses /etc/x: %q", got)
	}
	c, err := Parse([]byte("cluster: {fileWriteRoots: [/srv/lava-files]}\nnamespaces: {t: {fileWriteRoots: []}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.For("x"); !slices.Equal(p.FileWriteRoots, []string{"/srv/lava-files"}) {
		t.Errorf("cluster roots %v", p.FileWriteRoots)
	}
	if p := c.For("t"); len(p.FileWriteRoots) != 0 {
		t.Errorf("namespace t did not clear its roots: %v", p.FileWriteRoots)
	}
}

// TestConfig_namespaceFileRoot: a NamespaceFileRoot gives each namespace its own write root
// (so one namespace's resources cannot reach another's files), replacing the cluster's; a
// namespace's own fileWriteRoots still win; a check without a namespace gets "default"'s; no
// name escapes the root; Roots lists it first, for the overlap checks.
func TestConfig_namespaceFileRoot(t *testing.T) {
	t.Parallel()
	c := Config{NamespaceFileRoot: "/tmp/lava-demo", Cluster: Settings{FileWriteRoots: &[]string{"/srv/all"}},
		Namespaces: map[string]Settings{"own": {FileWriteRoots: &[]string{"/srv/own"}}}}
	for ns, want := range map[string][]string{
		"team-a": {"/tmp/lava-demo/team-a"}, "team-b": {"/tmp/lava-demo/team-b"}, "": {"/tmp/lava-demo/default"},
		"own": {"/srv/own"}, "..": nil, "a/b": nil, "UPPER": nil,
	} {
		if got := c.For(ns).FileWriteRoots; !slices.Equal(got, want) {
			t.Errorf("For(%q).FileWriteRoots = %v, want %v", ns, got, want)
		}
	}
	a := &arch.Architecture{Pos: arch.Pos{File: "m.tlisp", Line: 1, Col: 1}}
	r := arch.Resource{Type: "local_file", Name: "f", Pos: arch.Pos{File: "m.tlisp", Line: 3, Col: 5}}
	r.Attributes.Set("filename", arch.String("/tmp/lava-demo/team-b/victim.txt"))
	a.Resources = []arch.Resource{r}
	if got := joined(Check(a, nil, c.For("team-a"))); !strings.Contains(got, "is outside the allowed directories (fileWriteRoots: /tmp/lava-demo/team-a)") {
		t.Errorf("team-a writing team-b's file: %q", got)
	}
	if got := joined(Check(a, nil, c.For("team-b"))); got != "" {
		t.Errorf("team-b writing its own file: %q", got)
	}
	if got := c.Roots(); len(got) == 0 || got[0] != [2]string{"namespaceFileRoot", "/tmp/lava-demo"} {
		t.Errorf("Roots() = %v, want namespaceFileRoot first", got)
	}
}

// TestCheck_fileModel: the gate's file model is a name rule plus an explicit table, not a table
// of known types. testkit_legacy_file (a file-writing type no table of known types lists) and
// a type nobody modelled are held to fileWriteRoots, the message naming
// the roots and that the type is not modelled; what hashicorp/local only reads may lie under
// fileReadRoots, what it writes may not; names the table says are no file pass (the catalog's
// Akeyless paths); an import into a resource that sets a path attribute is held to
// fileWriteRoots.
func TestCheck_fileModel(t *testing.T) {
	p := Default()
	p.FileWriteRoots, p.FileReadRoots = []string{"/srv/files"}, []string{"/srv/in"}
	pos := arch.Pos{File: "m.tlisp", Line: 2, Col: 3}
	one := func(typ string, attrs map[string]string, imports ...arch.Import) *arch.Architecture {
		r := arch.Resource{Type: typ, Name: "r", Pos: pos}
		for _, k := range slices.Sorted(maps.Keys(attrs)) {
			r.Attributes.Set(k, arch.String(attrs[k]))
		}
		a := &arch.Architecture{Pos: arch.Pos{File: "m.tlisp", Line: 1, Col: 1}, Resources: []arch.Resource{r}, Imports: imports}
		a.Providers = []arch.ProviderRef{{Name: "testkit", Source: "example/testkit"}, {Name: "kit", Source: "example/kit"}}
		return a
	}
	for _, tc := range []struct {
		name string
		a    *arch.Architecture
		want string // "" passes
	}{
		{"legacy file outside", one("testkit_legacy_file", map[string]string{"filename": "/etc/cron.d/x"}),
			`m.tlisp:2:3: policy: resource testkit_legacy_file.r attribute filename: the path "/etc/cron.d/x" is outside the allowed directories (fileWriteRoots: /srv/files) (Lava does not know which paths of registry.opentofu.org/example/testkit testkit_legacy_file are only read`},
		{"legacy file under the root", one("testkit_legacy_file", map[string]string{"filename": "/srv/files/x"}), ""},
		{"an unmodelled type", one("kit_thing", map[string]string{"config_path": "/srv/in/c", "name": "/etc/passwd"}),
			`resource kit_thing.r attribute config_path: the path "/srv/in/c" is outside the allowed directories (fileWriteRoots: /srv/files) (Lava does not know which paths of registry.opentofu.org/example/kit kit_thing are only read`},
		{"a read under the read root", one("local_file", map[string]string{"filename": "/srv/files/o", "source": "/srv/in/i"}), ""},
		{"a read outside", one("local_file", map[string]string{"filename": "/srv/files/o", "source": "/etc/shadow"}),
			`attribute source: the path "/etc/shadow" is outside the allowed directories (fileReadRoots: /srv/in; fileWriteRoots: /srv/files)`},
		{"a write under the read root", one("local_file", map[string]string{"filename": "/srv/in/o"}),
			`attribute filename: the path "/srv/in/o" is outside the allowed directories (fileWriteRoots: /srv/files)`},
		{"an akeyless path is no file", one("akeyless_static_secret", map[string]string{"path": "/prod/db/password"}), ""},
		{"the same name of another provider", func() *arch.Architecture {
			a := one("akeyless_static_secret", map[string]string{"path": "/prod/db/password"})
			a.Providers = append(a.Providers, arch.ProviderRef{Name: "akeyless", Source: "evil.example.com/hashicorp/akeyless"})
			return a
		}(), `attribute path: the path "/prod/db/password" is outside the allowed directories`},
		{"an import of a seed", one("testkit_file", map[string]string{"filename": "/srv/files/s"}, arch.Import{To: "testkit_file.r", ID: "/var/lib/lava/nats-credentials/bootstrap.nk"}),
			`import of testkit_file.r: the id "/var/lib/lava/nats-credentials/bootstrap.nk" names a file (testkit_file.r sets a path)`},
		{"an import under the root", one("testkit_file", map[string]string{"filename": "/srv/files/s"}, arch.Import{To: "testkit_file.r", ID: "/srv/files/old"}), ""},
	} {
		got := joined(Check(tc.a, nil, p))
		switch {
		case tc.want == "" && got != "":
			t.Errorf("%s: refused: %s", tc.name, got)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("%s: violations %q, want %q", tc.name, got, tc.want)
		}
	}
	c, err := Parse([]byte("cluster: {fileReadRoots: [/srv/in]}\nnamespaces: {t: {fileReadRoots: []}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.For("x").FileReadRoots; !slices.Equal(got, []string{"/srv/in"}) {
		t.Errorf("cluster read roots %v", got)
	}
	if got := c.For("t").FileReadRoots; len(got) != 0 {
		t.Errorf("namespace t read roots %v", got)
	}
	if _, err := Parse([]byte("cluster: {fileReadRoots: [in]}")); err == nil || !strings.Contains(err.Error(), `cluster.fileReadRoots: "in" is not an absolute clean directory`) {
		t.Errorf("a relative read root: %v", err)
	}
}

func joined(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString(v.String() + "\n")
	}
	return strings.TrimSpace(b.String())
}

// TestCheck_expressionsBuiltFromParts: a reference's attribute and an import address are
// rendered into expressions, so they must be static addresses; behind the typed checks, every
// string of the rendered JSON is parsed as an engine parses it (a template, or an expression
// under to/from/depends_on/lifecycle) and its denied functions refused. Each case is an attack
// that reads a file through the tofu engine when unchecked (docs/security.md "Engines").
func TestCheck_expressionsBuiltFromParts(t *testing.T) {
	pos := arch.Pos{File: "m.tlisp", Line: 1, Col: 1}
	ref := func(attr string) *arch.Architecture {
		a := &arch.Architecture{Pos: pos, Outputs: arch.Map{}}
		a.Outputs.Set("leak", arch.RefValue(arch.ResourceRef{Type: "terraform_data", Name: "x", Attribute: attr}))
		return a
	}
	tests := []struct {
		name     string
		a        *arch.Architecture
		rendered string
		want     string // "" passes
	}{
		{"a reference's attribute closing its ${}", ref(`id}${file("/seed")`),
			`{"output":{"leak":{"value":"${terraform_data.x.id}${file(\"/seed\")}"}}}`, `is not a static address`},
		{"the same string met only in the rendered JSON", &arch.Architecture{Pos: pos},
			`{"output":{"leak":{"value":"${terraform_data.x.id}${file(\"/seed\")}"}}}`, `rendered JSON $.output.leak.value: the function file is not allowed`},
		{"an import address with a call in its index", &arch.Architecture{Pos: pos, Imports: []arch.Import{{To: `terraform_data.a[file("/key")]`, ID: "x"}}},
			`{"import":[{"to":"terraform_data.a[file(\"/key\")]","id":"x"}]}`, `import address "terraform_data.a[file(\"/key\")]" is not a static address`},
		{"a call in depends_on met only in the rendered JSON", &arch.Architecture{Pos: pos},
			`{"resource":{"terraform_data":{"a":{"depends_on":["terraform_data.b[file(\"/key\")]"]}}}}`, `rendered JSON $.resource.terraform_data.a.depends_on[0]: the function file is not allowed`},
		{"templatestring makes a literal a template again", &arch.Architecture{Pos: pos},
			`{"locals":{"t":"$${file(\"/key\")}"},"resource":{"terraform_data":{"a":{"input":"${templatestring(local.t, {})}"}}}}`, `the function templatestring is not allowed`},
		{"a template under an expression key that does not parse as an expression", &arch.Architecture{Pos: pos},
			`{"resource":{"terraform_data":{"a":{"input":{"to":"${file(\"/key\")}"}}}}}`, `rendered JSON $.resource.terraform_data.a.input.to: the function file is not allowed`},
		{"a template in a top-level provider block", &arch.Architecture{Pos: pos},
			`{"provider":{"local":{"x":"${file(\"/key\")}"}}}`, `rendered JSON $.provider.local.x: the function file is not allowed`},
		{"a template in an attribute named like a meta-argument", &arch.Architecture{Pos: pos},
			`{"resource":{"terraform_data":{"a":{"input":{"depends_on":"x ${file(\"/key\")}"}}}}}`, `the function file is not allowed`},
		{"a provider alias that is not an identifier", &arch.Architecture{Pos: pos, Providers: []arch.ProviderRef{{Name: "local", Alias: `a${file("/key")}`}}},
			`{}`, `provider local: the alias "a${file(\"/key\")}" is not an identifier`},
		{"a for expression in replace_triggered_by", &arch.Architecture{Pos: pos},
			`{"resource":{"terraform_data":{"a":{"lifecycle":{"replace_triggered_by":["[for x in terraform_data.b.output : [for y in x : y]]"]}}}}}`,
			`rendered JSON $.resource.terraform_data.a.lifecycle.replace_triggered_by[0]: replace_triggered_by takes a reference to a resource, an instance or its attribute, not ForExpr`},
		{"a call in replace_triggered_by, wrapped", &arch.Architecture{Pos: pos},
			`{"resource":{"terraform_data":{"a":{"lifecycle":{"replace_triggered_by":["${tolist(terraform_data.b.output)}"]}}}}}`,
			`not FunctionCallExpr`},
		{"replace_triggered_by that does not parse", &arch.Architecture{Pos: pos},
			`{"resource":{"terraform_data":{"a":{"lifecycle":{"replace_triggered_by":["terraform_data.b["]}}}}}`,
			`replace_triggered_by takes a reference to a resource, an instance or its attribute: `},
		{"replace_triggered_by references pass", &arch.Architecture{Pos: pos},
			`{"resource":{"terraform_data":{"a":{"for_each":{"k":"v"},"lifecycle":{"replace_triggered_by":["terraform_data.v[each.key]","${terraform_data.b.output}","terraform_data.c[0].id"]}}}}}`, ""},
		{"static addresses and escaped literals pass", ref(`tags["Name"]`),
			`{"locals":{"t":"$${file(\"/key\")}"},"import":[{"to":"terraform_data.a[\"k\"]","id":"x"}],"output":{"o":{"value":"${terraform_data.x.tags[\"Name\"]}"}}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := joined(Check(tt.a, []byte(tt.rendered), Default()))
			if tt.want == "" {
				if got != "" {
					t.Fatalf("refused: %s", got)
				}
				return
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("violations lack %q:\n%s", tt.want, got)
			}
		})
	}
}

// TestCheck_providerPaths: a provider configuration's settings that name a path are held to the
// file roots as a resource's attributes are, nested blocks' and lists' included: helm's chart
// cache (repository_cache, which the file model lists) written over Lava's NATS seed, and the
// kubernetes provider's config_path reading lava up's kubeconfig, are refused at the provider's
// position (a twenty-second trial did both); paths under the roots and settings that name no path
// pass.
func TestCheck_providerPaths(t *testing.T) {
	roots := Default()
	roots.FileWriteRoots = []string{"/srv/lava-files/team-a"}
	arch1 := func(name, source string, cfg func(m *arch.Map)) *arch.Architecture {
		pr := arch.ProviderRef{Name: name, Source: source, Pos: arch.Pos{File: "m.tlisp", Line: 2, Col: 4}}
		cfg(&pr.Config)
		return &arch.Architecture{Pos: arch.Pos{File: "m.tlisp", Line: 1, Col: 1}, Providers: []arch.ProviderRef{pr}}
	}
	nested := func(k string, v arch.Value) arch.Value {
		var m arch.Map
		m.Set(k, v)
		return arch.Value{Kind: arch.KindMap, Map: &m}
	}
	for _, tc := range []struct {
		name, source string
		cfg          func(m *arch.Map)
		want         string // "" passes
	}{
		{"helm", "hashicorp/helm", func(m *arch.Map) { m.Set("repository_cache", arch.String("/root/.lava/nats-credentials")) },
			`m.tlisp:2:4: policy: provider helm attribute repository_cache: the path "/root/.lava/nats-credentials" is outside the allowed directories`},
		{"helm", "hashicorp/helm", func(m *arch.Map) {
			m.Set("kubernetes", nested("config_path", arch.String("/tmp/t22/kubeconfig")))
		}, `provider helm attribute kubernetes.config_path: the path "/tmp/t22/kubeconfig" is outside`},
		{"kubernetes", "hashicorp/kubernetes", func(m *arch.Map) { m.Set("config_path", arch.String("/root/.kube/config")) },
			`provider kubernetes attribute config_path: the path "/root/.kube/config" is outside`},
		{"kubernetes", "hashicorp/kubernetes", func(m *arch.Map) {
			m.Set("config_paths", arch.List(arch.String("/srv/lava-files/team-a/kc"), arch.String("/etc/kubernetes/admin.conf")))
		}, `provider kubernetes attribute config_paths: the path "/etc/kubernetes/admin.conf" is outside`},
		{"kubernetes", "hashicorp/kubernetes", func(m *arch.Map) { m.Set("config_path", arch.String("/srv/lava-files/team-a/kubeconfig")) }, ""},
		{"helm", "hashicorp/helm", func(m *arch.Map) {
			m.Set("repository_cache", arch.String("/srv/lava-files/team-a/charts"))
			m.Set("kubernetes", nested("host", arch.String("https://127.0.0.1:6443")))
		}, ""},
	} {
		got := joined(Check(arch1(tc.name, tc.source, tc.cfg), nil, roots))
		switch {
		case tc.want == "" && got != "":
			t.Errorf("provider %s: refused under the roots: %s", tc.name, got)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("provider %s: violations %q, want %q", tc.name, got, tc.want)
		}
	}
}
