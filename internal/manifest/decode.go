package manifest

import (
	"encoding/json"
	"errors"
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
	// Go type: an unknown field, a wrong type); nil when it is one.
	strictErr error
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
		d.strictErr = errors.New(jsonErr(err))
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

// jsonErr is a sigs.k8s.io/yaml error without its "error unmarshaling JSON: " prefixes.
func jsonErr(err error) string {
	msg := err.Error()
	for _, p := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}
