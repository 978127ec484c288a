package catalog_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/catalog"
	"github.com/lava-operator/lava/internal/lang/gate"
	"github.com/lava-operator/lava/internal/lang/render"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// sample holds a valid value for every input name that some bundled interface marks required;
// the minimal bag of an entry binds exactly its required inputs from it.
var sample = map[string]string{
	"access-key-id":     "AKIAIOSFODNN7EXAMPLE",
	"account-id":        "0123456789abcdef0123456789abcdef",
	"api-description":   "operator Kubernetes API",
	"app-domain":        "app.example.com",
	"bucket-name":       "blog-content",
	"cluster-name":      "demo",
	"dkim-record":       "v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAexample",
	"domain":            "example.com",
	"hostname":          "blog.example.com",
	"name":              "main",
	"name-prefix":       "prod",
	"oidc-provider-arn": "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE",
	"owner":             "pleme-io",
	"resource-group":    "demo-rg",
	"secret-access-key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
	"security-group-id": "sg-0123456789abcdef0",
	"server-id":         "123456789012345678",
	"ssh-description":   "operator SSH",
	"tunnel-name":       "demo-tunnel",
	"tunnel-secret":     "AQIDBAUGBwgBAgMEBQYHCAECAwQFBgcIAQIDBAUGBwg=",
	"vpc-id":            "vpc-0123456789abcdef0",
	"zone-id":           "0123456789abcdef0123456789abcdef",
}

// sampleLists holds list values for required list-typed inputs.
var sampleLists = map[string][]string{
	"operator-cidrs": {"203.0.113.0/32"},
	"subnet-ids":     {"subnet-aaa", "subnet-bbb"},
}

// sampleRecords holds record-list values for required record inputs (empty: the minimal bag).
var sampleRecords = map[string][]map[string]string{
	"repos":  {},
	"labels": {},
}

// minimalBag binds exactly iface's required inputs, with valid values.
func minimalBag(t *testing.T, iface *arch.Interface) tlisp.Bindings {
	t.Helper()
	b := tlisp.Bindings{Scalars: map[string]string{}, Lists: map[string][]string{}, Records: map[string][]map[string]string{}}
	for _, f := range iface.Inputs {
		if !f.Required {
			continue
		}
		switch {
		case sampleRecords[f.Name] != nil:
			b.Records[f.Name] = sampleRecords[f.Name]
		case sampleLists[f.Name] != nil:
			b.Lists[f.Name] = sampleLists[f.Name]
		case sample[f.Name] != "":
			b.Scalars[f.Name] = sample[f.Name]
		default:
			t.Fatalf("interface %s: no sample value for required input %q; add one to sample", iface.Name, f.Name)
		}
	}
	return b
}

func bag(b tlisp.Bindings) gate.Bag {
	return gate.Bag{Scalars: b.Scalars, Lists: b.Lists, Records: b.Records}
}

// render evaluates the bundled architecture name with b, fails the test on any error
// diagnostic, and returns the architecture, its pretty Terraform JSON and the warnings.
func renderArch(t *testing.T, name string, b tlisp.Bindings) (*arch.Architecture, []byte, tlisp.Diagnostics) {
	t.Helper()
	e, ok := catalog.Get(name)
	if !ok {
		t.Fatalf("catalog.Get(%q): not found", name)
	}
	a, diags := tlisp.EvalArchitecture(e.Source, b, tlisp.Options{File: catalog.File(name)})
	if diags.HasErrors() || a == nil {
		t.Fatalf("evaluate %s: %v", name, diags.Errors())
	}
	out, _, err := render.Render(a)
	if err != nil {
		t.Fatalf("render %s: %v", name, err)
	}
	return a, out, diags.Warnings()
}

// tfJSON is the rendered Terraform JSON decoded generically.
type tfJSON struct {
	Resource map[string]map[string]map[string]any `json:"resource"`
	Data     map[string]map[string]map[string]any `json:"data"`
	Output   map[string]map[string]any            `json:"output"`
	Provider map[string]any                       `json:"provider"`
	Locals   map[string]any                       `json:"locals"`
	Import   []map[string]string                  `json:"import"`
}

func decode(t *testing.T, b []byte) tfJSON {
	t.Helper()
	var doc tfJSON
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("decode rendered JSON: %v\n%s", err, b)
	}
	return doc
}

// attrs returns the attributes of resource TYPE.NAME, failing when it is absent.
func attrs(t *testing.T, doc tfJSON, typ, name string) map[string]any {
	t.Helper()
	r, ok := doc.Resource[typ][name]
	if !ok {
		t.Fatalf("resource %s.%s not rendered; have %v", typ, name, resourceNames(doc, typ))
	}
	return r
}

func resourceNames(doc tfJSON, typ string) []string {
	var ns []string
	for n := range doc.Resource[typ] {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

func countResources(doc tfJSON) int {
	n := 0
	for _, byName := range doc.Resource {
		n += len(byName)
	}
	return n
}

// interpolation finds ${...} spans; refPattern finds a resource or data source address
// (TYPE.NAME.ATTR, TYPE with at least one underscore) inside one.
var (
	interpolation = regexp.MustCompile(`\$\{([^}]*)\}`)
	refPattern    = regexp.MustCompile(`(data\.)?\b([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\.([A-Za-z_][A-Za-z0-9_-]*)\.[A-Za-z_]`)
)

// danglingRefs implements lava-test's RefValid: every resource or data source address named
// inside a ${...} of any rendered string (attributes, outputs, locals, providers) and every
// import block's `to` must exist in the same render. It returns the problems found.
func danglingRefs(doc tfJSON, raw []byte) []string {
	var all any
	_ = json.Unmarshal(raw, &all)
	var problems []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		case string:
			for _, m := range interpolation.FindAllStringSubmatch(x, -1) {
				for _, r := range refPattern.FindAllStringSubmatch(m[1], -1) {
					isData, typ, name := r[1] != "", r[2], r[3]
					byName := doc.Resource[typ]
					if isData {
						byName = doc.Data[typ]
					}
					if _, ok := byName[name]; !ok {
						problems = append(problems, fmt.Sprintf("%s: %q names %s%s.%s, which is not rendered", path, x, r[1], typ, name))
					}
				}
			}
		}
	}
	walk("", all)
	for i, imp := range doc.Import {
		typ, name, _ := strings.Cut(imp["to"], ".")
		if _, ok := doc.Resource[typ][name]; !ok {
			problems = append(problems, fmt.Sprintf("import[%d]: to %q is not a rendered resource", i, imp["to"]))
		}
	}
	slices.Sort(problems)
	return problems
}
