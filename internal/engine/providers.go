package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// ProviderRequirement is one entry of the `required_providers` an engine adds.
type ProviderRequirement struct {
	// Name is the provider's local name ("aws", "local").
	Name string `json:"name"`
	// Source is its source address ("hashicorp/aws", "example/testkit").
	Source string `json:"source"`
	// Version is the version constraint it must meet ("~> 6.0"; "" for any): the
	// architecture's :version and the rendered JSON's own required_providers version, both
	// ([Requirements]).
	Version string `json:"version,omitempty"`
}

// builtinProvider is the provider of terraform_data and terraform_remote_state, which needs no
// requirement.
const builtinProvider = "terraform"

// Requirements returns the providers a rendered Terraform JSON needs, sorted by local name:
// every local name in sources (the architecture's :providers), every `provider` block, every
// `provider` meta-argument ("aws.west" is "aws") and, for resources and data sources without
// one, the type's prefix before the first "_" ("aws_vpc" is "aws"). The built-in "terraform"
// provider (terraform_data) needs none; every name of the rendered JSON's own
// terraform.required_providers is needed too. A source is sources[name], else the rendered
// required_providers' source, else "hashicorp/NAME". A version constraint is versions[name]
// (the architecture's :version) and the rendered required_providers' version: both must hold,
// as Terraform requires every constraint on a provider ([AndConstraints]).
func Requirements(rendered []byte, sources, versions map[string]string) ([]ProviderRequirement, error) {
	// Keys are matched exactly, as Terraform and hcl match them (encoding/json's struct fields
	// would also take "Provider" for "provider", and tofu would then install and start a
	// provider that way, past the policy's allow-list).
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(rendered, &doc); err != nil {
		return nil, fmt.Errorf("engine: read providers of the rendered JSON: %w", err)
	}
	var provider map[string]json.RawMessage
	var resource, data map[string]map[string]json.RawMessage
	for key, into := range map[string]any{"provider": &provider, "resource": &resource, "data": &data} {
		if raw, ok := doc[key]; ok {
			if err := json.Unmarshal(raw, into); err != nil {
				return nil, fmt.Errorf("engine: read providers of the rendered JSON: %s: %w", key, err)
			}
		}
	}
	names := map[string]bool{}
	for n := range sources {
		names[n] = true
	}
	declared, declaredVersions := requiredProviders(doc["terraform"])
	for n := range declared {
		names[n] = true
	}
	for n := range provider {
		names[n] = true
	}
	for _, blocks := range []map[string]map[string]json.RawMessage{resource, data} {
		for typ, byName := range blocks {
			for _, raw := range byName {
				names[providerOf(typ, raw)] = true
			}
		}
	}
	// The providers of modules bundled in the document (bundle.go) are the root's too.
	mods, err := ReadBundle(rendered)
	if err != nil {
		return nil, err
	}
	for _, body := range mods {
		reqs, err := Requirements(body, nil, nil)
		if err != nil {
			return nil, err
		}
		for _, r := range reqs {
			names[r.Name] = true
			declaredVersions[r.Name] = AndConstraints(declaredVersions[r.Name], r.Version)
			if _, ok := declared[r.Name]; !ok && r.Source != "hashicorp/"+r.Name {
				declared[r.Name] = r.Source
			}
		}
	}
	delete(names, builtinProvider)
	delete(names, "")
	out := make([]ProviderRequirement, 0, len(names))
	for n := range names {
		src := sources[n]
		if src == "" {
			src = declared[n]
		}
		if src == "" {
			src = "hashicorp/" + n
		}
		out = append(out, ProviderRequirement{Name: n, Source: src, Version: AndConstraints(declaredVersions[n], versions[n])})
	}
	slices.SortFunc(out, func(a, b ProviderRequirement) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// MaxProviderConfigurations bounds the provider configurations one operation uses: each
// configuration (an aliased one too) is a provider process of its own, started by the engine
// (or by tofu) and held until the operation ends, in the applier's or drift scanner's
// container, which every tenant shares. 150 aliases of hashicorp/local, each used by one
// local_file (under maxResources), started 150 processes in one plan, again at every retry,
// drift scan and speculative plan. Architectures use a handful (a provider per region).
const MaxProviderConfigurations = 16

// ProviderConfigurations returns the provider configurations the root of a rendered document
// uses, as "NAME" or "NAME.ALIAS", sorted: those its provider blocks declare, and those its
// resources and data sources name in their provider meta-argument or imply by their type's
// prefix (the built-in terraform provider is no process and is left out).
func ProviderConfigurations(rendered []byte) ([]string, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(rendered, &doc); err != nil {
		return nil, fmt.Errorf("engine: read providers of the rendered JSON: %w", err)
	}
	configs := map[string]bool{}
	var provider map[string]json.RawMessage
	if raw, ok := doc["provider"]; ok {
		if err := json.Unmarshal(raw, &provider); err != nil {
			return nil, fmt.Errorf("engine: read providers of the rendered JSON: provider: %w", err)
		}
	}
	for name, raw := range provider {
		var blocks []json.RawMessage
		if json.Unmarshal(raw, &blocks) != nil {
			blocks = []json.RawMessage{raw}
		}
		for _, b := range blocks {
			key := name
			if alias := stringKey(b, "alias"); alias != "" {
				key += "." + alias
			}
			configs[key] = true
		}
	}
	for _, key := range []string{"resource", "data"} {
		var blocks map[string]map[string]json.RawMessage
		if raw, ok := doc[key]; ok {
			if err := json.Unmarshal(raw, &blocks); err != nil {
				return nil, fmt.Errorf("engine: read providers of the rendered JSON: %s: %w", key, err)
			}
		}
		for typ, byName := range blocks {
			for _, raw := range byName {
				p := stringKey(raw, "provider")
				if p == "" {
					p, _, _ = strings.Cut(typ, "_")
				}
				configs[p] = true
			}
		}
	}
	delete(configs, builtinProvider)
	delete(configs, "")
	out := make([]string, 0, len(configs))
	for k := range configs {
		out = append(out, k)
	}
	slices.Sort(out)
	return out, nil
}

// CheckProviderConfigurations refuses, with an error wrapping [ErrEvaluationLimit] (the same
// document fails again: not retried), a rendered document using more than
// [MaxProviderConfigurations] provider configurations ([ProviderConfigurations]), before any
// provider starts.
func CheckProviderConfigurations(rendered []byte) error {
	configs, err := ProviderConfigurations(rendered)
	if err != nil {
		return err
	}
	if len(configs) > MaxProviderConfigurations {
		return fmt.Errorf("%w: the configuration uses %d provider configurations (%s, ...), more than %d: each is a provider process of its own, held for the whole operation",
			ErrEvaluationLimit, len(configs), strings.Join(configs[:3], ", "), MaxProviderConfigurations)
	}
	return nil
}

// SourcesAndConstraints returns the sources and the version constraints of an architecture's
// providers by local name, as [Target.ProviderSources] and [Target.ProviderConstraints] take
// them (a provider without a constraint has no entry in the second).
func SourcesAndConstraints(reqs []ProviderRequirement) (sources, constraints map[string]string) {
	sources = map[string]string{}
	for _, r := range reqs {
		sources[r.Name] = r.Source
		if r.Version != "" {
			if constraints == nil {
				constraints = map[string]string{}
			}
			constraints[r.Name] = r.Version
		}
	}
	return sources, constraints
}

// AndConstraints joins version constraints that must all hold ("~> 0.4" and "< 0.5" is
// "~> 0.4, < 0.5"), leaving out empty and repeated ones; "" when none is left.
func AndConstraints(cs ...string) string {
	var out []string
	for _, c := range cs {
		if c = strings.TrimSpace(c); c != "" && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return strings.Join(out, ", ")
}

// requiredProviders reads the local names and sources ("" when not given), and the version
// constraints, of a terraform block's required_providers; the block may be an object or an
// array of objects, an entry an object with "source" and "version" or (the legacy form) a
// version string.
func requiredProviders(raw json.RawMessage) (sources, versions map[string]string) {
	out := map[string]string{}
	versions = map[string]string{}
	if len(raw) == 0 {
		return out, versions
	}
	var blocks []map[string]json.RawMessage
	var one map[string]json.RawMessage
	if json.Unmarshal(raw, &one) == nil {
		blocks = []map[string]json.RawMessage{one}
	} else {
		_ = json.Unmarshal(raw, &blocks)
	}
	for _, b := range blocks {
		var req map[string]json.RawMessage
		_ = json.Unmarshal(b["required_providers"], &req)
		for n, e := range req {
			out[n] = stringKey(e, "source") // a version string has no source
			var legacy string
			if json.Unmarshal(e, &legacy) == nil {
				versions[n] = AndConstraints(versions[n], legacy)
			} else {
				versions[n] = AndConstraints(versions[n], stringKey(e, "version"))
			}
		}
	}
	return out, versions
}

// stringKey returns the string at key (matched exactly) of the JSON object raw; "" when raw is
// not an object or the key is absent or not a string.
func stringKey(raw json.RawMessage, key string) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return ""
	}
	var s string
	_ = json.Unmarshal(obj[key], &s)
	return s
}

// providerOf returns the local provider name of one resource block: its `provider`
// meta-argument without alias, else the type's prefix.
func providerOf(typ string, raw json.RawMessage) string {
	// A block may be an object or (rarely) an array of objects; only objects carry the
	// meta-argument we read.
	if p := stringKey(raw, "provider"); p != "" {
		name, _, _ := strings.Cut(p, ".")
		return name
	}
	name, _, _ := strings.Cut(typ, "_")
	return name
}
