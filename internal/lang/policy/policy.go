package policy

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	tfaddr "github.com/opentofu/registry-address/v2"
	"sigs.k8s.io/yaml"

	"github.com/lava-operator/lava/internal/lang/planpolicy"
)

// Policy is the effective policy of one namespace: what [Check] refuses.
type Policy struct {
	// AllowProvisioners permits provisioner and connection blocks (default false: a
	// local-exec provisioner would run a command inside the applier).
	AllowProvisioners bool
	// AllowRemoteModules permits module blocks whose source is not a local path (default
	// false). A local source passes only inside the modules bundled in the rendered document,
	// whatever this says (docs/design/0017-modules-and-bundled-sources.md).
	AllowRemoteModules bool
	// DeniedDataSources are data source types refused ([DefaultDeniedDataSources]).
	DeniedDataSources []string
	// DeniedResources are resource types refused (default none).
	DeniedResources []string
	// FileWriteRoots are the absolute, clean directories under which providers may write,
	// create and delete files (default none). Every attribute that names a path by the file
	// model ([FileAttribute]: the name rule and [KnownFileAttributes]), and every import id
	// of a type that takes a path, passes only as a literal absolute clean path strictly under
	// a root ([Policy.FilePathProblem]; docs/design/0022-file-access-from-schemas.md).
	FileWriteRoots []string
	// FileReadRoots are the absolute, clean directories under which providers may only read
	// files ([FileRead] attributes such as local_file's source), besides FileWriteRoots
	// (default none).
	FileReadRoots []string
	// DeniedFunctions are function names refused in any ${} or %{} of any string
	// ([DefaultDeniedFunctions]); path.Match patterns ("provider::*"). "core::" prefixes are
	// ignored (OpenTofu's core::file is file, and so is core::core::file).
	DeniedFunctions []string
	// AllowedProviders are path.Match patterns over a provider's fully qualified source
	// address "hostname/namespace/type" ("registry.opentofu.org/hashicorp/*"). Empty: every
	// address that parses.
	AllowedProviders []string
	// MaxResources bounds the resources and data sources of one architecture; 0 is no limit.
	MaxResources int
}

// The built-in defaults, used where the admin's configuration says nothing.
var (
	// DefaultDeniedDataSources: terraform_remote_state reads other state backends with the
	// applier's network reach; external and local_command (hashicorp/local from v2.6.0) run a
	// program; local_file and local_sensitive_file read the applier's filesystem (its
	// ServiceAccount token included).
	DefaultDeniedDataSources = []string{"terraform_remote_state", "external", "local_command", "local_file", "local_sensitive_file"}
	// DefaultDeniedFunctions are Terraform's filesystem functions (they read the applier's
	// files at plan time), templatestring (it evaluates a string known only at plan time as a
	// template, so an escaped literal or a binding would become an expression again),
	// nonsensitive (it removes the sensitive mark a Secret binding's value carries; a source
	// can launder the mark on purpose in other ways, docs/security.md "Threat model for Secret
	// bindings", but never by accident with this) and provider-defined functions (code of a
	// provider run outside any resource's lifecycle).
	DefaultDeniedFunctions = []string{"abspath", "file", "filebase64", "filebase64sha256", "filebase64sha512",
		"fileexists", "filemd5", "fileset", "filesha1", "filesha256", "filesha512", "pathexpand",
		"templatefile", "templatestring", "nonsensitive", "provider::*"}
)

// DefaultMaxResources is the built-in resource-count limit.
const DefaultMaxResources = 500

// Default returns the built-in policy: nothing allowed that runs code or reads files in Lava,
// every valid provider address, at most [DefaultMaxResources] resources.
func Default() Policy {
	return Policy{
		DeniedDataSources: slices.Clone(DefaultDeniedDataSources),
		DeniedFunctions:   slices.Clone(DefaultDeniedFunctions),
		MaxResources:      DefaultMaxResources,
	}
}

// Settings are the fields an admin sets, cluster-wide or for one namespace; an absent field
// keeps the value below it (built-in default, then cluster-wide). A list replaces the list
// below it whole, so a namespace can tighten (add a denial, narrow allowedProviders) or relax
// (an empty deniedFunctions) it.
type Settings struct {
	AllowProvisioners  *bool     `json:"allowProvisioners,omitempty"`
	AllowRemoteModules *bool     `json:"allowRemoteModules,omitempty"`
	DeniedDataSources  *[]string `json:"deniedDataSources,omitempty"`
	DeniedResources    *[]string `json:"deniedResources,omitempty"`
	FileWriteRoots     *[]string `json:"fileWriteRoots,omitempty"`
	FileReadRoots      *[]string `json:"fileReadRoots,omitempty"`
	DeniedFunctions    *[]string `json:"deniedFunctions,omitempty"`
	AllowedProviders   *[]string `json:"allowedProviders,omitempty"`
	MaxResources       *int      `json:"maxResources,omitempty"`
	// PlanRules are the CEL rules every plan of the namespace is held to
	// (internal/lang/planpolicy, docs/design/0037-plan-policies.md); absent: the cluster's,
	// else [planpolicy.DefaultRules]; an empty list: none.
	PlanRules *[]planpolicy.Rule `json:"planRules,omitempty"`
}

// Config is the admin's policy document (the key "policy.yaml" of the ConfigMap lava-policy in
// Lava's namespace, mounted into synth; a file for `lava validate --policy` and `lava up
// --policy`):
//
//	cluster: {maxResources: 100, allowedProviders: ["registry.opentofu.org/hashicorp/*"]}
//	namespaces:
//	  team-a: {allowProvisioners: true}   # relax
//	  team-b: {maxResources: 10}          # tighten
type Config struct {
	Cluster    Settings            `json:"cluster"`
	Namespaces map[string]Settings `json:"namespaces,omitempty"`
	// NamespaceFileRoot, when set, gives each namespace a write root of its own,
	// NamespaceFileRoot/NAMESPACE, in place of the cluster's fileWriteRoots (a namespace's own
	// fileWriteRoots still replace it), so one namespace's resources cannot write or delete
	// another's files. A check without a namespace (a bare .tlisp file in `lava render`) gets
	// the root of namespace "default", where a manifest without one lives. `lava up`'s built-in
	// policy sets it (internal/up.NamespaceRootsPolicy); a policy document cannot (an admin
	// lists each namespace's roots).
	NamespaceFileRoot string `json:"-"`
	// plans are the compiled planRules by where they were set ("cluster", "namespaces.NS"),
	// filled by [Parse].
	plans map[string]*planpolicy.Set
}

// Parse decodes a policy document (YAML or JSON). Unknown fields, a negative maxResources and
// a pattern path.Match cannot compile are errors ("policy: ..."); an empty document is the
// built-in policy.
func Parse(data []byte) (Config, error) {
	var c Config
	if len(bytes.TrimSpace(data)) == 0 {
		return c, nil
	}
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return Config{}, fmt.Errorf("policy: %w", err)
	}
	check := func(where string, s Settings) error {
		if s.MaxResources != nil && *s.MaxResources < 0 {
			return fmt.Errorf("policy: %s.maxResources is %d, want 0 (no limit) or more", where, *s.MaxResources)
		}
		for _, r := range s.roots(where) {
			if !path.IsAbs(r[1]) || path.Clean(r[1]) != r[1] {
				return fmt.Errorf("policy: %s: %q is not an absolute clean directory (want e.g. /var/lib/lava-files, no .., no trailing /)", r[0], r[1])
			}
		}
		if s.PlanRules != nil {
			set, err := planpolicy.Compile(*s.PlanRules)
			if err != nil {
				return fmt.Errorf("policy: %s.%w", where, err)
			}
			if c.plans == nil {
				c.plans = map[string]*planpolicy.Set{}
			}
			c.plans[where] = set
		}
		for _, l := range []*[]string{s.DeniedFunctions, s.AllowedProviders} {
			if l == nil {
				continue
			}
			for _, p := range *l {
				if _, err := path.Match(p, ""); err != nil {
					return fmt.Errorf("policy: %s: pattern %q: %w", where, p, err)
				}
			}
		}
		return nil
	}
	if err := check("cluster", c.Cluster); err != nil {
		return Config{}, err
	}
	for ns, s := range c.Namespaces {
		if err := check("namespaces."+ns, s); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// ReadFile reads and parses a policy document; "" is the built-in policy.
func ReadFile(name string) (Config, error) {
	if name == "" {
		return Config{}, nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return Config{}, fmt.Errorf("policy: %w", err)
	}
	return Parse(b)
}

// For returns the effective policy of namespace: the built-in [Default], then the cluster
// settings, then the namespace's.
func (c Config) For(namespace string) Policy {
	p := Default()
	c.Cluster.apply(&p)
	if c.NamespaceFileRoot != "" {
		p.FileWriteRoots = nil
		ns := namespace
		if ns == "" {
			ns = "default"
		}
		if dnsLabel(ns) {
			p.FileWriteRoots = []string{path.Join(c.NamespaceFileRoot, ns)}
		}
	}
	if s, ok := c.Namespaces[namespace]; ok {
		s.apply(&p)
	}
	return p
}

// PlanRules returns the compiled plan rules of namespace: its own planRules, else the
// cluster's, else [planpolicy.Default]. A document from [Parse] was compiled there; rules set
// in code are compiled here. Errors: such rules do not compile ([planpolicy.Compile]).
func (c Config) PlanRules(namespace string) (*planpolicy.Set, error) {
	where, rules := "cluster", c.Cluster.PlanRules
	if s, ok := c.Namespaces[namespace]; ok && s.PlanRules != nil {
		where, rules = "namespaces."+namespace, s.PlanRules
	}
	if rules == nil {
		return planpolicy.Default(), nil
	}
	if set, ok := c.plans[where]; ok {
		return set, nil
	}
	set, err := planpolicy.Compile(*rules)
	if err != nil {
		return nil, fmt.Errorf("policy: %s.%w", where, err)
	}
	return set, nil
}

// dnsLabel reports whether s is a DNS-1123 label (a namespace name): so never "..", and no
// "/", as a path element.
func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}

func (s Settings) apply(p *Policy) {
	if s.AllowProvisioners != nil {
		p.AllowProvisioners = *s.AllowProvisioners
	}
	if s.AllowRemoteModules != nil {
		p.AllowRemoteModules = *s.AllowRemoteModules
	}
	if s.DeniedDataSources != nil {
		p.DeniedDataSources = slices.Clone(*s.DeniedDataSources)
	}
	if s.DeniedResources != nil {
		p.DeniedResources = slices.Clone(*s.DeniedResources)
	}
	if s.FileWriteRoots != nil {
		p.FileWriteRoots = slices.Clone(*s.FileWriteRoots)
	}
	if s.FileReadRoots != nil {
		p.FileReadRoots = slices.Clone(*s.FileReadRoots)
	}
	if s.DeniedFunctions != nil {
		p.DeniedFunctions = slices.Clone(*s.DeniedFunctions)
	}
	if s.AllowedProviders != nil {
		p.AllowedProviders = slices.Clone(*s.AllowedProviders)
	}
	if s.MaxResources != nil {
		p.MaxResources = *s.MaxResources
	}
}

// ProviderAddress parses a provider source address with OpenTofu's registry address grammar
// ([tfaddr.ParseProviderSource]: "[hostname/]namespace/type", each part letters, digits and
// dashes, the hostname a valid DNS name) and returns it fully qualified
// ("registry.opentofu.org/hashicorp/local"). A missing namespace is "hashicorp", as Terraform
// assumes for a bare name. The error names the address and what was expected; ".." or any
// other path element never passes.
func ProviderAddress(src string) (host, namespace, typ string, err error) {
	p, err := tfaddr.ParseProviderSource(src)
	if err != nil {
		return "", "", "", fmt.Errorf("provider source %q is not a registry address (want [HOSTNAME/]NAMESPACE/TYPE, each part letters, digits and dashes): %w", src, err)
	}
	ns := p.Namespace
	switch {
	case ns == tfaddr.UnknownProviderNamespace && !strings.Contains(src, "/"):
		ns = "hashicorp"
	case ns == tfaddr.UnknownProviderNamespace || ns == tfaddr.LegacyProviderNamespace:
		return "", "", "", fmt.Errorf("provider source %q is not a registry address (want [HOSTNAME/]NAMESPACE/TYPE with a real namespace)", src)
	}
	return p.Hostname.String(), ns, p.Type, nil
}

// providerAllowed reports whether the fully qualified address matches an allowed pattern.
func (p Policy) providerAllowed(fq string) bool {
	if len(p.AllowedProviders) == 0 {
		return true
	}
	for _, pat := range p.AllowedProviders {
		if ok, _ := path.Match(pat, fq); ok {
			return true
		}
	}
	return false
}

// functionDenied reports whether a function name is denied.
func (p Policy) functionDenied(name string) bool {
	// core:: may be repeated; every one is stripped, so core::core::file is file.
	for strings.HasPrefix(name, "core::") {
		name = strings.TrimPrefix(name, "core::")
	}
	for _, pat := range p.DeniedFunctions {
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// File is a policy document on disk, such as the lava-policy ConfigMap mounted into synth.
// [File.Load] re-reads it when its size or modification time changed, so an admin's edit takes
// effect without a restart (the kubelet updates a mounted ConfigMap in place). Safe for
// concurrent use. The zero File (no Path) is the built-in policy.
type File struct {
	Path string
	// Default is the document used when Path is empty (zero: the built-in policy); lava up
	// sets its own (internal/up.DefaultPolicy).
	Default Config

	mu      sync.Mutex
	size    int64
	modTime time.Time
	cfg     Config
	loaded  bool
}

// Load returns the document's Config. An unreadable or invalid document is an error: the
// caller fails closed (synth refuses to render rather than apply without its policy).
func (f *File) Load() (Config, error) {
	if f == nil {
		return Config{}, nil
	}
	if f.Path == "" {
		return f.Default, nil
	}
	st, err := os.Stat(f.Path)
	if err != nil {
		return Config{}, fmt.Errorf("policy: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loaded && st.Size() == f.size && st.ModTime().Equal(f.modTime) {
		return f.cfg, nil
	}
	cfg, err := ReadFile(f.Path)
	if err != nil {
		return Config{}, err
	}
	f.cfg, f.size, f.modTime, f.loaded = cfg, st.Size(), st.ModTime(), true
	return cfg, nil
}
