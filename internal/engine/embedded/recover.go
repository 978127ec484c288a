package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"

	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
)

// recovery is what [Runner.recoverIntents] found.
type recovery struct {
	// State is the state with the recovered objects added (a copy); nil when none was.
	State *State
	// Resolved are the addresses whose intents are settled: recovered, found not to exist, or
	// already in the state.
	Resolved []string
	// Interrupted are the addresses whose objects can be neither found nor ruled out.
	Interrupted []string
}

// recoverIntents settles the create intents a dead apply left (docs/design/0021) against st
// (nil: no state). An intent whose address has an object in st is settled already. One with a
// wholly known identity, of a provider whose identity schema for the type has the intent's
// version, is imported by identity (ImportResourceState) and read (ReadResource): an object
// that exists is added to the state (logged at WARN), one the provider reports gone settles
// the intent. Every other intent is interrupted: its object may exist and only an operator can
// tell. cfg supplies the provider configurations (as for a plan of it; destroy: cfg is used as
// given). Errors: a provider that fails to start, import or read (the intents stay).
func (r *Runner) recoverIntents(ctx context.Context, cfg *Config, st *State, intents []state.Intent, sources map[string]string, destroy bool) (recovery, error) {
	var out recovery
	b := newBudget(ctx)
	cfg, ev, err := expandModules(cfg, destroy, b)
	if err != nil {
		return out, err
	}
	also := stateKeys(st)
	for _, in := range intents {
		also = append(also, stateProviderKey(in.Provider))
	}
	sess := newSession(r.pool, cfg, sources, ev.funcs, also)
	defer sess.close(ctx)
	work := st
	for _, in := range intents {
		if hasObject(work, in) {
			if in.ReplacesAtSerial == 0 || st.Serial > in.ReplacesAtSerial {
				out.Resolved = append(out.Resolved, in.Address)
				continue
			}
			// The object there is the one this create replaces, saved before its destroy
			// (or deposal) was: it is gone (or deposed) now, and the create's own object is
			// looked for as any other's.
			if work == st {
				if work, err = copyState(st); err != nil {
					return out, err
				}
			}
			replaced(work, in)
			r.log.Warn("the state still held the object an interrupted replacement destroyed or deposed; corrected",
				slog.String("resource", in.Address), slog.Bool("create_before_destroy", in.CreateBeforeDestroy))
		}
		if len(in.Identity) == 0 {
			out.Interrupted = append(out.Interrupted, in.Address)
			continue
		}
		obj, found, ok, err := r.findByIdentity(ctx, sess, in)
		if err != nil {
			return out, fmt.Errorf("%s: find the object of an interrupted create by its identity: %w", in.Address, err)
		}
		switch {
		case !ok:
			out.Interrupted = append(out.Interrupted, in.Address)
		case !found:
			r.log.Info("interrupted create made nothing: the provider finds no object with its identity", slog.String("resource", in.Address))
			out.Resolved = append(out.Resolved, in.Address)
		default:
			if work == st {
				if work, err = copyState(st); err != nil {
					return out, err
				}
			}
			addInstance(work, in, obj)
			r.log.Warn("recovered the object of an interrupted create by its identity; it is in the state now", slog.String("resource", in.Address))
			out.Resolved = append(out.Resolved, in.Address)
		}
	}
	if work != st {
		out.State = work
	}
	return out, nil
}

// replaced takes the current object at the intent's address out of st: deposed (under a new
// deposed key, destroyed by the next apply) when the replacement creates before it destroys,
// else removed (its destroy ran before the intent was recorded).
func replaced(st *State, in state.Intent) {
	key := keyString(normalizeKey(in.IndexKey))
	for i := range st.Resources {
		r := &st.Resources[i]
		if r.Mode != "managed" || r.Module != in.Module || r.Type != in.Type || r.Name != in.Name {
			continue
		}
		kept := r.Instances[:0]
		for _, o := range r.Instances {
			if o.Deposed == "" && keyString(normalizeKey(o.IndexKey)) == key {
				if !in.CreateBeforeDestroy {
					continue
				}
				o.Deposed = newDeposedKey()
			}
			kept = append(kept, o)
		}
		r.Instances = kept
	}
	st.Resources = slices.DeleteFunc(st.Resources, func(r StateResource) bool { return len(r.Instances) == 0 })
}

// hasObject reports whether st holds a current (not deposed) object at the intent's address.
func hasObject(st *State, in state.Intent) bool {
	if st == nil {
		return false
	}
	key := keyString(normalizeKey(in.IndexKey))
	for _, r := range st.Resources {
		if r.Mode != "managed" || r.Module != in.Module || r.Type != in.Type || r.Name != in.Name {
			continue
		}
		for _, o := range r.Instances {
			if o.Deposed == "" && keyString(normalizeKey(o.IndexKey)) == key {
				return true
			}
		}
	}
	return false
}

// foundObject is an object found by identity, as state records it.
type foundObject struct {
	schemaVersion int64
	attrs         []byte
	sensitive     []byte
	private       []byte
}

// findByIdentity imports the intent's object by its identity and reads it. ok is false when the
// provider cannot look it up (no identity schema for the type now, or one of another version);
// found is false when the provider reports no such object.
func (r *Runner) findByIdentity(ctx context.Context, sess *session, in state.Intent) (obj foundObject, found, ok bool, err error) {
	client, _, err := sess.provider(ctx, stateProviderKey(in.Provider))
	if err != nil {
		return obj, false, false, err
	}
	is, err := client.IdentitySchema(ctx, in.Type)
	if err != nil {
		return obj, false, false, err
	}
	if is == nil || is.Version != in.IdentityVersion {
		return obj, false, false, nil
	}
	id, err := ctyjson.Unmarshal(in.Identity, is.ImpliedType())
	if err != nil {
		// The recorded identity no longer fits the schema: the provider cannot use it.
		return obj, false, false, nil
	}
	stub, priv, err := client.ImportResourceIdentity(ctx, in.Type, id)
	if err != nil {
		return obj, false, false, err
	}
	v, priv, err := client.ReadResourceIdentity(ctx, in.Type, stub, priv, id)
	if err != nil {
		return obj, false, false, err
	}
	if v.IsNull() {
		return obj, false, true, nil
	}
	ps, err := client.Schema(ctx)
	if err != nil {
		return obj, false, false, err
	}
	s, err := resourceSchema(ps, in.Type)
	if err != nil {
		return obj, false, false, err
	}
	if !v.IsWhollyKnown() {
		return obj, false, false, fmt.Errorf("the provider read an incomplete object")
	}
	attrs, err := marshalAttributes(v, s.Type())
	if err != nil {
		return obj, false, false, err
	}
	return foundObject{schemaVersion: s.Version, attrs: attrs, sensitive: marshalPaths(s.Block.SensitivePaths(v)), private: priv}, true, true, nil
}

// addInstance adds the intent's object to st (which holds none at its address).
func addInstance(st *State, in state.Intent, obj foundObject) {
	inst := StateInstance{IndexKey: normalizeKey(in.IndexKey), SchemaVersion: obj.schemaVersion, Attributes: obj.attrs,
		SensitiveAttributes: obj.sensitive, Private: obj.private, Dependencies: in.Dependencies}
	for i := range st.Resources {
		r := &st.Resources[i]
		if r.Mode == "managed" && r.Module == in.Module && r.Type == in.Type && r.Name == in.Name {
			r.Instances = append(r.Instances, inst)
			sort.SliceStable(r.Instances, func(a, b int) bool {
				return lessKey(normalizeKey(r.Instances[a].IndexKey), normalizeKey(r.Instances[b].IndexKey))
			})
			return
		}
	}
	st.Resources = append(st.Resources, StateResource{Module: in.Module, Mode: "managed", Type: in.Type, Name: in.Name,
		Provider: in.Provider, Instances: []StateInstance{inst}})
}

// copyState returns a deep copy of st (a new empty state when st is nil).
func copyState(st *State) (*State, error) {
	if st == nil {
		s := NewState()
		return s, nil
	}
	b, err := st.Marshal()
	if err != nil {
		return nil, err
	}
	return ParseState(b)
}

// interruptedError is the engine error of intents recovery could not settle.
func interruptedError(key state.Key, addrs []string) error {
	return &engine.CreateInterruptedError{Key: key.String(), Addresses: addrs}
}
