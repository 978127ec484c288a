package embedded

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/google/uuid"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// State is a Terraform state, format version 4 (the JSON terraform and tofu write). Only the
// root module is supported (Lava renders no modules).
type State struct {
	Version          int                    `json:"version"`
	TerraformVersion string                 `json:"terraform_version"`
	Serial           uint64                 `json:"serial"`
	Lineage          string                 `json:"lineage"`
	Outputs          map[string]StateOutput `json:"outputs"`
	Resources        []StateResource        `json:"resources"`
	CheckResults     json.RawMessage        `json:"check_results"`
}

// StateOutput is one root module output.
type StateOutput struct {
	Value     json.RawMessage `json:"value"`
	Type      json.RawMessage `json:"type"`
	Sensitive bool            `json:"sensitive,omitempty"`
}

// StateResource is one resource (all its instances).
type StateResource struct {
	Module    string          `json:"module,omitempty"`
	Mode      string          `json:"mode"`
	Type      string          `json:"type"`
	Name      string          `json:"name"`
	Each      string          `json:"each,omitempty"`
	Provider  string          `json:"provider"`
	Instances []StateInstance `json:"instances"`
}

// StateInstance is one resource instance object.
type StateInstance struct {
	// IndexKey is nil, a number (count) or a string (for_each).
	IndexKey            any             `json:"index_key,omitempty"`
	Status              string          `json:"status,omitempty"`
	Deposed             string          `json:"deposed,omitempty"`
	SchemaVersion       int64           `json:"schema_version"`
	Attributes          json.RawMessage `json:"attributes,omitempty"`
	SensitiveAttributes json.RawMessage `json:"sensitive_attributes,omitempty"`
	Private             []byte          `json:"private,omitempty"`
	Dependencies        []string        `json:"dependencies,omitempty"`
	CreateBeforeDestroy bool            `json:"create_before_destroy,omitempty"`
}

// NewState returns an empty state with a fresh lineage and serial 0.
func NewState() *State {
	return &State{Version: 4, TerraformVersion: TerraformVersion, Lineage: uuid.NewString(), Outputs: map[string]StateOutput{}}
}

// ParseState reads a state v4 body.
func ParseState(body []byte) (*State, error) {
	var st State
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("parse state: %w", err)
	}
	if st.Version != 4 {
		return nil, fmt.Errorf("parse state: format version %d, want 4", st.Version)
	}
	for _, r := range st.Resources {
		if r.Module != "" {
			return nil, fmt.Errorf("parse state: %s.%s is in module %s; only the root module is supported", r.Type, r.Name, r.Module)
		}
	}
	if st.Outputs == nil {
		st.Outputs = map[string]StateOutput{}
	}
	return &st, nil
}

// Marshal renders the state as indented JSON with resources in a stable order.
func (s *State) Marshal() ([]byte, error) {
	cp := *s
	cp.Resources = append([]StateResource(nil), s.Resources...)
	sort.SliceStable(cp.Resources, func(i, j int) bool {
		a, b := cp.Resources[i], cp.Resources[j]
		if a.Mode != b.Mode {
			return a.Mode == "data"
		}
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		return a.Name < b.Name
	})
	if cp.Outputs == nil {
		cp.Outputs = map[string]StateOutput{}
	}
	if cp.Resources == nil {
		cp.Resources = []StateResource{}
	}
	b, err := json.MarshalIndent(&cp, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal state: %w", err)
	}
	return append(b, '\n'), nil
}

// instanceKey is an instance's index key: nil, an int64 (count) or a string (for_each).
type instanceKey = any

// keyString renders an index key as Terraform does in addresses: "", "[0]", `["k"]`.
func keyString(k instanceKey) string {
	switch t := k.(type) {
	case nil:
		return ""
	case int64:
		return "[" + strconv.FormatInt(t, 10) + "]"
	case string:
		return "[" + strconv.Quote(t) + "]"
	}
	return fmt.Sprintf("[%v]", k)
}

// normalizeKey turns an index key read from JSON (float64) into int64.
func normalizeKey(k any) instanceKey {
	switch t := k.(type) {
	case float64:
		return int64(t)
	case json.Number:
		n, _ := t.Int64()
		return n
	case int:
		return int64(t)
	}
	return k
}

// marshalAttributes encodes a value of the schema's type as state attributes JSON.
func marshalAttributes(v cty.Value, ty cty.Type) (json.RawMessage, error) {
	b, err := ctyjson.Marshal(v, ty)
	if err != nil {
		return nil, fmt.Errorf("encode state attributes: %w", err)
	}
	return b, nil
}

// pathJSON is a cty path step in state's sensitive_attributes encoding.
type pathJSON struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

func marshalPaths(paths []cty.Path) json.RawMessage {
	out := make([][]pathJSON, 0, len(paths))
	for _, p := range paths {
		var steps []pathJSON
		for _, st := range p {
			switch s := st.(type) {
			case cty.GetAttrStep:
				b, _ := json.Marshal(s.Name)
				steps = append(steps, pathJSON{Type: "get_attr", Value: b})
			case cty.IndexStep:
				b, err := ctyjson.Marshal(s.Key, s.Key.Type())
				if err != nil {
					continue
				}
				tb, _ := ctyjson.MarshalType(s.Key.Type())
				wrapped, _ := json.Marshal(map[string]json.RawMessage{"value": b, "type": tb})
				steps = append(steps, pathJSON{Type: "index", Value: wrapped})
			}
		}
		out = append(out, steps)
	}
	b, _ := json.Marshal(out)
	return b
}
