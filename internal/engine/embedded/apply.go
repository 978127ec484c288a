package embedded

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
)

// Runner plans and applies configurations with providers from a [Pool]. Safe for concurrent
// use on different states.
type Runner struct {
	pool        *Pool
	parallelism int
	log         *slog.Logger
	// stopGrace is how long an apply's provider call, asked to stop when the operation ends,
	// is waited for before it is abandoned ([stopOnCancel]): engine.InterruptGrace.
	stopGrace time.Duration
}

// NewRunner returns a runner. parallelism bounds concurrent provider calls per operation
// (<= 0 means 10, Terraform's default); log receives addresses and actions only, never values.
func NewRunner(pool *Pool, parallelism int, log *slog.Logger) *Runner {
	if parallelism <= 0 {
		parallelism = 10
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{pool: pool, parallelism: parallelism, log: log, stopGrace: engine.InterruptGrace}
}

// MissingProvidersError lists providers the mirror does not have.
type MissingProvidersError struct {
	Sources []string
	Dir     string
}

func (e *MissingProvidersError) Error() string {
	return fmt.Sprintf("providers %v not in the provider mirror %s", e.Sources, e.Dir)
}

// Unwrap returns [ErrProviderNotFound].
func (e *MissingProvidersError) Unwrap() error { return ErrProviderNotFound }

// Plan plans cfg against prior (nil: no state). sources maps provider local names to source
// addresses (default hashicorp/NAME). With destroy, every object in prior is planned for
// deletion. secrets receives the text of sensitive values seen (may be nil).
func (r *Runner) Plan(ctx context.Context, cfg *Config, prior *State, sources map[string]string, destroy bool, secrets map[string]bool) (*Plan, error) {
	b := newBudget(ctx)
	cfg, ev, err := expandModules(cfg, destroy, b)
	if err != nil {
		return nil, err
	}
	sess := newSession(r.pool, cfg, sources, ev.funcs, stateKeys(prior))
	defer sess.close(ctx)
	if missing := sess.missing(ctx, prior); len(missing) > 0 {
		return nil, &MissingProvidersError{Sources: missing, Dir: r.pool.mirror.Dir}
	}
	// The tenant policy's file paths, with the providers' schemas, before any provider reads
	// (a data source, an import) or plans anything.
	if check := fileCheckFrom(ctx); check != nil && !destroy {
		if err := check(ctx, sessionSchemas{sess}); err != nil {
			return nil, err
		}
	}
	if secrets == nil {
		secrets = map[string]bool{}
	}
	p := &planner{r: r, cfg: cfg, prior: prior, sess: sess, ev: ev, secrets: secrets}
	return p.run(ctx, destroy)
}

// Persist saves a state snapshot (state v4 JSON, not retained by the caller) durably; Apply
// calls it after every change.
type Persist func(ctx context.Context, body []byte) error

// journal is where an apply records what it does: state snapshots and, before each create,
// the create's intent (docs/design/0021). [Runner.Apply] records no intents; the [Engine]
// keeps both in the state record.
type journal struct {
	// write stores, in one durable write, a state snapshot (nil: unchanged since the last
	// write), ends the intents of resolved (their results are in the snapshot, or the
	// provider answered that the create made nothing) and records the intents of added.
	write func(ctx context.Context, body []byte, resolved []string, added []state.Intent) error
	// intents is whether creates record intents (write then receives them).
	intents bool
	// admit, with intents, reports whether a snapshot before the final one may be stored
	// now (the namespace's artifact quota); one it refuses is held back as the pace holds
	// one back, the creates' intents covering it. Nil admits every snapshot; the final one
	// is always written.
	admit func(body []byte) bool
}

// applier carries out a plan.
type applier struct {
	r    *Runner
	cfg  *Config
	plan *Plan
	sess *session
	ev   *evalState
	jr   journal

	mu      sync.Mutex
	st      *State
	secrets map[string]bool
	// resolved are the addresses whose intents the next save ends (a.mu).
	resolved map[string]bool

	// saveMu orders the journal's writes. One write carries everything pending when it
	// starts: the state's changes, the resolved intents and the pending batch of new intents,
	// so the creates and saves that arrive while a write is in flight share the next one.
	saveMu  sync.Mutex
	saved   uint64       // version written
	ver     uint64       // version of st
	pending *intentBatch // intents not written yet (a.mu)
	// nextSnapshot is when a paced save may write the state again (saveMu): the last
	// snapshot's size at [snapshotRate] after its write.
	nextSnapshot time.Time
}

// snapshotRate is the pace, in bytes per second, of the state snapshots an apply journaled
// with create intents writes before its final one: a save within len(last snapshot) /
// snapshotRate of the previous snapshot writes only the pending intents, and the state's
// changes go out with a later save or the final one. A small state is still written after
// nearly every instance; a large one no longer once per instance (64 MiB, the largest state
// body, is written at most every 16 s). A result not written yet is covered by its create's
// intent (docs/design/0021), as Terraform's persist interval leaves a crash to the next
// refresh.
const snapshotRate = 4 << 20

// intentBatch is intents written together; written and err are guarded by applier.saveMu.
type intentBatch struct {
	intents []state.Intent
	written bool
	err     error
}

// Apply carries out plan on prior (the state the plan was made against), saving the state
// through persist after every resource instance (terraform_data instances with the next save),
// so that a failure keeps everything done before it. It returns the final state; on error the
// state returned (and persisted) holds every change that succeeded. cfg must be the
// configuration the plan was made from.
func (r *Runner) Apply(ctx context.Context, cfg *Config, plan *Plan, prior *State, sources map[string]string, persist Persist, secrets map[string]bool) (*State, error) {
	jr := journal{write: func(ctx context.Context, body []byte, _ []string, _ []state.Intent) error {
		if body == nil {
			return nil
		}
		return persist(ctx, body)
	}}
	return r.apply(ctx, cfg, plan, prior, sources, jr, secrets)
}

// apply is [Runner.Apply] recording through jr.
func (r *Runner) apply(ctx context.Context, cfg *Config, plan *Plan, prior *State, sources map[string]string, jr journal, secrets map[string]bool) (*State, error) {
	st := NewState()
	if prior != nil {
		b, err := prior.Marshal()
		if err != nil {
			return nil, err
		}
		if st, err = ParseState(b); err != nil {
			return nil, err
		}
	}
	if st.TerraformVersion == "" {
		// Keep the version a state already records: terraform refuses states that name a
		// newer version than its own, so writing ours could lock out the engine that made it.
		st.TerraformVersion = TerraformVersion
	}
	if secrets == nil {
		secrets = map[string]bool{}
	}
	b := newBudget(ctx)
	cfg, ev, err := expandModules(cfg, plan.Destroy, b)
	if err != nil {
		return nil, err
	}
	also := stateKeys(st)
	for _, c := range plan.Changes {
		also = append(also, c.ProviderKey)
	}
	sess := newSession(r.pool, cfg, sources, ev.funcs, also)
	defer sess.close(ctx)
	if len(plan.Moves) > 0 {
		moved, done := applyMoves(st, plan.Moves)
		if len(done) != len(plan.Moves) {
			return nil, fmt.Errorf("apply: the moves %v no longer match the state (the state changed since planning)", plan.Moves)
		}
		st = moved
	}
	a := &applier{r: r, cfg: cfg, plan: plan, sess: sess, ev: ev, jr: jr, st: st, secrets: secrets, resolved: map[string]bool{}}
	if len(plan.Moves) > 0 {
		a.ver++
	}
	err = a.run(ctx)
	if perr := a.write(context.WithoutCancel(ctx), true); perr != nil {
		err = errors.Join(err, perr)
	}
	return a.st, err
}

func (a *applier) run(ctx context.Context) error {
	byRes := map[string][]*Change{}
	var nodes []string
	for _, c := range a.plan.Changes {
		if _, ok := byRes[c.Res]; !ok {
			nodes = append(nodes, c.Res)
		}
		byRes[c.Res] = append(byRes[c.Res], c)
	}
	// Resources whose count or for_each expands to nothing still need a value.
	if !a.plan.Destroy {
		for _, rc := range a.cfg.Resources {
			if _, ok := byRes[rc.Address()]; !ok {
				nodes = append(nodes, rc.Address())
			}
		}
	}
	sort.Strings(nodes)
	deps := a.plan.Deps
	// Phase 1: deletions (and the destroy half of delete-then-create replacements),
	// dependents first.
	err := walk(ctx, nodes, reverseDeps(nodes, deps), a.r.parallelism, true, func(ctx context.Context, res string) error {
		for _, c := range byRes[res] {
			switch {
			case c.Action == Delete, c.Action == Replace && !c.CreateBeforeDestroy:
				if err := a.destroy(ctx, c, c.Deposed); err != nil {
					return err
				}
			case c.Action == Forget:
				a.removeInstance(c, c.Deposed)
				if err := a.save(ctx); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil || a.plan.Destroy {
		if err == nil {
			a.mu.Lock()
			a.st.Outputs = map[string]StateOutput{}
			a.ver++
			a.mu.Unlock()
		}
		return err
	}
	// Phase 2: creations, updates, reads, in dependency order.
	var deposed []*Change
	var depMu sync.Mutex
	err = walk(ctx, nodes, deps, a.r.parallelism, true, func(ctx context.Context, res string) error {
		rc := a.resourceConfig(res)
		if rc == nil {
			return nil
		}
		dk, err := a.applyResource(ctx, rc, byRes[res])
		depMu.Lock()
		deposed = append(deposed, dk...)
		depMu.Unlock()
		return err
	})
	if err != nil {
		return err
	}
	// Phase 3: the old objects of create-before-destroy replacements, dependents first.
	depRes := map[string][]*Change{}
	var depNodes []string
	for _, c := range deposed {
		if _, ok := depRes[c.Res]; !ok {
			depNodes = append(depNodes, c.Res)
		}
		depRes[c.Res] = append(depRes[c.Res], c)
	}
	err = walk(ctx, depNodes, reverseDeps(depNodes, deps), a.r.parallelism, true, func(ctx context.Context, res string) error {
		for _, c := range depRes[res] {
			if err := a.destroy(ctx, c, c.Deposed); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	outs := map[string]StateOutput{}
	for _, name := range sortedKeys(a.cfg.Outputs) {
		o := a.cfg.Outputs[name]
		v, marked, err := a.ev.output(name, o)
		if err != nil {
			return err
		}
		if !v.IsWhollyKnown() {
			return fmt.Errorf("output %s: value still unknown after apply", name)
		}
		vb, err := ctyjson.Marshal(v, v.Type())
		if err != nil {
			return fmt.Errorf("output %s: %w", name, err)
		}
		tb, err := ctyjson.MarshalType(v.Type())
		if err != nil {
			return fmt.Errorf("output %s: %w", name, err)
		}
		// An output showing a sensitive attribute's value is sensitive even when the
		// configuration does not say so (Terraform refuses such outputs; Lava hides them).
		outs[name] = StateOutput{Value: vb, Type: tb, Sensitive: o.Sensitive || marked || a.revealsSecret(vb)}
	}
	checks := a.ev.checks()
	settleChecks(checks, a.secrets, &a.mu)
	logChecks(a.r.log, "apply", checks)
	cr := checkResultsJSON(checks)
	a.mu.Lock()
	if !sameOutputs(a.st.Outputs, outs) {
		a.st.Outputs = outs
		a.ver++
	}
	if !jsonEqual(orNull(cr), orNull(a.st.CheckResults)) {
		a.st.CheckResults = cr
		a.ver++
	}
	a.mu.Unlock()
	return nil
}

func sameOutputs(a, b map[string]StateOutput) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || x.Sensitive != y.Sensitive || !jsonEqual(x.Value, y.Value) || !jsonEqual(x.Type, y.Type) {
			return false
		}
	}
	return true
}

func (a *applier) resourceConfig(addr string) *ResourceConfig {
	for _, rc := range a.cfg.Resources {
		if rc.Address() == addr {
			return rc
		}
	}
	return nil
}

// destroy deletes one object (the current one, or a deposed one when deposedKey is set).
func (a *applier) destroy(ctx context.Context, c *Change, deposedKey string) error {
	client, _, err := a.sess.provider(ctx, c.ProviderKey)
	if err != nil {
		return err
	}
	ps, err := client.Schema(ctx)
	if err != nil {
		return err
	}
	s, err := resourceSchema(ps, c.Type)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Addr, err)
	}
	null := cty.NullVal(s.Type())
	priv := c.PriorPrivate
	if ps.PlanDestroy {
		res, err := client.PlanResourceChange(ctx, c.Type, c.Prior, null, null, c.PriorPrivate)
		if err != nil {
			return a.fail(c, err)
		}
		priv = res.PlannedPrivate
	}
	a.r.log.Debug("apply", slog.String("resource", c.Addr), slog.String("action", "delete"))
	callCtx, done := stopOnCancel(ctx, client, a.r.stopGrace)
	newVal, _, err := client.ApplyResourceChange(callCtx, c.Type, c.Prior, null, null, priv)
	done()
	if err != nil {
		if newVal != cty.NilVal && newVal.IsNull() {
			a.removeInstance(c, deposedKey)
		}
		_ = a.save(ctx)
		return a.fail(c, err)
	}
	a.removeInstance(c, deposedKey)
	return a.save(ctx)
}

// fail wraps a provider error with the address and, when the process died, says so.
func (a *applier) fail(c *Change, err error) error {
	if a.sess.crashed(c.ProviderKey, err) {
		return &ProviderCrashedError{Provider: c.ProviderKey, Address: c.Addr, Err: err}
	}
	return fmt.Errorf("%s: %w", c.Addr, err)
}

// applyResource applies every non-delete change of one resource, sets its value for
// references, and returns create-before-destroy changes whose old object awaits deletion.
func (a *applier) applyResource(ctx context.Context, rc *ResourceConfig, changes []*Change) ([]*Change, error) {
	client, paddr, err := a.sess.provider(ctx, rc.ProviderKey)
	if err != nil {
		return nil, err
	}
	ps, err := client.Schema(ctx)
	if err != nil {
		return nil, err
	}
	var schema *Schema
	if rc.Mode == "data" {
		schema, err = dataSchema(ps, rc.Type)
	} else {
		schema, err = resourceSchema(ps, rc.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rc.Address(), err)
	}
	ty := schema.Type()
	exp, err := expand(rc, a.ev)
	if err != nil {
		return nil, err
	}
	byKey := map[string]*Change{}
	for _, c := range changes {
		if c.Deposed == "" {
			byKey[keyString(c.Key)] = c
		}
	}
	vals := map[string]cty.Value{}
	var deposed []*Change
	for _, key := range exp.keys {
		ks := keyString(key)
		c := byKey[ks]
		if c == nil {
			return deposed, fmt.Errorf("%s%s: not in the plan (the configuration changed since planning)", rc.Address(), ks)
		}
		config, marked, err := a.ev.decodeInstance(schema.Block, rc, exp.instance(key), c.Addr)
		if err != nil {
			return deposed, err
		}
		collectSecrets(config, marked, &a.mu, a.secrets)
		if rc.Mode == "data" {
			v := c.Planned
			if c.Action == Read || !v.IsWhollyKnown() {
				// Validated with the values now known, as Terraform core does before reading.
				if err := client.ValidateDataResourceConfig(ctx, rc.Type, config); err != nil {
					return deposed, a.fail(c, err)
				}
				a.r.log.Debug("apply", slog.String("resource", c.Addr), slog.String("action", "read"))
				if v, err = client.ReadDataSource(ctx, rc.Type, config); err != nil {
					return deposed, a.fail(c, err)
				}
				if err := a.ev.budget.provided(c.Addr+": data source result", v); err != nil {
					return deposed, err
				}
			}
			if err := a.setInstance(c, v, nil, schema, nil); err != nil {
				return deposed, err
			}
			vals[ks] = markSensitive(v, instanceSensitivePaths(schema, v, marked))
			continue
		}
		switch c.Action {
		case NoOp:
			if err := a.setInstance(c, c.Prior, c.PriorPrivate, schema, a.depsOf(rc)); err != nil {
				return deposed, err
			}
			vals[ks] = markSensitive(c.Prior, instanceSensitivePaths(schema, c.Prior, c.Marked))
			continue
		case Create, Update, Replace:
		default:
			return deposed, fmt.Errorf("%s: unexpected action %s", c.Addr, c.Action)
		}
		prior := c.Prior
		if c.Action != Update {
			prior = cty.NullVal(ty)
		}
		// Validate and plan again with the values now known, as Terraform core does before
		// applying: a value unknown at plan time is checked by the provider here, before
		// anything is created (and the verdict is remembered for the next plan).
		if err := a.sess.validate(ctx, client, paddr, rc.Type, config); err != nil {
			return deposed, a.fail(c, err)
		}
		cfg := applyIgnoreChanges(rc, prior, config)
		privIn := c.PriorPrivate
		if c.Action != Update {
			privIn = nil
		}
		res, err := client.PlanResourceChange(ctx, rc.Type, prior, proposedNew(schema.Block, prior, cfg), config, privIn)
		if err != nil {
			return deposed, a.fail(c, err)
		}
		if c.Action == Update {
			if rep := changedReplacePaths(res.RequiresReplace, prior, res.Planned); len(rep) > 0 {
				return deposed, fmt.Errorf("%s: provider produced an inconsistent final plan: replacement of %s required at apply, not planned", c.Addr, pathString(rep[0]))
			}
		}
		if c.Action == Replace && c.CreateBeforeDestroy {
			dk := newDeposedKey()
			a.depose(c, dk)
			cp := *c
			cp.Deposed = dk
			cp.Addr += " (deposed " + dk + ")"
			deposed = append(deposed, &cp)
		}
		_, builtin := client.(builtinClient)
		creating := c.Action != Update && a.jr.intents && !builtin
		if !builtin && !creating {
			// What it is updated (or, without intents, created) with may come from
			// terraform_data changes not saved yet (they go out with the next write): saved
			// first, as a create's intent saves them.
			if err := a.save(ctx); err != nil {
				return deposed, err
			}
		}
		if creating {
			// A create (or a replacement's create half: the old object is already gone from
			// state, or deposed) is recorded first, so a result lost with this process is
			// found again, or reported, by the next operation (docs/design/0021). Not the
			// built-in terraform_data: its objects exist only in the state, so making one
			// again creates nothing outside.
			if err := a.intend(ctx, a.intentFor(ctx, client, rc, c, res)); err != nil {
				return deposed, fmt.Errorf("%s: record the create intent: %w", c.Addr, err)
			}
		}
		a.r.log.Debug("apply", slog.String("resource", c.Addr), slog.String("action", string(c.Action)))
		callCtx, done := stopOnCancel(ctx, client, a.r.stopGrace)
		newVal, newPriv, aerr := client.ApplyResourceChange(callCtx, rc.Type, prior, res.Planned, config, res.PlannedPrivate)
		done()
		if aerr != nil {
			if newVal != cty.NilVal && !newVal.IsNull() && newVal.IsWhollyKnown() {
				// The object exists in some state: keep it, tainted if it was being created.
				_ = a.setInstanceStatus(c, newVal, newPriv, schema, a.depsOf(rc), c.Action != Update)
				a.resolve(creating, c.Addr)
			} else if c.Action == Update {
				_ = a.setInstance(c, c.Prior, c.PriorPrivate, schema, a.depsOf(rc))
			} else if newVal != cty.NilVal {
				// The provider answered that the create failed: nothing was made.
				a.resolve(creating, c.Addr)
			}
			_ = a.save(ctx)
			return deposed, a.fail(c, aerr)
		}
		if newVal.IsNull() || !newVal.IsWhollyKnown() {
			return deposed, fmt.Errorf("%s: provider returned an incomplete state after apply", c.Addr)
		}
		if err := a.setInstance(c, newVal, newPriv, schema, a.depsOf(rc)); err != nil {
			return deposed, err
		}
		a.resolve(creating, c.Addr)
		// A terraform_data object exists only in the state: it is saved with the next write
		// (the intent of a create, or the save before an update, that may depend on it; the
		// next save; the final one), not on its own; lost with this process, it is made again
		// by the next apply.
		if !builtin {
			if err := a.save(ctx); err != nil {
				return deposed, err
			}
		}
		vals[ks] = markSensitive(newVal, instanceSensitivePaths(schema, newVal, c.Marked))
		if len(rc.Postconditions) > 0 {
			in := exp.instance(key)
			in.self = newVal
			if err := a.ev.checkRules(rc.Postconditions, in, c.Addr+": postcondition"); err != nil {
				return deposed, err
			}
		}
	}
	a.ev.set(rc.Address(), exp.assemble(vals, ty))
	return deposed, nil
}

// depsOf returns the resource's transitive dependencies, as Terraform records them in state.
func (a *applier) depsOf(rc *ResourceConfig) []string {
	set := map[string]bool{}
	var visit func(string)
	visit = func(addr string) {
		for _, d := range a.plan.Deps[addr] {
			if !set[d] {
				set[d] = true
				visit(d)
			}
		}
	}
	visit(rc.Address())
	delete(set, rc.Address())
	// State records configuration addresses (module paths without instance keys), as tofu.
	out := map[string]bool{}
	for d := range set {
		out[configAddress(d)] = true
	}
	return setKeys(out)
}

func newDeposedKey() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// setInstance records an instance's new value in the working state.
func (a *applier) setInstance(c *Change, v cty.Value, priv []byte, schema *Schema, deps []string) error {
	return a.setInstanceStatus(c, v, priv, schema, deps, false)
}

func (a *applier) setInstanceStatus(c *Change, v cty.Value, priv []byte, schema *Schema, deps []string, tainted bool) error {
	attrs, err := marshalAttributes(v, schema.Type())
	if err != nil {
		return fmt.Errorf("%s: %w", c.Addr, err)
	}
	if c.Mode != "data" {
		schema.keepState(attrs, v)
	}
	paths := instanceSensitivePaths(schema, v, c.Marked)
	collectSecrets(v, paths, &a.mu, a.secrets)
	in := StateInstance{
		IndexKey: c.Key, SchemaVersion: schema.Version, Attributes: attrs, SensitiveAttributes: marshalPaths(paths),
		Private: priv, Dependencies: deps, CreateBeforeDestroy: c.CreateBeforeDestroy,
	}
	if tainted {
		in.Status = "tainted"
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.resource(c)
	replaced := false
	for i := range r.Instances {
		if r.Instances[i].Deposed == "" && keyString(normalizeKey(r.Instances[i].IndexKey)) == keyString(c.Key) {
			if sameInstance(r.Instances[i], in) {
				return nil
			}
			r.Instances[i] = in
			replaced = true
			break
		}
	}
	if !replaced {
		r.Instances = append(r.Instances, in)
		sort.SliceStable(r.Instances, func(i, j int) bool {
			return lessKey(normalizeKey(r.Instances[i].IndexKey), normalizeKey(r.Instances[j].IndexKey))
		})
	}
	a.ver++
	return nil
}

func lessKey(a, b instanceKey) bool {
	ai, aok := a.(int64)
	bi, bok := b.(int64)
	if aok && bok {
		return ai < bi
	}
	return keyString(a) < keyString(b)
}

// resource returns (creating) the working state's resource for a change; a.mu held.
func (a *applier) resource(c *Change) *StateResource {
	for i := range a.st.Resources {
		r := &a.st.Resources[i]
		if r.Module == c.Module && r.Mode == c.Mode && r.Type == c.Type && r.Name == c.Name {
			// OpenTofu and Terraform no longer write "each"; neither do we.
			r.Provider, r.Each = c.Provider, ""
			return r
		}
	}
	a.st.Resources = append(a.st.Resources, StateResource{Module: c.Module, Mode: c.Mode, Type: c.Type, Name: c.Name, Provider: c.Provider})
	return &a.st.Resources[len(a.st.Resources)-1]
}

// depose marks the current object of c as deposed under key dk.
func (a *applier) depose(c *Change, dk string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.resource(c)
	for i := range r.Instances {
		if r.Instances[i].Deposed == "" && keyString(normalizeKey(r.Instances[i].IndexKey)) == keyString(c.Key) {
			r.Instances[i].Deposed = dk
		}
	}
	a.ver++
}

// removeInstance drops an object from the working state (deposed one when dk is set), and
// the resource when it has no instances left.
func (a *applier) removeInstance(c *Change, dk string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.st.Resources {
		r := &a.st.Resources[i]
		if r.Module != c.Module || r.Mode != c.Mode || r.Type != c.Type || r.Name != c.Name {
			continue
		}
		kept := r.Instances[:0]
		for _, in := range r.Instances {
			if in.Deposed == dk && keyString(normalizeKey(in.IndexKey)) == keyString(c.Key) {
				continue
			}
			kept = append(kept, in)
		}
		r.Instances = kept
		if len(r.Instances) == 0 {
			a.st.Resources = append(a.st.Resources[:i], a.st.Resources[i+1:]...)
		}
		break
	}
	a.ver++
}

// save persists the working state if it changed since the last save, with the pending
// intents; with create intents, the state's changes wait while the snapshot pace
// ([snapshotRate]) holds them back. Concurrent callers queue; a caller finding its change
// already written returns at once.
func (a *applier) save(ctx context.Context) error { return a.write(ctx, false) }

// write is save; final writes the state's changes regardless of the pace (the apply's last
// save).
func (a *applier) write(ctx context.Context, final bool) error {
	a.saveMu.Lock()
	defer a.saveMu.Unlock()
	a.mu.Lock()
	batch := a.pending
	a.pending = nil
	changed := a.ver != a.saved
	if changed && !final && a.jr.intents && time.Now().Before(a.nextSnapshot) {
		// Paced: the intents of the creates whose results wait stay recorded until then.
		changed = false
	}
	if !changed && batch == nil {
		a.mu.Unlock()
		return nil
	}
	ver := a.saved
	var b []byte
	var err error
	var resolved []string
	if changed {
		a.st.Serial++
		b, err = a.st.Marshal()
		if err == nil && !final && a.jr.intents && a.jr.admit != nil && !a.jr.admit(b) {
			// Refused by the quota: held back as by the pace (and paced as if written, so
			// the state is not marshalled again at every instance).
			a.st.Serial--
			a.nextSnapshot = time.Now().Add(time.Duration(len(b)) * time.Second / snapshotRate)
			b = nil
		} else {
			ver = a.ver
			resolved = setKeys(a.resolved)
		}
	}
	if err == nil && b == nil && batch == nil {
		a.mu.Unlock()
		return nil
	}
	a.mu.Unlock()
	var added []state.Intent
	if batch != nil {
		added = batch.intents
	}
	if err == nil {
		err = a.jr.write(ctx, b, resolved, added)
	}
	if batch != nil {
		batch.err, batch.written = err, true
	}
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	a.mu.Lock()
	for _, addr := range resolved {
		delete(a.resolved, addr)
	}
	a.mu.Unlock()
	if b != nil {
		a.nextSnapshot = time.Now().Add(time.Duration(len(b)) * time.Second / snapshotRate)
	}
	a.saved = ver
	return nil
}

// resolve has the next save end the intent of addr (when one was recorded: recorded).
func (a *applier) resolve(recorded bool, addr string) {
	if !recorded {
		return
	}
	a.mu.Lock()
	a.resolved[addr] = true
	a.ver++
	a.mu.Unlock()
}

// intentFor is the intent of creating c: its address and, when the provider planned a wholly
// known identity of a type with an identity schema, that identity. Finding no identity is not
// an error: the intent then records the address alone.
func (a *applier) intentFor(ctx context.Context, client Client, rc *ResourceConfig, c *Change, res PlanResult) state.Intent {
	in := state.Intent{Address: c.Addr, Module: c.Module, Type: c.Type, Name: c.Name, IndexKey: c.Key, Provider: c.Provider,
		Dependencies: a.depsOf(rc)}
	if c.Action == Replace {
		// The stored body may still hold the replaced object at this address (a paced save
		// has not written its destroy or deposal yet): recovery must not take it for this one.
		a.mu.Lock()
		in.ReplacesAtSerial, in.CreateBeforeDestroy = max(a.st.Serial, 1), c.CreateBeforeDestroy
		a.mu.Unlock()
	}
	if res.PlannedIdentity.Empty() {
		return in
	}
	is, err := client.IdentitySchema(ctx, c.Type)
	if err != nil || is == nil || len(is.Attributes) == 0 {
		if err != nil {
			a.r.log.Debug("identity schema unavailable", slog.String("resource", c.Addr), slog.String("error", err.Error()))
		}
		return in
	}
	ty := is.ImpliedType()
	v, err := res.PlannedIdentity.Decode(ty)
	if err != nil || v.IsNull() || !v.IsWhollyKnown() {
		return in
	}
	b, err := ctyjson.Marshal(v, ty)
	if err != nil {
		return in
	}
	in.Identity, in.IdentityVersion = b, is.Version
	in.IdentitySensitive = a.revealsSecret(b)
	return in
}

// intend records in durably before its create, in the next write of the journal (with the
// state's changes and the other intents pending then).
func (a *applier) intend(ctx context.Context, in state.Intent) error {
	a.mu.Lock()
	b := a.pending
	if b == nil {
		b = &intentBatch{}
		a.pending = b
	}
	b.intents = append(b.intents, in)
	a.mu.Unlock()
	err := a.save(ctx)
	a.saveMu.Lock()
	written, berr := b.written, b.err
	a.saveMu.Unlock()
	if written {
		return berr
	}
	return err
}

// sameInstance reports whether two instance objects would be written identically.
func sameInstance(a, b StateInstance) bool {
	a.IndexKey, b.IndexKey = nil, nil
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	var x, y any
	if json.Unmarshal(ja, &x) != nil || json.Unmarshal(jb, &y) != nil {
		return false
	}
	ca, _ := json.Marshal(x)
	cb, _ := json.Marshal(y)
	return string(ca) == string(cb)
}

// revealsSecret reports whether rendered JSON contains a sensitive value seen in this apply.
func (a *applier) revealsSecret(b []byte) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for sec := range a.secrets {
		if len(sec) >= 3 && bytes.Contains(b, []byte(sec)) {
			return true
		}
	}
	return false
}

// stopOnCancel returns a context for an ApplyResourceChange call that is not cancelled with
// ctx: when ctx ends (cancelled, or at the operation's step timeout), the provider is asked to
// stop (StopProvider) instead, so that it returns what it has done and the state records it,
// as Terraform does. A call that has not returned grace after ctx ended (a provider that
// ignores StopProvider: a request to an endpoint that never answers) is abandoned: its context
// is cancelled and its answer lost, which a create's intent, recorded before it, covers (the
// next operation finds the object or reports it); the session then stops the process
// ([session.close]). Call done when the call returns.
func stopOnCancel(ctx context.Context, client Client, grace time.Duration) (context.Context, func()) {
	callCtx, abandon := context.WithCancel(context.WithoutCancel(ctx))
	finished := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-finished:
			return
		}
		giveUp := time.NewTimer(grace)
		defer giveUp.Stop()
		stopCtx, cancel := context.WithTimeout(callCtx, 10*time.Second)
		_ = client.Stop(stopCtx)
		cancel()
		select {
		case <-giveUp.C:
			abandon()
		case <-finished:
		}
	}()
	return callCtx, func() { close(finished); abandon() }
}

// orNull is b, or JSON null when b is empty.
func orNull(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

// expandModules returns the evaluation state of cfg under the budget b and, unless destroy (a
// destroy plans from state alone), cfg with its input variables set and its module calls
// flattened into one configuration (flatten). Errors: a variable's value or validation, a
// module call, an evaluation limit ([LimitError]).
func expandModules(cfg *Config, destroy bool, b *budget) (*Config, *evalState, error) {
	ev := newEvalState(cfg, b)
	if destroy {
		return cfg, ev, nil
	}
	if err := ev.setVariables(); err != nil {
		return nil, nil, err
	}
	flat, err := flatten(cfg, ev)
	if err != nil {
		return nil, nil, err
	}
	ev.cfg = flat
	return flat, ev, nil
}
