package embedded

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// sensitivePathSet renders paths (in state's sensitive_attributes encoding, see
// marshalPaths) as a sorted set of canonical JSON strings, so paths written by the embedded
// engine and by tofu (whose key order differs) compare equal.
func sensitivePathSet(encoded json.RawMessage) []string {
	var paths []any
	if len(encoded) == 0 || json.Unmarshal(encoded, &paths) != nil {
		return nil
	}
	set := map[string]bool{}
	for _, p := range paths {
		b, err := json.Marshal(p)
		if err == nil {
			set[string(b)] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// instanceSensitivePaths are the paths of v state records as sensitive: those the schema
// marks and those that held a sensitive value in the configuration (a sensitive variable,
// sensitive()), as OpenTofu writes sensitive_attributes. Configuration paths v does not have
// are left out.
func instanceSensitivePaths(schema *Schema, v cty.Value, marked []cty.Path) []cty.Path {
	paths := schema.Block.SensitivePaths(v)
	seen := map[string]bool{}
	for _, p := range paths {
		seen[string(marshalPaths([]cty.Path{p}))] = true
	}
	for _, p := range marked {
		if _, err := p.Apply(v); err != nil {
			continue
		}
		if k := string(marshalPaths([]cty.Path{p})); !seen[k] {
			seen[k] = true
			paths = append(paths, p)
		}
	}
	return paths
}

// sensitivityChanged reports whether a no-op change would still rewrite which attributes
// state marks sensitive: OpenTofu plans that as an update ("this attribute value will be
// marked as sensitive"), so the engines agree on the state's sensitive_attributes.
// afterPaths are v's paths as the state would record them (instanceSensitivePaths).
func sensitivityChanged(schema *Schema, prior *StateInstance, v cty.Value, afterPaths []cty.Path) bool {
	var priorPaths json.RawMessage
	if prior != nil {
		priorPaths = prior.SensitiveAttributes
	}
	if len(afterPaths) == 0 && noPaths(priorPaths) {
		// afterPaths holds the schema's paths of v: none before, none after.
		return false
	}
	after := marshalPaths(afterPaths)
	if bytes.Equal(after, priorPaths) {
		// The state lists exactly the paths it would be written with; those include the
		// schema's paths of v, so nothing changes.
		return false
	}
	before := sensitivePathSet(priorPaths)
	for _, p := range schema.Block.SensitivePaths(v) {
		before = append(before, sensitivePathSet(marshalPaths([]cty.Path{p}))...)
	}
	return !sameSet(before, sensitivePathSet(after))
}

// noPaths reports whether encoded (sensitive_attributes as state stores it) lists no path:
// absent, null or an empty array.
func noPaths(encoded json.RawMessage) bool {
	t := bytes.TrimSpace(encoded)
	return len(t) == 0 || bytes.Equal(t, []byte("null")) || bytes.Equal(t, []byte("[]"))
}

func sameSet(a, b []string) bool {
	set := map[string]bool{}
	for _, x := range a {
		set[x] = true
	}
	other := map[string]bool{}
	for _, x := range b {
		if !set[x] {
			return false
		}
		other[x] = true
	}
	return len(set) == len(other)
}

// unmarshalPaths reads paths in state's sensitive_attributes encoding (marshalPaths).
func unmarshalPaths(encoded json.RawMessage) ([]cty.Path, error) {
	if len(encoded) == 0 {
		return nil, nil
	}
	var raw [][]pathJSON
	if err := json.Unmarshal(encoded, &raw); err != nil {
		return nil, fmt.Errorf("sensitive paths: %w", err)
	}
	out := make([]cty.Path, 0, len(raw))
	for _, steps := range raw {
		var p cty.Path
		for _, st := range steps {
			switch st.Type {
			case "get_attr":
				var name string
				if err := json.Unmarshal(st.Value, &name); err != nil {
					return nil, fmt.Errorf("sensitive paths: %w", err)
				}
				p = p.GetAttr(name)
			case "index":
				var k struct {
					Value json.RawMessage `json:"value"`
					Type  json.RawMessage `json:"type"`
				}
				if err := json.Unmarshal(st.Value, &k); err != nil {
					return nil, fmt.Errorf("sensitive paths: %w", err)
				}
				ty, err := ctyjson.UnmarshalType(k.Type)
				if err != nil {
					return nil, fmt.Errorf("sensitive paths: %w", err)
				}
				kv, err := ctyjson.Unmarshal(k.Value, ty)
				if err != nil {
					return nil, fmt.Errorf("sensitive paths: %w", err)
				}
				p = p.Index(kv)
			default:
				return nil, fmt.Errorf("sensitive paths: unknown step type %q", st.Type)
			}
		}
		out = append(out, p)
	}
	return out, nil
}
