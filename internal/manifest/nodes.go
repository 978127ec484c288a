package manifest

import (
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// FieldNode returns the YAML node to point at for path (a [FieldError.Path], the API server's
// field path: "metadata.name", "spec.bindingsFrom[1].secretRef", "spec.bindings[key]") in a
// document's root mapping: the key node of the deepest mapping entry of path that exists, or
// the item of a sequence index ("spec.bindingsFrom[1]"); root itself when not even the first
// field exists (or path is empty).
func FieldNode(root *yaml.Node, path string) *yaml.Node {
	at, cur := root, root
	if path == "" {
		return root
	}
	for _, part := range strings.Split(path, ".") {
		name, sub := part, ""
		if i := strings.IndexByte(part, '['); i > 0 && strings.HasSuffix(part, "]") {
			name, sub = part[:i], part[i+1:len(part)-1]
		}
		key, val := entry(cur, name)
		if val == nil {
			return at
		}
		at = key
		if sub != "" {
			idx, err := strconv.Atoi(sub)
			switch {
			case err == nil && val.Kind == yaml.SequenceNode && idx >= 0 && idx < len(val.Content):
				val = val.Content[idx]
				at = val
			case err != nil && val.Kind == yaml.MappingNode:
				k, v := entry(val, sub)
				if v == nil {
					return at
				}
				at, val = k, v
			default:
				return at
			}
		}
		cur = val
	}
	return at
}

// ValueNode returns the value node at keys, each a key of the mapping the previous one holds
// (ValueNode(root, "spec", "source", "inline")), or nil when one is missing or not a mapping.
func ValueNode(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		if _, n = entry(n, k); n == nil {
			return nil
		}
	}
	return n
}

// entry returns the key and value nodes of key in mapping node n, or nils.
func entry(n *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}
