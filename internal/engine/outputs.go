package engine

import (
	"encoding/json"
	"fmt"
)

// OutputsFromState reads the root module outputs of a Terraform state v4 body, split by their
// sensitive flag, and returns the sensitive values' text too (for redaction).
func OutputsFromState(body []byte) (*Outputs, error) {
	var st struct {
		Outputs map[string]struct {
			Value     json.RawMessage `json:"value"`
			Sensitive bool            `json:"sensitive"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("engine: read outputs of state: %w", err)
	}
	out := &Outputs{Values: map[string]json.RawMessage{}, Sensitive: map[string]json.RawMessage{}}
	for name, o := range st.Outputs {
		if o.Sensitive {
			out.Sensitive[name] = o.Value
		} else {
			out.Values[name] = o.Value
		}
	}
	return out, nil
}

// SensitiveStrings returns the text of every sensitive output (each string leaf, and the whole
// JSON of non-string values), for a [Redactor].
func (o *Outputs) SensitiveStrings() []string {
	var out []string
	for _, v := range o.Sensitive {
		out = append(out, LeafStrings(v)...)
	}
	return out
}

// LeafStrings returns every string leaf of a JSON value, and the value's own text when it is
// not a string, so that any rendering of a sensitive value can be redacted.
func LeafStrings(v json.RawMessage) []string {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return nil
	}
	var out []string
	var walk func(any)
	walk = func(x any) {
		switch t := x.(type) {
		case string:
			out = append(out, t)
		case map[string]any:
			for _, e := range t {
				walk(e)
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(x)
	if _, isString := x.(string); !isString && len(v) > 0 && string(v) != "null" {
		out = append(out, string(v))
	}
	return out
}
