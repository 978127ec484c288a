package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
)

// EngineVersion is the embedded engine's version; it enters plan ids, so a new version never
// applies a plan an older one made.
const EngineVersion = "0.1.0"

// maxArtifactBytes bounds rendered JSON and plan artifacts read back from the store.
const maxArtifactBytes = 64 << 20

// Options configures an [Engine].
type Options struct {
	// Store keeps state (lava-state KV + the artifact store); required.
	Store *state.Store
	// Artifacts is the artifact store holding rendered JSON and plan artifacts; required.
	Artifacts state.Artifacts
	// ProviderDir is the provider mirror directory (OpenTofu filesystem-mirror layout).
	ProviderDir string
	// MaxWarm bounds idle provider processes kept warm (default 8).
	MaxWarm int
	// IdleTimeout stops provider processes idle for longer (0: keep them until evicted).
	IdleTimeout time.Duration
	// Parallelism bounds concurrent resource operations per plan or apply (default 10).
	Parallelism int
	// Logger receives resource addresses and actions, never values (default: discard).
	Logger *slog.Logger
	// Now is the clock (time.Now).
	Now func() time.Time
}

// Engine is the embedded engine: [engine.Engine] over in-process provider calls. Close it to
// stop the provider processes it keeps warm.
type Engine struct {
	opts   Options
	pool   *Pool
	runner *Runner
}

var _ engine.Engine = (*Engine)(nil)

// New returns an embedded engine.
func New(opts Options) *Engine {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	pool := NewPool(Mirror{Dir: opts.ProviderDir}, opts.MaxWarm)
	pool.SetIdleTimeout(opts.IdleTimeout)
	return &Engine{opts: opts, pool: pool, runner: NewRunner(pool, opts.Parallelism, opts.Logger)}
}

// Name returns "embedded".
func (e *Engine) Name() string { return "embedded" }

// Pool returns the engine's provider pool (for metrics and tests).
func (e *Engine) Pool() *Pool { return e.pool }

// Close shuts down every provider process.
func (e *Engine) Close() error { return e.pool.Close() }

func (e *Engine) readArtifact(ctx context.Context, digest string) ([]byte, error) {
	rc, err := e.opts.Artifacts.Get(ctx, digest)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxArtifactBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxArtifactBytes {
		return nil, fmt.Errorf("artifact %s exceeds %d bytes", digest, maxArtifactBytes)
	}
	return b, nil
}

// loadState returns the current state, nil when there is none.
func (e *Engine) loadState(ctx context.Context, key state.Key) (*State, error) {
	_, body, err := e.opts.Store.Body(ctx, key)
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseState(body)
}

func (e *Engine) loadConfig(ctx context.Context, digest string) (*Config, error) {
	b, err := e.readArtifact(ctx, digest)
	if err != nil {
		return nil, fmt.Errorf("read rendered json: %w", err)
	}
	return ParseConfig(b)
}

// redactedError keeps the cause for errors.Is/As while its text has secrets removed.
type redactedError struct {
	msg   string
	cause error
}

func (r *redactedError) Error() string { return r.msg }
func (r *redactedError) Unwrap() error { return r.cause }

// stepError wraps err for the engine package: typed errors pass through, others become a
// *engine.StepError with secrets redacted.
func stepError(step string, err error, redact []string, secrets map[string]bool) error {
	if err == nil {
		return nil
	}
	var missing *MissingProvidersError
	if errors.As(err, &missing) {
		return &engine.ProviderUnavailableError{Sources: missing.Sources, Where: missing.Dir}
	}
	if errors.Is(err, engine.ErrPlanStale) || errors.Is(err, engine.ErrLocked) {
		return err
	}
	r := engine.NewRedactor(redact...)
	for s := range secrets {
		r.Add(s)
	}
	return &engine.StepError{Step: step, Err: &redactedError{msg: r.Redact(err.Error()), cause: err}}
}

// Plan implements [engine.Engine].
func (e *Engine) Plan(ctx context.Context, req engine.PlanRequest) (*engine.PlanRecord, error) {
	secrets := map[string]bool{}
	rec, err := e.plan(withProviderLock(ctx, e.opts.Store, req.Key), req, secrets)
	return rec, stepError("plan", err, req.Redact, secrets)
}

func (e *Engine) plan(ctx context.Context, req engine.PlanRequest, secrets map[string]bool) (*engine.PlanRecord, error) {
	if err := req.Key.Validate(); err != nil {
		return nil, err
	}
	cfg, err := e.loadConfig(ctx, req.RenderedDigest)
	if err != nil {
		return nil, err
	}
	prior, err := e.loadState(ctx, req.Key)
	if err != nil {
		return nil, err
	}
	p, err := e.runner.Plan(ctx, cfg, prior, req.ProviderSources, false, secrets)
	if err != nil {
		return nil, err
	}
	var serial uint64
	var lineage string
	if prior != nil {
		serial, lineage = prior.Serial, prior.Lineage
	}
	body, err := marshalPlan(p, req.RenderedDigest, serial, lineage)
	if err != nil {
		return nil, err
	}
	digest, err := e.opts.Artifacts.Put(ctx, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("store plan artifact: %w", err)
	}
	tgt := req.Target
	tgt.Redact, tgt.Holder = nil, ""
	rec := &engine.PlanRecord{
		Target: tgt, BindingsDigest: req.BindingsDigest, Engine: e.Name(), EngineVersion: EngineVersion,
		ProviderVersions: p.ProviderVersions, StateSerial: serial, StateLineage: lineage, PlanDigest: digest,
		HasChanges: p.HasChanges(), CreatedAt: e.opts.Now().UTC(),
	}
	rec.Summary, rec.Resources = summarize(p)
	rec.PlanID = rec.ComputePlanID()
	return rec, nil
}

func summarize(p *Plan) (engine.Summary, []engine.ResourceAction) {
	var s engine.Summary
	out := []engine.ResourceAction{}
	for _, c := range p.Changes {
		switch c.Action {
		case Create:
			s.Add++
		case Update:
			s.Change++
		case Delete:
			s.Destroy++
		case Replace:
			s.Add++
			s.Destroy++
		case Forget:
			continue
		}
		if c.Mode == "data" && c.Action != Read {
			continue // read during planning, as Terraform does; not a change
		}
		out = append(out, engine.ResourceAction{Address: c.Addr, Type: c.Type, Mode: c.Mode, Action: engine.Action(c.Action)})
	}
	return s, out
}

// lockState takes the state lock for an operation; the returned func releases it.
func (e *Engine) lockState(ctx context.Context, key state.Key, holder, op string) (string, func(), error) {
	id := uuid.NewString()
	if holder == "" {
		holder = "lava-embedded"
	}
	if _, err := e.opts.Store.Lock(ctx, key, state.Lock{ID: id, Holder: holder, Operation: op, Who: holder, Version: TerraformVersion}); err != nil {
		return "", nil, err
	}
	return id, func() {
		if err := e.opts.Store.Unlock(context.WithoutCancel(ctx), key, id, false); err != nil {
			e.opts.Logger.Warn("state unlock failed", slog.String("resource", key.String()), slog.String("error", err.Error()))
		}
	}, nil
}

func (e *Engine) persister(key state.Key, lockID string, last *state.Record) Persist {
	return func(ctx context.Context, st *State) error {
		b, err := st.Marshal()
		if err != nil {
			return err
		}
		rec, err := e.opts.Store.Put(ctx, key, b, lockID)
		if err != nil {
			return err
		}
		*last = rec
		return nil
	}
}

// Apply implements [engine.Engine].
func (e *Engine) Apply(ctx context.Context, req engine.ApplyRequest) (*engine.ApplyResult, error) {
	secrets := map[string]bool{}
	lockKey := state.Key{}
	if req.Plan != nil {
		lockKey = req.Plan.Target.Key
	}
	res, err := e.apply(withProviderLock(ctx, e.opts.Store, lockKey), req, secrets)
	return res, stepError("apply", err, req.Redact, secrets)
}

func (e *Engine) apply(ctx context.Context, req engine.ApplyRequest, secrets map[string]bool) (*engine.ApplyResult, error) {
	rec := req.Plan
	if rec == nil {
		return nil, errors.New("apply: no plan")
	}
	key := rec.Target.Key
	lockID, unlock, err := e.lockState(ctx, key, req.Holder, "OperationTypeApply")
	if err != nil {
		return nil, err
	}
	defer unlock()
	prior, err := e.loadState(ctx, key)
	if err != nil {
		return nil, err
	}
	var serial uint64
	var lineage string
	if prior != nil {
		serial, lineage = prior.Serial, prior.Lineage
	}
	if serial != rec.StateSerial || lineage != rec.StateLineage {
		return nil, &engine.PlanStaleError{PlanID: rec.PlanID, PlannedSerial: rec.StateSerial, CurrentSerial: serial,
			PlannedLineage: rec.StateLineage, CurrentLineage: lineage}
	}
	body, err := e.readArtifact(ctx, rec.PlanDigest)
	if err != nil {
		return nil, fmt.Errorf("read plan artifact: %w", err)
	}
	art, plan, err := unmarshalPlan(body)
	if err != nil {
		return nil, err
	}
	if art.StateSerial != serial || art.StateLineage != lineage {
		return nil, &engine.PlanStaleError{PlanID: rec.PlanID, PlannedSerial: art.StateSerial, CurrentSerial: serial,
			PlannedLineage: art.StateLineage, CurrentLineage: lineage}
	}
	cfg, err := e.loadConfig(ctx, art.RenderedDigest)
	if err != nil {
		return nil, err
	}
	var last state.Record
	st, err := e.runner.Apply(ctx, cfg, plan, prior, rec.Target.ProviderSources, e.persister(key, lockID, &last), secrets)
	if err != nil {
		return nil, err
	}
	res := &engine.ApplyResult{PlanID: rec.PlanID, StateSerial: st.Serial, StateLineage: st.Lineage, Summary: rec.Summary}
	if last.Digest != "" {
		res.StateDigest = last.Digest
	} else if r, gerr := e.opts.Store.Get(ctx, key); gerr == nil {
		res.StateDigest = r.Digest
	}
	b, err := st.Marshal()
	if err != nil {
		return nil, err
	}
	if res.Outputs, err = engine.OutputsFromState(b); err != nil {
		return nil, err
	}
	return res, nil
}

// Destroy implements [engine.Engine].
func (e *Engine) Destroy(ctx context.Context, req engine.DestroyRequest) (*engine.DestroyResult, error) {
	secrets := map[string]bool{}
	res, err := e.destroy(withProviderLock(ctx, e.opts.Store, req.Key), req, secrets)
	return res, stepError("destroy", err, req.Redact, secrets)
}

func (e *Engine) destroy(ctx context.Context, req engine.DestroyRequest, secrets map[string]bool) (*engine.DestroyResult, error) {
	key := req.Key
	if err := key.Validate(); err != nil {
		return nil, err
	}
	lockID, unlock, err := e.lockState(ctx, key, req.Holder, "OperationTypeApply")
	if err != nil {
		return nil, err
	}
	defer unlock()
	prior, err := e.loadState(ctx, key)
	if err != nil {
		return nil, err
	}
	if prior == nil {
		return &engine.DestroyResult{}, nil
	}
	cfg := &Config{Providers: map[string]map[string]any{}, Locals: map[string]any{}, Outputs: map[string]OutputConfig{}}
	if req.RenderedDigest != "" {
		// The configuration supplies provider settings; its resources are not planned.
		if c, err := e.loadConfig(ctx, req.RenderedDigest); err == nil {
			cfg.Providers = c.Providers
		}
	}
	plan, err := e.runner.Plan(ctx, cfg, prior, req.ProviderSources, true, secrets)
	if err != nil {
		return nil, err
	}
	var last state.Record
	st, err := e.runner.Apply(ctx, cfg, plan, prior, req.ProviderSources, e.persister(key, lockID, &last), secrets)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, c := range plan.Changes {
		if c.Action == Delete {
			n++
		}
	}
	return &engine.DestroyResult{Destroyed: n, StateSerial: st.Serial, StateLineage: st.Lineage}, nil
}

// Outputs implements [engine.Engine].
func (e *Engine) Outputs(ctx context.Context, key state.Key) (*engine.Outputs, error) {
	_, body, err := e.opts.Store.Body(ctx, key)
	if err != nil {
		return nil, err
	}
	return engine.OutputsFromState(body)
}
