package tofu

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/lava-operator/lava/internal/engine"
)

// planStream reads the output of `plan -json`, OpenTofu's machine-readable UI (one JSON object
// a line, each with a "type"): "planned_change" gives each changing resource instance's
// action, "refresh_complete" names every instance refreshed from state (a no-op unless it also
// has a planned change), "diagnostic" carries warnings and errors. Diagnostics are written to
// out as text ("Error: summary", then the detail, or [hiddenDetail] when the expression uses a
// sensitive value), so the run's output tail reads as the human output would. It replaces `show -json` of the plan file, which would start every
// provider again to read their schemas.
type planStream struct {
	out io.Writer

	mu      sync.Mutex
	partial []byte
	changed map[string]engine.ResourceAction
	seen    map[string]engine.ResourceAction
	// made are the objects an apply's "apply_complete" messages say it created, in the order
	// made.
	made []madeObject
	// warnings are the warning diagnostics ("SUMMARY: DETAIL"), unredacted.
	warnings []string
	// hideDetail: the configuration has sensitive values, so the detail of every error and
	// of a failed function call (which quotes the argument it refuses) is [hiddenDetail].
	hideDetail bool
}

func newPlanStream(out io.Writer) *planStream {
	return &planStream{out: out, changed: map[string]engine.ResourceAction{}, seen: map[string]engine.ResourceAction{}}
}

// uiResource is the "resource" object of planned_change and hook messages.
type uiResource struct {
	Addr     string `json:"addr"`
	Resource string `json:"resource"`
	Type     string `json:"resource_type"`
}

type uiMessage struct {
	Type   string `json:"type"`
	Change *struct {
		Resource uiResource `json:"resource"`
		Action   string     `json:"action"`
	} `json:"change"`
	Hook *struct {
		Resource uiResource `json:"resource"`
		// Action, IDKey and IDValue are apply_complete's: the change made and the new
		// object's identifying attribute.
		Action  string `json:"action"`
		IDKey   string `json:"id_key"`
		IDValue string `json:"id_value"`
	} `json:"hook"`
	Diagnostic *struct {
		Severity string `json:"severity"`
		Summary  string `json:"summary"`
		Detail   string `json:"detail"`
		// Address is the resource instance the diagnostic is about, when it is about one.
		Address string `json:"address"`
		// Range is where in the configuration, when the diagnostic has a source position.
		Range *struct {
			Filename string `json:"filename"`
			Start    struct {
				Line int `json:"line"`
			} `json:"start"`
		} `json:"range"`
		Snippet *struct {
			// Values are what OpenTofu says of each value the expression refers to; a
			// sensitive one is "has a sensitive value".
			Values []struct {
				Statement string `json:"statement"`
			} `json:"values"`
			// FunctionCall is present when the diagnostic is about a function call.
			FunctionCall json.RawMessage `json:"function_call"`
		} `json:"snippet"`
	} `json:"diagnostic"`
}

// hiddenDetail replaces the detail of a diagnostic about an expression that uses a sensitive
// value, and of a failed function call or any error about an expression in a configuration
// that has one: OpenTofu's functions quote the argument they refuse (cidrsubnet's "invalid CIDR
// address: VALUE", timeadd, regex) and HCL's errors quote values (a duplicate object key), which
// for a value derived from a Secret binding would reach the Failed condition (docs/security.md,
// "Rendering").
const hiddenDetail = "(the detail is not shown: the expression uses a sensitive value)"

func (s *planStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		s.line(s.partial[:i])
		s.partial = s.partial[i+1:]
	}
	return len(p), nil
}

// flush reads a last line that has no newline.
func (s *planStream) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.partial) > 0 {
		s.line(s.partial)
		s.partial = nil
	}
}

func (s *planStream) line(b []byte) {
	var m uiMessage
	if err := json.Unmarshal(b, &m); err != nil {
		// Not a UI message (a crash trace, say): keep it for the output tail.
		_, _ = s.out.Write(append(append([]byte{}, b...), '\n'))
		return
	}
	switch {
	case m.Type == "planned_change" && m.Change != nil:
		s.changed[m.Change.Resource.Addr] = resourceAction(m.Change.Resource, uiAction(m.Change.Action))
	case m.Type == "apply_complete" && m.Hook != nil && m.Hook.Action == "create":
		s.made = append(s.made, madeObject{addr: m.Hook.Resource.Addr, idKey: m.Hook.IDKey, idValue: m.Hook.IDValue})
	case m.Type == "refresh_complete" && m.Hook != nil:
		s.seen[m.Hook.Resource.Addr] = resourceAction(m.Hook.Resource, engine.ActionNoOp)
	case m.Type == "diagnostic" && m.Diagnostic != nil:
		// With sensitive values in the configuration, the detail of every error is hidden: HCL's
		// own errors quote values ("Duplicate object key: Two different items produced the key
		// \"VALUE\"", with no values listed), and so may a provider's (a planned value's path
		// names map keys), with or without a snippet.
		if s.hideDetail && m.Diagnostic.Severity == "error" {
			m.Diagnostic.Detail = hiddenDetail
		}
		if sn := m.Diagnostic.Snippet; sn != nil {
			// OpenTofu lists no values for a function call's arguments, and its functions quote
			// the argument they refuse: a failed call's detail is hidden too when it is a warning.
			if s.hideDetail && len(sn.FunctionCall) > 0 {
				m.Diagnostic.Detail = hiddenDetail
			}
			for _, v := range sn.Values {
				if strings.Contains(v.Statement, "sensitive") {
					m.Diagnostic.Detail = hiddenDetail
				}
			}
		}
		level := "Warning"
		if m.Diagnostic.Severity == "error" {
			level = "Error"
		} else {
			s.warnings = append(s.warnings, m.Diagnostic.Summary+": "+m.Diagnostic.Detail)
		}
		// As the human output shows a diagnostic: summary, position lines, detail.
		text := level + ": " + m.Diagnostic.Summary + "\n"
		if rg := m.Diagnostic.Range; rg != nil && rg.Filename != "" {
			text += fmt.Sprintf("  on %s line %d:\n", rg.Filename, rg.Start.Line)
		}
		if m.Diagnostic.Address != "" {
			text += "  with " + m.Diagnostic.Address + ",\n"
		}
		_, _ = io.WriteString(s.out, text+"\n"+m.Diagnostic.Detail+"\n")
	}
}

// madeObject is an object an apply created: its address and identifying attribute.
type madeObject struct{ addr, idKey, idValue string }

// String reads "ADDR (ID_KEY=ID_VALUE)", or ADDR when the CLI named no identifying attribute.
func (m madeObject) String() string {
	if m.idKey == "" {
		return m.addr
	}
	return m.addr + " (" + m.idKey + "=" + m.idValue + ")"
}

func resourceAction(r uiResource, a engine.Action) engine.ResourceAction {
	mode := "managed"
	if strings.HasPrefix(r.Resource, "data.") {
		mode = "data"
	}
	return engine.ResourceAction{Address: r.Addr, Type: r.Type, Mode: mode, Action: a}
}

// uiAction maps the UI's change actions to the engine's.
func uiAction(a string) engine.Action {
	switch a {
	case "create":
		return engine.ActionCreate
	case "update":
		return engine.ActionUpdate
	case "delete":
		return engine.ActionDelete
	case "replace":
		return engine.ActionReplace
	case "read":
		return engine.ActionRead
	}
	return engine.ActionNoOp
}

// result counts the changes and lists each instance's action in address order: managed
// instances always, data sources only when read at apply.
func (s *planStream) result() (engine.Summary, []engine.ResourceAction) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := map[string]engine.ResourceAction{}
	for a, r := range s.seen {
		all[a] = r
	}
	for a, r := range s.changed {
		all[a] = r
	}
	var sum engine.Summary
	out := []engine.ResourceAction{}
	for _, r := range all {
		if r.Mode == "data" {
			if r.Action == engine.ActionRead {
				out = append(out, r)
			}
			continue
		}
		switch r.Action {
		case engine.ActionCreate:
			sum.Add++
		case engine.ActionUpdate:
			sum.Change++
		case engine.ActionDelete:
			sum.Destroy++
		case engine.ActionReplace:
			sum.Add++
			sum.Destroy++
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return sum, out
}
