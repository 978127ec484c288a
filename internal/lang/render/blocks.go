package render

import (
	"fmt"
	"strconv"

	"github.com/lava-operator/lava/internal/lang/arch"
)

// modules renders the module calls: {NAME: {"source": "...", arguments...}}.
func (w *emitter) modules(ms []arch.ModuleCall) error {
	w.key("module")
	w.open('{')
	for i := range ms {
		m := &ms[i]
		w.key(m.Name)
		w.open('{')
		w.key("source")
		w.str(m.Source)
		for k, v := range m.Arguments.All() {
			w.key(k)
			if err := w.value(v); err != nil {
				return fmt.Errorf("module %s argument %s: %w", m.Name, k, err)
			}
		}
		w.close('}')
	}
	w.close('}')
	return nil
}

// variables renders the variable blocks: {NAME: {"type"?, "default", "description"?,
// "validation"?: [rules]}}.
func (w *emitter) variables(vs []arch.Variable) error {
	w.key("variable")
	w.open('{')
	for i := range vs {
		v := &vs[i]
		w.key(v.Name)
		w.open('{')
		if v.Type != "" {
			w.key("type")
			w.str(v.Type)
		}
		w.key("default")
		if err := w.value(v.Default); err != nil {
			return fmt.Errorf("variable %s default: %w", v.Name, err)
		}
		if v.Description != "" {
			w.key("description")
			w.str(v.Description)
		}
		if len(v.Validations) > 0 {
			if err := w.rules("validation", v.Validations); err != nil {
				return fmt.Errorf("variable %s: %w", v.Name, err)
			}
		}
		w.close('}')
	}
	w.close('}')
	return nil
}

// rules renders rules under key as [{"condition": ..., "error_message": ...}].
func (w *emitter) rules(key string, rs []arch.Rule) error {
	w.key(key)
	w.open('[')
	for _, r := range rs {
		w.elem()
		w.open('{')
		w.key("condition")
		if err := w.value(r.Condition); err != nil {
			return fmt.Errorf("%s condition: %w", key, err)
		}
		w.key("error_message")
		if err := w.value(r.ErrorMessage); err != nil {
			return fmt.Errorf("%s error_message: %w", key, err)
		}
		w.close('}')
	}
	w.close(']')
	return nil
}

// blocks renders the moved blocks ([{"from", "to"}]), the removed blocks ([{"from",
// "lifecycle": {"destroy"}}], destroy always written: OpenTofu warns about a removed block
// without it) and the check blocks ({NAME: {"assert": [rules]}}), each only when there are
// some.
func (w *emitter) blocks(a *arch.Architecture) error {
	w.objects("moved", len(a.Moves), func(i int) {
		w.key("from")
		w.str(a.Moves[i].From)
		w.key("to")
		w.str(a.Moves[i].To)
	})
	w.objects("removed", len(a.Removed), func(i int) {
		w.key("from")
		w.str(a.Removed[i].From)
		w.key("lifecycle")
		w.open('{')
		w.key("destroy")
		w.b = strconv.AppendBool(w.b, a.Removed[i].Destroy)
		w.close('}')
	})
	if len(a.Checks) > 0 {
		w.key("check")
		w.open('{')
		for i := range a.Checks {
			c := &a.Checks[i]
			w.key(c.Name)
			w.open('{')
			if err := w.rules("assert", c.Asserts); err != nil {
				return fmt.Errorf("check %s: %w", c.Name, err)
			}
			w.close('}')
		}
		w.close('}')
	}
	return nil
}

// objects writes key with an array of n objects, fields writing the members of object i; it
// writes nothing when n is 0.
func (w *emitter) objects(key string, n int, fields func(i int)) {
	if n == 0 {
		return
	}
	w.key(key)
	w.open('[')
	for i := range n {
		w.elem()
		w.open('{')
		fields(i)
		w.close('}')
	}
	w.close(']')
}
