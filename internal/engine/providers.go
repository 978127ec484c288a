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
// provider (terraform_data) needs none; every name of the rendered JSON's own
// terraform.required_providers is needed too. A source is sources[name], else the rendered
// required_providers' source, else "hashicorp/NAME".
func Requirements(rendered []byte, sources map[string]string) ([]ProviderRequirement, error) {
	var doc struct {
		Terraform json.RawMessage                       `json:"terraform"`
		Provider  map[string]json.RawMessage            `json:"provider"`
		Resource  map[string]map[string]json.RawMessage `json:"resource"`
		Data      map[string]map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(rendered, &doc); err != nil {
		return nil, fmt.Errorf("engine: read providers of the rendered JSON: %w", err)
	}
	names := map[string]bool{}
	for n := range sources {
		names[n] = true
	}
	declared := requiredProviders(doc.Terraform)
	for n := range declared {
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
	// The providers of modules bundled in the document (bundle.go) are the root's too.
	mods, err := ReadBundle(rendered)
	if err != nil {
		return nil, err
	}
	for _, body := range mods {
		reqs, err := Requirements(body, nil)
		if err != nil {
			return nil, err
		}
		for _, r := range reqs {
			names[r.Name] = true
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
		out = append(out, ProviderRequirement{Name: n, Source: src})
	}
	slices.SortFunc(out, func(a, b ProviderRequirement) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// requiredProviders reads the local names and sources ("" when not given) of a terraform
// block's required_providers; the block may be an object or an array of objects, an entry an
// object with "source" or (the legacy form) a version string.
func requiredProviders(raw json.RawMessage) map[string]string {
	out := map[string]string{}
	if len(raw) == 0 {
		return out
	}
	type block struct {
		RequiredProviders map[string]json.RawMessage `json:"required_providers"`
	}
	var blocks []block
	var one block
	if json.Unmarshal(raw, &one) == nil {
		blocks = []block{one}
	} else {
		_ = json.Unmarshal(raw, &blocks)
	}
	for _, b := range blocks {
		for n, e := range b.RequiredProviders {
			var entry struct {
				Source string `json:"source"`
			}
			_ = json.Unmarshal(e, &entry) // a version string has no source
			out[n] = entry.Source
		}
	}
	return out
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
