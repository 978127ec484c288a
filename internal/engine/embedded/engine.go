package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/hcl/v2"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/providers"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/bus"
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
	// ProviderDir is the provider mirror directory (OpenTofu filesystem-mirror layout), the
	// offline path: a provider found here is never downloaded.
	ProviderDir string
	// Installer installs the providers ProviderDir lacks through a registry or network
	// mirror into its shared cache (nil: ProviderDir only). docs/embedded-engine.md,
	// "Provider installation".
	Installer *providers.Installer
	// MaxWarm bounds idle provider processes kept warm (default 8).
	MaxWarm int
	// IdleTimeout stops provider processes idle for longer (0: keep them until evicted).
	IdleTimeout time.Duration
	// MaxProcesses bounds the provider processes running at once across every operation,
	// leased or warm (default [DefaultMaxProcesses]): an operation waits for its share
	// before its first process starts, and one that may use more provider configurations
	// than the whole budget fails ([ProcessBudget]). Ignored when Processes is set.
	MaxProcesses int
	// Processes, when not nil, is a budget this engine shares with others of the process
	// (lava up's applier and drift scanner); nil: one of MaxProcesses of its own.
	Processes *ProcessBudget
	// Parallelism bounds concurrent resource operations per plan or apply (default 10).
	Parallelism int
	// Logger receives resource addresses and actions, never values (default: discard).
	Logger *slog.Logger
	// Now is the clock (time.Now).
	Now func() time.Time
	// FileAccess holds every plan's and drift scan's provider path attributes and import ids
	// to the tenant policy's file roots, with the providers' schemas, before any provider
	// touches a file (docs/design/0022-file-access-from-schemas.md); nil: no such check.
	FileAccess *engine.FileAccess
	// ProviderHost, when not nil, starts every provider process (runner.Host: in a runner
	// process of the object's namespace and identity, under its own user and sandbox)
	// instead of the engine starting it as its own child; plans and applies are the same.
	// docs/design/0038-provider-runner.md.
	ProviderHost ProviderHost
	// ArtifactQuota is charged with each plan artifact and review body before it is stored,
	// against the resource's namespace; a plan past it fails with the
	// *bus.QuotaExceededError (nil: no quota).
	ArtifactQuota *bus.ArtifactQuota
	// Timeouts bound each operation: Plan a plan (refresh and data source reads included) and
	// a drift scan, Apply an apply, Destroy a destroy (zero fields: engine.Timeouts'
	// defaults; Init and Show are the CLI engines'). Past it the operation fails with a
	// *engine.StepTimeoutError ([engine.ErrStepTimeout]); an apply or destroy stops as a
	// cancelled one does ([stopOnCancel]).
	Timeouts engine.Timeouts
}

// Engine is the embedded engine: [engine.Engine] over in-process provider calls. Close it to
// stop the provider processes it keeps warm.
type Engine struct {
	opts   Options
	pool   *Pool
	runner *Runner

	// configs caches parsed configurations by their artifact digest (content addressed, so
	// an entry never goes stale); at most maxConfigs, cleared when full.
	cfgMu   sync.Mutex
	configs map[string]*Config
	// bodies is the last state body this engine wrote or read per state key, with its
	// digest: a plan reads only the state record when the digest still matches.
	bodies map[state.Key]cachedBody
	plans  map[string]cachedPlan
}

// cachedPlan is a plan this engine made, by its artifact digest (content addressed: the
// artifact decodes to the same plan), so an apply in the same process skips reading it back.
type cachedPlan struct {
	art  *planArtifact
	plan *Plan
}

const maxPlans = 64

// loadPlan returns the plan of an artifact digest: from the cache, else read and decoded.
func (e *Engine) loadPlan(ctx context.Context, digest string) (*planArtifact, *Plan, error) {
	e.cfgMu.Lock()
	c, ok := e.plans[digest]
	delete(e.plans, digest)
	e.cfgMu.Unlock()
	if ok {
		return c.art, c.plan, nil
	}
	body, err := e.readArtifact(ctx, digest)
	if err != nil {
		return nil, nil, fmt.Errorf("read plan artifact: %w", err)
	}
	return unmarshalPlan(body)
}

type cachedBody struct {
	digest string
	body   []byte
}

// maxCachedBody bounds the state bodies kept (bytes each); maxBodies the keys.
const (
	maxCachedBody = 1 << 20
	maxBodies     = 256
)

func (e *Engine) cacheBody(key state.Key, digest string, body []byte) {
	if len(body) > maxCachedBody || digest == "" {
		return
	}
	e.cfgMu.Lock()
	defer e.cfgMu.Unlock()
	if e.bodies == nil || len(e.bodies) >= maxBodies {
		e.bodies = map[state.Key]cachedBody{}
	}
	e.bodies[key] = cachedBody{digest: digest, body: body}
}

const maxConfigs = 64

var _ engine.Engine = (*Engine)(nil)

// New returns an embedded engine.
func New(opts Options) *Engine {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.Timeouts = opts.Timeouts.WithDefaults()
	pool := NewPool(Mirror{Dir: opts.ProviderDir}, opts.Installer, opts.MaxWarm)
	pool.SetIdleTimeout(opts.IdleTimeout)
	procs := opts.Processes
	if procs == nil {
		procs = NewProcessBudget(opts.MaxProcesses, opts.Logger)
	}
	pool.SetBudget(procs)
	if opts.ProviderHost != nil {
		pool.SetHost(opts.ProviderHost)
	}
	return &Engine{opts: opts, pool: pool, runner: NewRunner(pool, opts.Parallelism, opts.Logger)}
}

// bounded runs op (an operation of step, "plan", "apply", "destroy" or "drift") under the
// step's timeout d. When d ends op, its error (already redacted: [stepError]) becomes a
// *engine.StepError of step wrapping a *engine.StepTimeoutError that carries it; an error
// of ctx's own end, or of op alone, is returned as it is, and so is a success. The timeout
// cancels op's context (bus.CancelAfter) rather than giving it a deadline: under a deadline,
// nats.go's jetstream waits for a lost reply until the deadline instead of its 5 s request
// timeout, so a state or artifact read sent as a NATS server died held the plan for the
// whole step timeout.
func bounded[T any](ctx context.Context, step string, d time.Duration, op func(context.Context) (T, error)) (T, error) {
	sctx, cancel := bus.CancelAfter(ctx, d)
	defer cancel()
	res, err := op(sctx)
	if err == nil || ctx.Err() != nil || !errors.Is(context.Cause(sctx), context.DeadlineExceeded) {
		return res, err
	}
	inner := err
	if se, ok := err.(*engine.StepError); ok {
		inner = se.Err
	}
	return res, &engine.StepError{Step: step, Err: &engine.StepTimeoutError{Engine: "embedded", Step: step, After: d, Err: inner}}
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
	st, _, err := e.loadStateRecord(ctx, key)
	return st, err
}

// loadStateRecord returns the current state and the digest of its body; nil and "" when
// there is none.
func (e *Engine) loadStateRecord(ctx context.Context, key state.Key) (*State, string, error) {
	st, digest, _, err := e.loadStateIntents(ctx, key)
	return st, digest, err
}

// loadStateIntents is [Engine.loadStateRecord] that also returns the record's create intents
// (state.Record.Intents; there may be intents and no state).
func (e *Engine) loadStateIntents(ctx context.Context, key state.Key) (*State, string, []state.Intent, error) {
	st, digest, rec, err := e.loadStateBody(ctx, key)
	return st, digest, rec.Intents, err
}

// loadStateBody returns the state, its digest and the record read (zero when none).
func (e *Engine) loadStateBody(ctx context.Context, key state.Key) (*State, string, state.Record, error) {
	rec, err := e.opts.Store.Get(ctx, key)
	if errors.Is(err, state.ErrNotFound) {
		return nil, "", state.Record{}, nil
	}
	if err != nil {
		return nil, "", state.Record{}, err
	}
	if !rec.HasState() {
		return nil, "", rec, nil
	}
	e.cfgMu.Lock()
	c, ok := e.bodies[key]
	e.cfgMu.Unlock()
	if ok && c.digest == rec.Digest {
		st, err := ParseState(c.body)
		return st, rec.Digest, rec, err
	}
	rec, body, err := e.opts.Store.Body(ctx, key)
	if errors.Is(err, state.ErrNotFound) {
		return nil, "", rec, nil
	}
	if err != nil {
		return nil, "", state.Record{}, err
	}
	// A body another engine wrote (tofu writes a number in full), or one pushed, is checked
	// once, before it is cached: the cache holds only bodies checked or written here.
	if err := checkStateNumbers(body); err != nil {
		return nil, "", state.Record{}, fmt.Errorf("state %s: %w", key, err)
	}
	e.cacheBody(key, rec.Digest, body)
	st, err := ParseState(body)
	return st, rec.Digest, rec, err
}

// recover settles the create intents in key's record (docs/design/0021) before an operation
// plans: objects found by their identity are saved into the state, intents found to have made
// nothing are dropped, all in one write under lockID (the state lock the caller holds). The
// error is a *engine.CreateInterruptedError when intents remain that only an operator can
// settle; other errors leave every intent in place. cfg gives the provider configurations
// (destroy: as given, without evaluating variables).
func (e *Engine) recover(ctx context.Context, key state.Key, lockID string, cfg *Config, sources map[string]string, destroy bool) error {
	st, _, intents, err := e.loadStateIntents(ctx, key)
	if err != nil || len(intents) == 0 {
		return err
	}
	found, err := e.runner.recoverIntents(ctx, cfg, st, intents, sources, destroy)
	if err != nil {
		return err
	}
	if found.State != nil {
		found.State.Serial++
		body, err := found.State.Marshal()
		if err != nil {
			return err
		}
		err = retrySave(ctx, e.opts.Logger.With(slog.String("resource", key.String())), func() error {
			rec, err := e.opts.Store.PutResolving(ctx, key, body, lockID, found.Resolved)
			if err == nil {
				e.cacheBody(key, rec.Digest, body)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("save the recovered objects: %w", err)
		}
	} else if len(found.Resolved) > 0 {
		if _, err := e.opts.Store.ResolveIntents(ctx, key, lockID, found.Resolved); err != nil {
			return fmt.Errorf("drop settled create intents: %w", err)
		}
	}
	if len(found.Interrupted) > 0 {
		return interruptedError(key, found.Interrupted)
	}
	return nil
}

// recoverUnlocked is [Engine.recover] for a plan, which holds no state lock: it takes the lock
// only when the record has intents, so a plan without them costs nothing more.
func (e *Engine) recoverUnlocked(ctx context.Context, key state.Key, intents []state.Intent, holder string, cfg *Config, sources map[string]string) error {
	if len(intents) == 0 {
		return nil
	}
	lockID, unlock, err := e.lockState(ctx, key, holder, "OperationTypePlan")
	if err != nil {
		return err
	}
	defer unlock()
	return e.recover(ctx, key, lockID, cfg, sources, false)
}

// pinnedConfig is [Engine.loadConfig] (of rendered when not nil: a speculative plan's JSON,
// which is neither read from the artifact store nor cached) with the architecture's version constraints (a target's
// ProviderConstraints) added to the configuration's required_providers: both must hold, as
// for the tofu engine (engine.Requirements). The cached configuration is not changed.
func (e *Engine) pinnedConfig(ctx context.Context, digest string, rendered []byte, pins map[string]string) (*Config, error) {
	cfg, err := e.loadConfig(ctx, digest, rendered)
	if err != nil || len(pins) == 0 {
		return cfg, err
	}
	c := *cfg
	c.Requirements = maps.Clone(cfg.Requirements)
	if c.Requirements == nil {
		c.Requirements = map[string]ProviderRequirement{}
	}
	for name, pin := range pins {
		if _, err := providers.ParseConstraint(pin); err != nil {
			return nil, fmt.Errorf("provider %s: version constraint %q: %w", name, pin, err)
		}
		req := c.Requirements[name]
		req.Version = engine.AndConstraints(req.Version, pin)
		c.Requirements[name] = req
	}
	return &c, nil
}

func (e *Engine) loadConfig(ctx context.Context, digest string, rendered []byte) (*Config, error) {
	if rendered != nil { // a speculative plan's JSON: parsed for this plan only, never kept
		cfg, err := ParseConfig(rendered)
		if err != nil {
			return nil, err
		}
		cfg.doc = rendered
		return cfg, nil
	}
	e.cfgMu.Lock()
	cfg, ok := e.configs[digest]
	e.cfgMu.Unlock()
	if ok {
		return cfg, nil
	}
	b, err := e.readArtifact(ctx, digest)
	if err != nil {
		return nil, fmt.Errorf("read rendered json: %w", err)
	}
	if cfg, err = ParseConfig(b); err != nil {
		return nil, err
	}
	cfg.doc = b
	e.cfgMu.Lock()
	if e.configs == nil || len(e.configs) >= maxConfigs {
		e.configs = map[string]*Config{}
	}
	e.configs[digest] = cfg
	e.cfgMu.Unlock()
	return cfg, nil
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
	if errors.Is(err, engine.ErrPlanStale) || errors.Is(err, engine.ErrLocked) || errors.Is(err, engine.ErrCreateInterrupted) {
		return err
	}
	if q := (*bus.QuotaExceededError)(nil); errors.As(err, &q) {
		return q // names only the namespace and sizes
	}
	vals := operationSecrets(redact, secrets)
	if big := engine.CheckSecretBytes(vals); big != nil {
		// No redactor is built over them: the message is not shown.
		return &engine.StepError{Step: step, Err: &redactedError{msg: big.Error() + "; the " + step + " error is not shown", cause: errors.Join(big, err)}}
	}
	return &engine.StepError{Step: step, Err: &redactedError{msg: engine.NewRedactor(vals...).Redact(err.Error()), cause: err}}
}

// operationSecrets are the distinct values an operation's messages are redacted of: the
// request's (Secret bindings, credentials) and the sensitive values its configuration holds
// (collected while it planned or applied; a Secret binding's rendered sensitive() value is
// the same string, counted once). [engine.CheckSecretBytes] bounds them before a redactor is
// built over them: it costs hundreds of bytes per byte (a 15 MB sensitive() value, 7.8 GB).
func operationSecrets(redact []string, secrets map[string]bool) []string {
	all := maps.Clone(secrets)
	if all == nil {
		all = map[string]bool{}
	}
	for _, v := range redact {
		all[v] = true
	}
	return setKeys(all)
}

// Plan implements [engine.Engine], bounded by Options.Timeouts.Plan.
func (e *Engine) Plan(ctx context.Context, req engine.PlanRequest) (*engine.PlanRecord, error) {
	return bounded(ctx, "plan", e.opts.Timeouts.Plan, func(ctx context.Context) (*engine.PlanRecord, error) {
		secrets := map[string]bool{}
		rec, err := e.plan(withCredentials(withProviderLock(ctx, e.opts.Store, req.Key, req.Speculative), req.Credentials), req, secrets)
		return rec, stepError("plan", err, req.Redact, secrets)
	})
}

// storePlan puts a plan's artifact body into the artifact store and keeps the plan p for its
// apply, returning the artifact digest; a speculative plan is never applied, so it is neither
// stored nor kept (only its digest is computed: previews would otherwise fill the store and
// the cache of plans).
func (e *Engine) storePlan(ctx context.Context, req engine.PlanRequest, body []byte, p *Plan, serial uint64, lineage string) (string, error) {
	if req.Speculative {
		return bus.Digest(body), nil
	}
	if err := e.opts.ArtifactQuota.Charge(req.Key.Namespace, bus.Digest(body), int64(len(body))); err != nil {
		return "", err
	}
	digest, err := e.opts.Artifacts.PutBytes(ctx, body)
	if err != nil {
		return "", fmt.Errorf("store plan artifact: %w", err)
	}
	e.cfgMu.Lock()
	if e.plans == nil || len(e.plans) >= maxPlans {
		e.plans = map[string]cachedPlan{}
	}
	e.plans[digest] = cachedPlan{art: &planArtifact{RenderedDigest: req.RenderedDigest, StateSerial: serial, StateLineage: lineage}, plan: p}
	e.cfgMu.Unlock()
	return digest, nil
}

func (e *Engine) plan(ctx context.Context, req engine.PlanRequest, secrets map[string]bool) (*engine.PlanRecord, error) {
	if err := req.Key.Validate(); err != nil {
		return nil, err
	}
	cfg, err := e.pinnedConfig(ctx, req.RenderedDigest, req.Rendered, req.ProviderConstraints)
	if err != nil {
		return nil, err
	}
	// Each provider configuration is a provider process held for the whole operation: a
	// plan or scan of too many fails before any starts (apply and destroy follow a plan).
	if err := engine.CheckProviderConfigurations(cfg.doc); err != nil {
		return nil, err
	}
	prior, stateDigest, intents, err := e.loadStateIntents(ctx, req.Key)
	if err != nil {
		return nil, err
	}
	if len(intents) > 0 {
		if req.Speculative {
			return nil, fmt.Errorf("%w: %d interrupted creates or deletes of %s (the next plan of the object recovers them)", engine.ErrRecoveryPending, len(intents), req.Key)
		}
		if err := e.recoverUnlocked(ctx, req.Key, intents, req.Holder, cfg, req.ProviderSources); err != nil {
			return nil, err
		}
		if prior, stateDigest, err = e.loadStateRecord(ctx, req.Key); err != nil {
			return nil, err
		}
	}
	p, err := e.runner.Plan(withFileCheck(ctx, e.opts.FileAccess, req.Key.Namespace, cfg.doc), cfg, prior, req.ProviderSources, false, secrets)
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
	digest, err := e.storePlan(ctx, req, body, p, serial, lineage)
	if err != nil {
		return nil, err
	}
	redact := operationSecrets(req.Redact, secrets)
	if err := engine.CheckSecretBytes(redact); err != nil {
		return nil, err
	}
	reviewDigest, reviewBody := "", []byte(nil)
	if req.Review {
		rp, err := reviewPlan(p)
		if err != nil {
			return nil, err
		}
		body, err := engine.ReviewBody(rp, redact)
		if err != nil {
			return nil, err
		}
		if req.Speculative {
			reviewDigest, reviewBody = bus.Digest(body), body
		} else if err := e.opts.ArtifactQuota.Charge(req.Key.Namespace, bus.Digest(body), int64(len(body))); err != nil {
			return nil, err
		} else if reviewDigest, err = e.opts.Artifacts.PutBytes(ctx, body); err != nil {
			return nil, fmt.Errorf("store the review body: %w", err)
		}
	}
	tgt := req.Target
	tgt.Redact, tgt.Holder = nil, ""
	tgt.Rendered = nil
	rec := &engine.PlanRecord{ReviewDigest: reviewDigest, ReviewBody: reviewBody,
		Target: tgt, BindingsDigest: req.BindingsDigest, Engine: e.Name(), EngineVersion: EngineVersion,
		ProviderVersions: p.ProviderVersions, StateSerial: serial, StateLineage: lineage, StateDigest: stateDigest, PlanDigest: digest,
		HasChanges: p.HasChanges(), CreatedAt: e.opts.Now().UTC(),
	}
	rec.Summary, rec.Resources = summarize(p)
	red := engine.NewRedactor(redact...)
	for _, c := range p.Checks {
		if c.Status == "fail" {
			// tofu's words for the same diagnostic; the address as tofu names it.
			rec.AddWarning(red, "Check block assertion failed: "+strings.Join(c.Messages, "; ")+" ("+c.Object+")")
		}
	}
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

// journal records an apply's state snapshots and create intents in key's state record under
// lockID; last receives the record of the last snapshot saved. A snapshot before the final
// one is charged to key's namespace's artifact quota, and held back when refused (the final
// one is stored whatever the count: state.Store counts it).
func (e *Engine) journal(key state.Key, lockID string, last *state.Record) journal {
	log := e.opts.Logger.With(slog.String("resource", key.String()))
	return journal{
		intents: true,
		admit: func(b []byte) bool {
			if err := e.opts.ArtifactQuota.Charge(key.Namespace, bus.Digest(b), int64(len(b))); err != nil {
				log.Warn("state snapshot held back by the artifact quota; the final state is stored", slog.String("error", err.Error()))
				return false
			}
			return true
		},
		write: func(ctx context.Context, b []byte, resolved []string, added []state.Intent) error {
			return retrySave(ctx, log, func() error {
				rec, err := e.opts.Store.Commit(ctx, key, b, lockID, resolved, added)
				if err != nil {
					return err
				}
				if b != nil {
					e.cacheBody(key, rec.Digest, b)
				}
				*last = rec
				return nil
			})
		},
	}
}

// saveRetry and saveRetryFor are the schedule and bound of a state save that failed for want of
// the bus (a NATS server lost, a JetStream stream or meta leader being elected). The resources
// the save records exist already: failing the apply would have the retry plan them again as
// creates, creating them twice (seen in TestCluster_killServerThenMetaLeader, test/e2e).
var (
	saveRetry    = bus.Backoff{Base: 250 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.2}
	saveRetryFor = 2 * time.Minute
)

// retrySave calls put until it succeeds, fails with an error of the state store's own (locked
// by another holder, conflicting write, invalid body or key: retrying cannot help), saveRetryFor
// passes, or ctx ends; it returns put's last error. Each failed attempt is logged at WARN.
func retrySave(ctx context.Context, log *slog.Logger, put func() error) error {
	deadline := time.Now().Add(saveRetryFor)
	for n := 1; ; n++ {
		err := put()
		if err == nil || errors.Is(err, state.ErrLocked) || errors.Is(err, state.ErrConflict) ||
			errors.Is(err, state.ErrInvalidState) || errors.Is(err, state.ErrInvalidKey) || errors.Is(err, state.ErrHolderUnknown) {
			return err
		}
		d := saveRetry.Delay(n)
		if time.Now().Add(d).After(deadline) {
			return err
		}
		log.Warn("state save failed; retrying", slog.Int("attempt", n), slog.Duration("delay", d), slog.String("error", err.Error()))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(d):
		}
	}
}

// Apply implements [engine.Engine], bounded by Options.Timeouts.Apply.
func (e *Engine) Apply(ctx context.Context, req engine.ApplyRequest) (*engine.ApplyResult, error) {
	return bounded(ctx, "apply", e.opts.Timeouts.Apply, func(ctx context.Context) (*engine.ApplyResult, error) {
		secrets := map[string]bool{}
		lockKey := state.Key{}
		if req.Plan != nil {
			lockKey = req.Plan.Target.Key
		}
		res, err := e.apply(withCredentials(withProviderLock(ctx, e.opts.Store, lockKey, false), req.Credentials), req, secrets)
		return res, stepError("apply", err, req.Redact, secrets)
	})
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
	prior, stateDigest, intents, err := e.loadStateIntents(ctx, key)
	if err != nil {
		return nil, err
	}
	var art *planArtifact
	var plan *Plan
	var cfg *Config
	if len(intents) > 0 {
		// A plan made before an apply died: objects recovered now make it stale.
		if art, plan, err = e.loadPlan(ctx, rec.PlanDigest); err != nil {
			return nil, err
		}
		if cfg, err = e.pinnedConfig(ctx, art.RenderedDigest, nil, rec.Target.ProviderConstraints); err != nil {
			return nil, err
		}
		if err := e.recover(ctx, key, lockID, cfg, rec.Target.ProviderSources, false); err != nil {
			return nil, err
		}
		if prior, stateDigest, err = e.loadStateRecord(ctx, key); err != nil {
			return nil, err
		}
	}
	var serial uint64
	var lineage string
	if prior != nil {
		serial, lineage = prior.Serial, prior.Lineage
	}
	if stale := engine.Stale(rec, state.Record{Serial: serial, Lineage: lineage, Digest: stateDigest}); stale != nil {
		return nil, stale
	}
	if art == nil {
		if art, plan, err = e.loadPlan(ctx, rec.PlanDigest); err != nil {
			return nil, err
		}
	}
	if art.StateSerial != serial || art.StateLineage != lineage {
		return nil, &engine.PlanStaleError{PlanID: rec.PlanID, PlannedSerial: art.StateSerial, CurrentSerial: serial,
			PlannedLineage: art.StateLineage, CurrentLineage: lineage}
	}
	if cfg == nil {
		if cfg, err = e.pinnedConfig(ctx, art.RenderedDigest, nil, rec.Target.ProviderConstraints); err != nil {
			return nil, err
		}
	}
	var last state.Record
	st, err := e.runner.apply(ctx, cfg, plan, prior, rec.Target.ProviderSources, e.journal(key, lockID, &last), secrets)
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

// Destroy implements [engine.Engine], bounded by Options.Timeouts.Destroy.
func (e *Engine) Destroy(ctx context.Context, req engine.DestroyRequest) (*engine.DestroyResult, error) {
	return bounded(ctx, "destroy", e.opts.Timeouts.Destroy, func(ctx context.Context) (*engine.DestroyResult, error) {
		secrets := map[string]bool{}
		res, err := e.destroy(withCredentials(withProviderLock(ctx, e.opts.Store, req.Key, false), req.Credentials), req, secrets)
		return res, stepError("destroy", err, req.Redact, secrets)
	})
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
	prior, _, intents, err := e.loadStateIntents(ctx, key)
	if err != nil {
		return nil, err
	}
	if prior == nil && len(intents) == 0 {
		return &engine.DestroyResult{}, nil
	}
	var rendered *Config
	if req.RenderedDigest != "" {
		if c, err := e.pinnedConfig(ctx, req.RenderedDigest, req.Rendered, req.ProviderConstraints); err == nil {
			rendered = c
		}
	}
	cfg := destroyConfig(rendered)
	if len(intents) > 0 {
		// An object an interrupted create made is destroyed with the rest once found.
		if err := e.recover(ctx, key, lockID, cfg, req.ProviderSources, true); err != nil {
			return nil, err
		}
		if prior, err = e.loadState(ctx, key); err != nil || prior == nil {
			return &engine.DestroyResult{}, err
		}
	}
	plan, err := e.runner.Plan(ctx, cfg, prior, req.ProviderSources, true, secrets)
	if err != nil {
		return nil, err
	}
	var last state.Record
	st, err := e.runner.apply(ctx, cfg, plan, prior, req.ProviderSources, e.journal(key, lockID, &last), secrets)
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

// destroyConfig is the configuration a destroy plans with: the rendered configuration's
// provider settings and its prevent_destroy protections; its resources are not planned.
// rendered may be nil.
func destroyConfig(rendered *Config) *Config {
	cfg := &Config{Providers: map[string]hcl.Body{}, Locals: map[string]hcl.Expression{}, Variables: map[string]*VariableConfig{},
		Outputs: map[string]*OutputConfig{}, protected: map[string]bool{}}
	if rendered == nil {
		return cfg
	}
	cfg.Providers, cfg.providerHash = rendered.Providers, rendered.providerHash
	var protect func(c *Config, prefix string)
	protect = func(c *Config, prefix string) {
		for _, rc := range c.Resources {
			if rc.PreventDestroy {
				cfg.protected[prefix+rc.Address()] = true
			}
		}
		for name, mc := range c.Modules {
			protect(mc.Config, prefix+"module."+name+".")
		}
	}
	protect(rendered, "")
	return cfg
}
