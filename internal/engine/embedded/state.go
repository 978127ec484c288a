package embedded

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// State is a Terraform state, format version 4 (the JSON terraform and tofu write); a
// resource in a module names its module instance path ("module.a[0]") as tofu writes it.
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
		if _, err := parseModulePath(r.Module); err != nil {
			return nil, fmt.Errorf("parse state: %s.%s: %w", r.Type, r.Name, err)
		}
	}
	if st.Outputs == nil {
		st.Outputs = map[string]StateOutput{}
	}
	return &st, nil
}

// checkStateNumbers refuses a state body holding a number of more than [MaxNumberText] digits,
// counting its text and the digits its exponent writes out ("1e1600000" is 1.6 million):
// go-cty parses each with math/big when the state is decoded, in time the square of its
// digits, on every plan and drift scan, and nothing can interrupt it (a state OpenTofu wrote
// with two numbers of 1.6 million digits cost 15 s per plan). The error wraps
// [engine.ErrEvaluationLimit]; a body that is not JSON is left to the parse.
func checkStateNumbers(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF, or not JSON: ParseState says so
		}
		n, ok := tok.(json.Number)
		if !ok {
			continue
		}
		if d := numberTokenDigits(string(n)); d > MaxNumberText {
			return &LimitError{Func: "state", Reason: fmt.Sprintf(
				"it holds a number of about %d digits, more than %d, the limit of a number's text: the embedded engine cannot read it (the engine that wrote it can)", d, MaxNumberText)}
		}
	}
}

// numberTokenDigits is how many digits the JSON number s writes out: its text, plus its
// exponent's magnitude (an exponent that does not fit an int64 counts as the largest).
func numberTokenDigits(s string) int64 {
	d := int64(len(s))
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.ParseInt(strings.TrimPrefix(s[i+1:], "+"), 10, 64)
		if err != nil || e == math.MinInt64 {
			return math.MaxInt64
		}
		if e < 0 {
			e = -e
		}
		d = addSat(d, e)
	}
	return d
}

// Marshal renders the state as compact JSON (OpenTofu's state v4 format; tofu indents its
// files, which no reader needs and which costs a pass over every save) with resources in a
// stable order.
func (s *State) Marshal() ([]byte, error) {
	cp := *s
	cp.Resources = append([]StateResource(nil), s.Resources...)
	sort.SliceStable(cp.Resources, func(i, j int) bool {
		a, b := cp.Resources[i], cp.Resources[j]
		if a.Module != b.Module {
			return a.Module < b.Module
		}
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
	b, err := json.Marshal(&cp)
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

// applyMoves returns st with each move carried out where st has its from and not its to,
// and the moves that applied; st itself is not changed. A move of resources renames the
// resource (its module path too); of instances takes one instance out of its resource into
// the target resource (created as needed) under the target key; of modules rewrites the
// module paths of every resource in the call (from without a key: every instance of the
// call, keeping their keys unless to has one) or the instance.
func applyMoves(st *State, moves []Move) (*State, []Move) {
	if st == nil || len(moves) == 0 {
		return st, nil
	}
	cp := *st
	cp.Resources = make([]StateResource, len(st.Resources))
	for i, r := range st.Resources {
		r.Instances = append([]StateInstance(nil), r.Instances...)
		cp.Resources[i] = r
	}
	var done []Move
	for _, m := range moves {
		from, err1 := parseAddrString(m.From)
		to, err2 := parseAddrString(m.To)
		if err1 != nil || err2 != nil {
			continue
		}
		var ok bool
		switch {
		case from.Res == "":
			ok = moveModule(&cp, from, to)
		case from.HasKey || to.HasKey:
			ok = moveInstance(&cp, from, to)
		default:
			ok = moveResource(&cp, from, to)
		}
		if ok {
			done = append(done, m)
		}
	}
	return &cp, done
}

// findResource returns the index of the managed resource at a module path and "type.name".
func findResource(st *State, module, res string) int {
	for i, r := range st.Resources {
		if r.Mode == "managed" && r.Module == module && r.Type+"."+r.Name == res {
			return i
		}
	}
	return -1
}

func moveResource(st *State, from, to absAddr) bool {
	i := findResource(st, modulePath(from.Module), from.Res)
	if i < 0 || findResource(st, modulePath(to.Module), to.Res) >= 0 {
		return false
	}
	typ, name, _ := strings.Cut(to.Res, ".")
	st.Resources[i].Module, st.Resources[i].Type, st.Resources[i].Name = modulePath(to.Module), typ, name
	return true
}

func moveInstance(st *State, from, to absAddr) bool {
	i := findResource(st, modulePath(from.Module), from.Res)
	if i < 0 {
		return false
	}
	fk, tk := keyString(from.Key), keyString(to.Key)
	at := -1
	for j, in := range st.Resources[i].Instances {
		if in.Deposed == "" && keyString(normalizeKey(in.IndexKey)) == fk {
			at = j
		}
	}
	if at < 0 {
		return false
	}
	t := findResource(st, modulePath(to.Module), to.Res)
	if t >= 0 {
		for _, in := range st.Resources[t].Instances {
			if in.Deposed == "" && keyString(normalizeKey(in.IndexKey)) == tk {
				return false
			}
		}
	}
	in := st.Resources[i].Instances[at]
	in.IndexKey = to.Key
	src := &st.Resources[i]
	src.Instances = append(src.Instances[:at:at], src.Instances[at+1:]...)
	if t < 0 {
		typ, name, _ := strings.Cut(to.Res, ".")
		st.Resources = append(st.Resources, StateResource{Module: modulePath(to.Module), Mode: "managed", Type: typ, Name: name, Provider: src.Provider})
		t = len(st.Resources) - 1
	}
	st.Resources[t].Instances = append(st.Resources[t].Instances, in)
	sort.SliceStable(st.Resources[t].Instances, func(a, b int) bool {
		return lessKey(normalizeKey(st.Resources[t].Instances[a].IndexKey), normalizeKey(st.Resources[t].Instances[b].IndexKey))
	})
	if len(st.Resources[i].Instances) == 0 {
		st.Resources = append(st.Resources[:i], st.Resources[i+1:]...)
	}
	return true
}

// moveModule rewrites module paths under from into to.
func moveModule(st *State, from, to absAddr) bool {
	n := len(from.Module)
	rewrite := func(path []addrStep) ([]addrStep, bool) {
		if len(path) < n {
			return nil, false
		}
		for i := 0; i < n; i++ {
			f, p := from.Module[i], path[i]
			if f.Name != p.Name {
				return nil, false
			}
			if (f.HasKey || i < n-1) && keyString(f.Key) != keyString(p.Key) {
				return nil, false
			}
		}
		out := append([]addrStep(nil), to.Module...)
		last := &out[len(out)-1]
		if !last.HasKey && !from.Module[n-1].HasKey {
			last.Key, last.HasKey = path[n-1].Key, path[n-1].HasKey
		}
		return append(out, path[n:]...), true
	}
	type hit struct {
		i    int
		path string
	}
	var hits []hit
	taken := map[string]bool{}
	for _, r := range st.Resources {
		taken[r.Module+"|"+r.Mode+"."+r.Type+"."+r.Name] = true
	}
	for i, r := range st.Resources {
		path, err := parseModulePath(r.Module)
		if err != nil {
			continue
		}
		np, ok := rewrite(path)
		if !ok {
			continue
		}
		// The target already holding resources stops the move, as in tofu.
		if taken[modulePath(np)+"|"+r.Mode+"."+r.Type+"."+r.Name] {
			return false
		}
		hits = append(hits, hit{i, modulePath(np)})
	}
	if len(hits) == 0 {
		return false
	}
	for _, h := range hits {
		st.Resources[h.i].Module = h.path
	}
	return true
}
