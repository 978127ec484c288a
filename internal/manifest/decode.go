package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/lava-operator/lava/api/v1alpha1"
)

// decoded is what decodeObject read of a document besides the object.
type decoded struct {
	// apiVersion and kind are the document's type.
	apiVersion, kind string
	// strictErr is why the document is not a valid LavaArchitecture (decoded strictly into the
	// Go type: an unknown field, a wrong type); nil when it is one. strictAt is the node it is
	// about (the unknown key, the value of the wrong type), or the document's when not found.
	strictErr error
	strictAt  *yaml.Node
	// content is the decoded object as JSON values (integers as int64, as the API server
	// decodes a request body), for the schema validation.
	content map[string]any
}

// decodeObject decodes the mapping node root: its type, then, strictly, the LavaArchitecture
// and its JSON content. The error is one of the document's type.
func decodeObject(root *yaml.Node) (*v1alpha1.LavaArchitecture, decoded, error) {
	var d decoded
	raw, err := yaml.Marshal(root)
	if err != nil {
		return nil, d, err
	}
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := sigsyaml.Unmarshal(raw, &tm); err != nil {
		return nil, d, errors.New(jsonErr(err))
	}
	d.apiVersion, d.kind = tm.APIVersion, tm.Kind
	obj := &v1alpha1.LavaArchitecture{}
	if err := sigsyaml.UnmarshalStrict(raw, obj); err != nil {
		d.strictAt, d.strictErr = strictError(root, err)
		return nil, d, nil
	}
	// The schema validates the object as decoded (as lava up keeps it and the services read
	// it), so what the Go types accept from YAML reads the same in both: an unquoted number
	// in a string field, a YAML 1.1 boolean spelled "yes".
	js, err := json.Marshal(obj)
	if err == nil {
		err = utiljson.Unmarshal(js, &d.content)
	}
	if err != nil {
		d.strictErr = errors.New(jsonErr(err))
		return nil, d, nil
	}
	return obj, d, nil
}

// strictError finds the node err, an error of decoding the document root strictly, is about,
// and words err for its author: an unknown field's key (the first mapping key of that name in
// the document), or the value at a wrong type's path ("spec.bindings: got an array, want an
// object of strings"). Any other error is the decoder's, at root.
func strictError(root *yaml.Node, err error) (*yaml.Node, error) {
	msg := jsonErr(err)
	if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
		if k := keyNamed(root, strings.Trim(name, `"`)); k != nil {
			return k, errors.New(msg)
		}
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return FieldNode(root, te.Field), fmt.Errorf("%s: got %s, want %s", te.Field, article(te.Value), typeWords(te.Type))
	}
	return root, errors.New(msg)
}

// keyNamed returns the first mapping key named name in n, breadth first, or nil.
func keyNamed(n *yaml.Node, name string) *yaml.Node {
	queue := []*yaml.Node{n}
	for len(queue) > 0 {
		n, queue = queue[0], queue[1:]
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == name {
					return n.Content[i]
				}
			}
		}
		queue = append(queue, n.Content...)
	}
	return nil
}

// article is a JSON value kind ("array", "number") with its article.
func article(kind string) string {
	if kind != "" && strings.IndexByte("aeiou", kind[0]) >= 0 {
		return "an " + kind
	}
	return "a " + kind
}

// typeWords describes a Go type of the API as a manifest's author reads it.
func typeWords(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Map:
		if t.Elem().Kind() == reflect.String {
			return "an object of strings"
		}
		return "an object"
	case reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return typeWords(t.Elem())
	}
	return t.String()
}

// jsonErr is a sigs.k8s.io/yaml error without its "error unmarshaling JSON: " prefixes.
func jsonErr(err error) string {
	msg := err.Error()
	for _, p := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}
