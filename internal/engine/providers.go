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
	declared := requiredProviders(doc["terraform"])
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
		}
	}
	return out
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
