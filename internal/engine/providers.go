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
}

// builtinProvider is the provider of terraform_data and terraform_remote_state, which needs no
// requirement.
const builtinProvider = "terraform"

// Requirements returns the providers a rendered Terraform JSON needs, sorted by local name:
// every local name in sources (the architecture's :providers), every `provider` block, every
// `provider` meta-argument ("aws.west" is "aws") and, for resources and data sources without
// one, the type's prefix before the first "_" ("aws_vpc" is "aws"). The built-in "terraform"
// provider (terraform_data) needs none. A source is sources[name], else "hashicorp/NAME".
func Requirements(rendered []byte, sources map[string]string) ([]ProviderRequirement, error) {
	var doc struct {
		Provider map[string]json.RawMessage            `json:"provider"`
		Resource map[string]map[string]json.RawMessage `json:"resource"`
		Data     map[string]map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(rendered, &doc); err != nil {
		return nil, fmt.Errorf("engine: read providers of the rendered JSON: %w", err)
	}
	names := map[string]bool{}
	for n := range sources {
		names[n] = true
	}
	for n := range doc.Provider {
		names[n] = true
	}
	for _, blocks := range []map[string]map[string]json.RawMessage{doc.Resource, doc.Data} {
		for typ, byName := range blocks {
			for _, raw := range byName {
				names[providerOf(typ, raw)] = true
			}
		}
	}
	delete(names, builtinProvider)
	delete(names, "")
	out := make([]ProviderRequirement, 0, len(names))
	for n := range names {
		src := sources[n]
		if src == "" {
			src = "hashicorp/" + n
		}
		out = append(out, ProviderRequirement{Name: n, Source: src})
	}
	slices.SortFunc(out, func(a, b ProviderRequirement) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// providerOf returns the local provider name of one resource block: its `provider`
// meta-argument without alias, else the type's prefix.
func providerOf(typ string, raw json.RawMessage) string {
	var meta struct {
		Provider string `json:"provider"`
	}
	// A block may be an object or (rarely) an array of objects; only objects carry the
	// meta-argument we read.
	if json.Unmarshal(raw, &meta) == nil && meta.Provider != "" {
		name, _, _ := strings.Cut(meta.Provider, ".")
		return name
	}
	name, _, _ := strings.Cut(typ, "_")
	return name
}
