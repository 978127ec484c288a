package tofu

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/terraform-exec/tfexec"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/providers"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/bus"
)

// File names in a workspace.
const (
	// MainFile holds the rendered JSON, byte for byte.
	MainFile = "main.tf.json"
	// OverrideFile holds the terraform block Lava adds (outside the rendered JSON's digest).
	OverrideFile = "lava_override.tf.json"
	// PlanFile is the saved plan.
	PlanFile = "lava.tfplan"
	lockFile = providers.LockFile
)

// maxArtifactBytes bounds a rendered JSON or plan file read from the artifact store.
const maxArtifactBytes = 256 << 20

// Engine runs the tofu or terraform CLI. It implements [engine.Engine].
type Engine struct {
	cfg       Config
	cliConfig string
	// home is this engine's private directory under WorkDir: a generated CLI config and the
	// init templates. Close removes it.
	home string

	mu      sync.Mutex
	version string
	// cacheRW guards the plugin cache when one is used: an init holds it exclusively (it may
	// replace cache entries), every other step shares it.
	cacheRW sync.RWMutex
	// pins are the mirror's packages as the engine found them at start; hashes caches their
	// h1: hashes (verifyMirror). schemas are provider schemas for the file check, by package
	// (workspaceSchemas; guarded by mu).
	pins    *providers.Pins
	hashes  providers.HashCache
	schemas map[string]*tfjson.ProviderSchema
	// self is the executable that starts every CLI command under cfg.MaxMemoryBytes
	// ([Engine.cliCommand]); "" without a limit.
	self string
}

var _ engine.Engine = (*Engine)(nil)

// New returns an engine for cfg. Call Close when done.
func New(cfg Config) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.PluginCacheDir != "" {
		if err := os.MkdirAll(cfg.PluginCacheDir, 0o755); err != nil {
			return nil, fmt.Errorf("tofu engine: plugin cache: %w", err)
		}
	}
	self, err := selfForLimit(cfg.MaxMemoryBytes, cfg.MaxCPUSeconds)
	if err != nil {
		return nil, err
	}
	home, err := os.MkdirTemp(cfg.WorkDir, "lava-engine-")
	if err != nil {
		return nil, fmt.Errorf("tofu engine: %w", err)
	}
	e := &Engine{cfg: cfg, cliConfig: cfg.CLIConfigFile, home: home, pins: providers.PinMirror(cfg.MirrorDir), self: self}
	if e.cliConfig == "" {
		p, err := writeCLIConfig(home, cfg.MirrorDir)
		if err != nil {
			_ = os.RemoveAll(home)
			return nil, err
		}
		e.cliConfig = p
	}
	return e, nil
}

// Close removes the engine's private directory (a generated CLI config, init templates).
func (e *Engine) Close() error {
	return os.RemoveAll(e.home)
}

// Name is the configured engine name ("tofu" or "terraform").
func (e *Engine) Name() string { return e.cfg.Name }

// defaultHost is where a two-part source ("hashicorp/aws") is looked up.
func (e *Engine) defaultHost() string {
	if e.cfg.Name == "terraform" {
		return "registry.terraform.io"
	}
	return "registry.opentofu.org"
}

// checkMirror fails fast with ErrProviderUnavailable for providers absent from the mirror, or
// present in no version that meets their constraint (named with the versions it has, as the
// embedded engine names them).
func (e *Engine) checkMirror(reqs []engine.ProviderRequirement) error {
	if e.cfg.MirrorDir == "" {
		return nil
	}
	var missing []string
	for _, r := range reqs {
		parts := strings.Split(r.Source, "/")
		if len(parts) == 2 {
			parts = append([]string{e.defaultHost()}, parts...)
		}
		if len(parts) != 3 {
			missing = append(missing, r.Source)
			continue
		}
		if fi, err := os.Stat(filepath.Join(e.cfg.MirrorDir, parts[0], parts[1], parts[2])); err != nil || !fi.IsDir() {
			missing = append(missing, engine.UnavailableSource(r.Source, r.Version, nil))
			continue
		}
		if r.Version == "" {
			continue
		}
		want, err := providers.ParseConstraint(r.Version)
		if err != nil {
			return fmt.Errorf("%s: provider %s: version constraint %q: %w", e.cfg.Name, r.Source, r.Version, err)
		}
		have := providers.MirrorVersions(e.cfg.MirrorDir, parts[0], parts[1], parts[2])
		if !slices.ContainsFunc(have, func(v string) bool { return meets(want, v) }) {
			missing = append(missing, engine.UnavailableSource(r.Source, r.Version, have))
		}
	}
	if len(missing) > 0 {
		return &engine.ProviderUnavailableError{Sources: missing, Where: e.cfg.MirrorDir}
	}
	return nil
}

// meets reports whether the version v meets the constraints want.
func meets(want version.Constraints, v string) bool {
	ver, err := version.NewVersion(v)
	return err == nil && want.Check(ver)
}

// getArtifact reads a whole artifact.
func (e *Engine) getArtifact(ctx context.Context, digest, what string) ([]byte, error) {
	rc, err := e.cfg.Artifacts.Get(ctx, digest)
	if err != nil {
		return nil, fmt.Errorf("%s: read %s %s: %w", e.cfg.Name, what, digest, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxArtifactBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: read %s %s: %w", e.cfg.Name, what, digest, err)
	}
	if len(b) > maxArtifactBytes {
		return nil, fmt.Errorf("%s: %s %s exceeds %d bytes", e.cfg.Name, what, digest, maxArtifactBytes)
	}
	return b, nil
}

// override is the terraform block Lava adds.
func (e *Engine) override(reqs []engine.ProviderRequirement) ([]byte, error) {
	rp := map[string]map[string]string{}
	for _, r := range reqs {
		// An override's entry replaces the rendered JSON's whole, so it carries the
		// constraint too: the rendered one and the architecture's pin (engine.Requirements).
		rp[r.Name] = map[string]string{"source": r.Source}
		if r.Version != "" {
			rp[r.Name]["version"] = r.Version
		}
	}
	// The addresses and credentials come from the environment (TF_HTTP_*, see newRun): a saved
	// plan records the backend configuration written here, and an apply must reach the state
	// through whichever replica runs it, not the one that planned.
	doc := map[string]any{"terraform": map[string]any{
		"required_providers": rp,
		"backend": map[string]any{"http": map[string]any{
			"lock_method":   "LOCK",
			"unlock_method": "UNLOCK",
			"update_method": "POST",
		}},
	}}
	return json.MarshalIndent(doc, "", "  ")
}

// prepare fetches the rendered JSON, checks providers, and writes the workspace files.
func (e *Engine) prepare(ctx context.Context, r *run, t engine.Target) (*workspace, error) {
	rendered := t.Rendered // a speculative plan's JSON, never stored
	if rendered == nil {
		var err error
		if rendered, err = e.getArtifact(ctx, t.RenderedDigest, "rendered JSON"); err != nil {
			return nil, err
		}
	}
	reqs, err := engine.Requirements(rendered, t.ProviderSources, t.ProviderConstraints)
	if err != nil {
		return nil, err
	}
	if err := e.checkMirror(reqs); err != nil {
		return nil, err
	}
	ov, err := e.override(reqs)
	if err != nil {
		return nil, fmt.Errorf("%s: override file: %w", e.cfg.Name, err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, MainFile), rendered, 0o600); err != nil {
		return nil, fmt.Errorf("%s: workspace: %w", e.cfg.Name, err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, OverrideFile), ov, 0o600); err != nil {
		return nil, fmt.Errorf("%s: workspace: %w", e.cfg.Name, err)
	}
	// Modules bundled in the document (docs/design/0017-modules-and-bundled-sources.md).
	if err := engine.WriteBundle(r.dir, rendered); err != nil {
		return nil, fmt.Errorf("%s: workspace: bundled modules: %w", e.cfg.Name, err)
	}
	pin, err := e.objectLock(ctx, t.Key, reqs)
	if err != nil {
		return nil, err
	}
	mods, err := engine.ModuleCalls(rendered)
	if err != nil {
		return nil, fmt.Errorf("%s: workspace: module calls: %w", e.cfg.Name, err)
	}
	sensitive := bytes.Contains(rendered, []byte("sensitive("))
	r.sensitive = sensitive
	return &workspace{reqs: reqs, override: ov, pin: pin, modules: mods, sensitive: sensitive, rendered: rendered}, nil
}

// lockAddr is the dependency lock's address of a requirement's source ("example/testkit" is
// "registry.opentofu.org/example/testkit" for tofu).
func (e *Engine) lockAddr(source string) string {
	if strings.Count(source, "/") == 1 {
		return e.defaultHost() + "/" + source
	}
	return source
}

// objectLock returns the object's recorded dependency lock, restricted to reqs and to the
// versions that still meet their constraints: a locked version a changed constraint (an
// architecture's new :version) no longer admits is selected anew by init, as the embedded
// engine does, instead of init refusing the lock; recordLock then records the new one.
func (e *Engine) objectLock(ctx context.Context, key state.Key, reqs []engine.ProviderRequirement) (providers.Lock, error) {
	all, _, err := providers.ReadLock(ctx, e.cfg.Store, key)
	if err != nil {
		return nil, err
	}
	pin := providers.Lock{}
	for _, r := range reqs {
		a := e.lockAddr(r.Source)
		en, ok := all[a]
		if !ok || en.Version == "" {
			continue
		}
		if want, err := providers.ParseConstraint(r.Version); err == nil && !meets(want, en.Version) {
			continue
		}
		pin[a] = en
	}
	return pin, nil
}

// recordLock stores the providers of the workspace's dependency lock (what a successful init
// selected and verified) in the object's lock: a provider's first use records it, a changed
// version replaces it.
func (e *Engine) recordLock(ctx context.Context, r *run, ws *workspace) error {
	got, err := e.workspaceLock(r)
	if err != nil || len(got) == 0 {
		return err
	}
	_, err = providers.UpdateLock(ctx, e.cfg.Store, r.key, func(l providers.Lock) (bool, error) {
		changed := false
		for _, req := range ws.reqs {
			a := e.lockAddr(req.Source)
			en, ok := got[a]
			if !ok {
				continue
			}
			if old, had := l[a]; had && old.Version == en.Version && sameHashes(old.Hashes, en.Hashes) {
				continue
			}
			l[a] = en
			changed = true
		}
		return changed, nil
	})
	return err
}

func sameHashes(a, b []string) bool {
	return slices.Equal(slices.Compact(slices.Sorted(slices.Values(a))), slices.Compact(slices.Sorted(slices.Values(b))))
}

// workspace is what prepare wrote; lock is the dependency lock file a saved plan brought; pin
// is the object's dependency lock from the state store restricted to the workspace's
// providers (empty when none is recorded), which a plan or destroy hands to the CLI as its
// .terraform.lock.hcl so that the CLI itself enforces versions and hashes (docs/security.md,
// "Engines").
type workspace struct {
	reqs     []engine.ProviderRequirement
	override []byte
	lock     []byte
	pin      providers.Lock
	// modules are the document's module calls (engine.ModuleCalls): init installs them
	// into .terraform/modules, so they are part of the init template's key.
	modules []byte
	// sensitive: the document renders a value marked sensitive (a Secret binding:
	// render.SensitiveTemplate), so the plan hides what functions say of their arguments.
	sensitive bool
	// rendered is the rendered document (main.tf.json), for the file check (checkFiles).
	rendered []byte
}

// init prepares the workspace's .terraform directory (initWorkspace) and verifies the
// provider packages it selected from the mirror before any of them runs (verifyMirror).
func (e *Engine) init(ctx context.Context, r *run, ws *workspace) error {
	if err := e.initWorkspace(ctx, r, ws); err != nil {
		return err
	}
	return e.verifyMirror(r)
}

// initWorkspace prepares the workspace's .terraform directory: from an init template when one
// matches (see template.go), else with `init -input=false`, and then saves a template.
func (e *Engine) initWorkspace(ctx context.Context, r *run, ws *workspace) error {
	tkey := templateKey(append(append([]byte(nil), ws.override...), ws.modules...))
	if e.useTemplate(r, tkey, ws) {
		return nil
	}
	if e.usesCache() {
		// An init may replace cache entries that running operations use: exclusive.
		e.cacheRW.Lock()
		defer e.cacheRW.Unlock()
		if e.useTemplate(r, tkey, ws) {
			return nil
		}
	}
	if ws.lock == nil && len(ws.pin) > 0 {
		// init installs the pinned versions and checks their hashes.
		if err := os.WriteFile(filepath.Join(r.dir, lockFile), ws.pin.Write(), 0o600); err != nil {
			return fmt.Errorf("%s init: workspace: %w", e.cfg.Name, err)
		}
	}
	initOnce := func(ctx context.Context) error { return r.tf.Init(ctx, tfexec.Upgrade(false)) }
	err := r.step(ctx, "init", e.cfg.Timeouts.Init, initOnce)
	if err != nil && strings.Contains(r.out.String(), "panic: ") {
		// OpenTofu 1.12 can crash installing several providers into a cold plugin cache at
		// once (a nil entry in providercache.Dir.LinkFromOtherCache); the first attempt fills
		// the cache, so a second one links from it.
		e.cfg.Logger.WarnContext(ctx, "init crashed, retrying once", "engine", e.cfg.Name, "resource", r.key.String())
		err = r.step(ctx, "init", e.cfg.Timeouts.Init, initOnce)
	}
	if err != nil {
		return err
	}
	e.saveTemplate(r, tkey)
	return nil
}

// usesCache reports whether operations use the plugin cache (see Config.PluginCacheDir).
func (e *Engine) usesCache() bool { return e.cfg.PluginCacheDir != "" && e.cfg.MirrorDir == "" }

// engineVersion returns the CLI's version (cached for the process).
func (e *Engine) engineVersion(ctx context.Context, r *run) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.version != "" {
		return e.version, nil
	}
	v, _, err := r.tf.Version(ctx, false)
	if err != nil {
		return "", fmt.Errorf("%s version: %w", e.cfg.Name, err)
	}
	e.version = v.String()
	return e.version, nil
}

// stateOf returns the record of the resource's state (the zero Record without one), and the
// state's sensitive output values for redaction.
func (e *Engine) stateOf(ctx context.Context, key state.Key) (state.Record, []string, error) {
	rec, body, err := e.cfg.Store.Body(ctx, key)
	if errors.Is(err, state.ErrNotFound) {
		return state.Record{}, nil, nil
	}
	if err != nil {
		return state.Record{}, nil, err
	}
	var secrets []string
	if o, err := engine.OutputsFromState(body); err == nil {
		secrets = o.SensitiveStrings()
	}
	return rec, secrets, nil
}

// Plan implements [engine.Engine]: init, `plan -json -out` (detailed exit code; the actions
// come from the machine-readable UI stream, see planStream); the plan file goes to the
// artifact store.
func (e *Engine) Plan(ctx context.Context, req engine.PlanRequest) (*engine.PlanRecord, error) {
	if err := req.Key.Validate(); err != nil {
		return nil, err
	}
	if err := e.recoverForPlan(ctx, req); err != nil {
		return nil, err
	}
	prior, secrets, err := e.stateOf(ctx, req.Key)
	if err != nil {
		return nil, err
	}
	r, err := e.newRun("plan", req.Key, req.Holder, append(secrets, req.Redact...), req.Credentials, nil)
	if err != nil {
		return nil, err
	}
	// `plan -json` first asks the CLI for its version (terraform-exec checks it supports
	// -json, once per handle): start that now, so it overlaps preparing the workspace.
	verDone := make(chan struct{})
	go func() {
		defer close(verDone)
		_, _, _ = r.tf.Version(ctx, false)
	}()
	defer func() { <-verDone; r.close() }()
	ws, err := e.prepare(ctx, r, req.Target)
	if err != nil {
		return nil, err
	}
	// tofu starts a process per provider configuration and keeps it for the whole command: a
	// plan or scan of too many fails before init (apply and destroy follow a plan).
	if err := engine.CheckProviderConfigurations(ws.rendered); err != nil {
		return nil, err
	}
	if err := e.init(ctx, r, ws); err != nil {
		return nil, err
	}
	if err := e.checkFiles(ctx, r, ws, req.Target); err != nil {
		return nil, err
	}
	if !req.Speculative { // a speculative plan records nothing; the next plan records the lock
		if err := e.recordLock(ctx, r, ws); err != nil {
			return nil, err
		}
	}
	version, err := e.engineVersion(ctx, r)
	if err != nil {
		return nil, err
	}
	stream, changes, err := e.planStep(ctx, r, ws, !req.Speculative)
	if err != nil {
		return nil, err
	}
	planBytes, err := os.ReadFile(filepath.Join(r.dir, PlanFile))
	if err != nil {
		return nil, fmt.Errorf("%s plan: read plan file: %w", e.cfg.Name, err)
	}
	serial, lineage, stateDigest := e.plannedState(ctx, req.Key, prior, planBytes)
	digest := bus.Digest(planBytes) // a speculative plan is never applied: not stored
	if !req.Speculative {
		if err := e.cfg.ArtifactQuota.Charge(req.Key.Namespace, digest, int64(len(planBytes))); err != nil {
			return nil, err
		}
		if digest, err = e.cfg.Artifacts.PutBytes(ctx, planBytes); err != nil {
			return nil, fmt.Errorf("%s plan: store plan file: %w", e.cfg.Name, err)
		}
	}
	versions, err := providerVersions(filepath.Join(r.dir, lockFile))
	if err != nil {
		return nil, err
	}
	reviewDigest, reviewBody := "", []byte(nil)
	if req.Review {
		if reviewDigest, reviewBody, err = e.reviewBody(ctx, r, req.Key.Namespace, append(secrets, req.Redact...), req.Speculative); err != nil {
			return nil, err
		}
	}
	t := req.Target
	t.Redact, t.Holder, t.Rendered = nil, "", nil
	rec := &engine.PlanRecord{
		ReviewDigest:     reviewDigest,
		ReviewBody:       reviewBody,
		Target:           t,
		BindingsDigest:   req.BindingsDigest,
		Engine:           e.cfg.Name,
		EngineVersion:    version,
		ProviderVersions: versions,
		StateSerial:      serial,
		StateLineage:     lineage,
		StateDigest:      stateDigest,
		PlanDigest:       digest,
		HasChanges:       changes,
		CreatedAt:        time.Now().UTC(),
	}
	rec.Summary, rec.Resources = stream.result()
	red := engine.NewRedactor(append(secrets, req.Redact...)...)
	for _, w := range stream.warnings {
		rec.AddWarning(red, w)
	}
	rec.PlanID = rec.ComputePlanID()
	return rec, nil
}

// recoverForPlan brings what an orphaned apply or destroy created into the state before a plan
// reads it; a speculative plan recovers nothing and refuses instead ([Engine.orphanPending]).
func (e *Engine) recoverForPlan(ctx context.Context, req engine.PlanRequest) error {
	if req.Speculative {
		return e.orphanPending(req.Key)
	}
	o, err := e.openObject(ctx, req.Key, req.Holder)
	if err != nil {
		return err
	}
	o.unlock()
	return nil
}

// planStep runs `plan -json -out` in r's workspace ws (the "plan" step, [run.step]), leaving
// the plan file in r.dir as PlanFile. It returns the machine-readable UI stream the CLI wrote
// (the actions, summary and warnings, see planStream) and whether the plan has changes (the
// detailed exit code); the error is the step's. lock: the CLI takes the state lock (not for a
// speculative plan, which writes no state).
func (e *Engine) planStep(ctx context.Context, r *run, ws *workspace, lock bool) (*planStream, bool, error) {
	var changes bool
	stream := newPlanStream(r.out)
	stream.hideDetail = ws.sensitive
	err := r.step(ctx, "plan", e.cfg.Timeouts.Plan, func(ctx context.Context) error {
		var err error
		changes, err = r.tf.PlanJSON(ctx, stream, tfexec.Out(PlanFile), tfexec.Refresh(true), tfexec.Lock(lock),
			tfexec.LockTimeout(e.cfg.LockTimeout.String()))
		return err
	})
	r.tf.SetStdout(r.out)
	return stream, changes, err
}

// plannedState returns the serial, lineage and digest of the state the saved plan planBytes
// was made against: prior's (the record of key's state read before planning), unless the
// plan file's prior state has another serial or lineage. The state then moved between reading
// it and planning: the serial and lineage are the plan file's, and the digest is the current
// state's when that is the state planned against, else "unknown" (the apply then refuses).
func (e *Engine) plannedState(ctx context.Context, key state.Key, prior state.Record, planBytes []byte) (serial uint64, lineage, digest string) {
	serial, lineage, digest = prior.Serial, prior.Lineage, prior.Digest
	if h, ok := priorState(planBytes); ok && (h.Serial != serial || h.Lineage != lineage) {
		serial, lineage = h.Serial, h.Lineage
		digest = "unknown"
		if cur, gerr := e.cfg.Store.Get(ctx, key); gerr == nil && cur.Serial == serial && cur.Lineage == lineage {
			digest = cur.Digest
		}
	}
	return serial, lineage, digest
}

// reviewBody stores the body of a plan a person reviews and returns its artifact digest: `show
// -json` of r's plan file (the "show" step; it starts the providers once more for their
// schemas, so only for a review), with the values in redact hidden ([engine.ReviewBody]),
// charged to namespace's artifact quota. A speculative plan's body is not stored but
// returned, with its digest. Errors are the step's, the body's, the quota's
// (*bus.QuotaExceededError) or storing it.
func (e *Engine) reviewBody(ctx context.Context, r *run, namespace string, redact []string, speculative bool) (string, []byte, error) {
	shown, err := e.showPlan(ctx, r)
	if err != nil {
		return "", nil, err
	}
	body, err := engine.ReviewBody(shown, redact)
	if err != nil {
		return "", nil, err
	}
	if speculative {
		return bus.Digest(body), body, nil
	}
	if err := e.cfg.ArtifactQuota.Charge(namespace, bus.Digest(body), int64(len(body))); err != nil {
		return "", nil, err
	}
	digest, err := e.cfg.Artifacts.PutBytes(ctx, body)
	if err != nil {
		return "", nil, fmt.Errorf("%s plan: store the review body: %w", e.cfg.Name, err)
	}
	return digest, nil, nil
}

// showPlan reads the run's saved plan as JSON (`show -json`), when the plan file's entries
// total at most the state store's largest body uncompressed: the JSON holds every value of
// the plan (prior, planned, configuration), and Lava decodes all of it in its own process (six
// 60 MB values took 5.7 GB), while an apply of a larger plan could not store its state anyway.
// archive/zip reads the sizes from the file's directory, without inflating anything. Errors:
// the size, reading the file, the step's.
func (e *Engine) showPlan(ctx context.Context, r *run) (*tfjson.Plan, error) {
	zr, err := zip.OpenReader(filepath.Join(r.dir, PlanFile))
	if err != nil {
		return nil, fmt.Errorf("%s show: %w", e.cfg.Name, err)
	}
	var size uint64
	for _, f := range zr.File {
		size += f.UncompressedSize64
	}
	_ = zr.Close()
	if limit := uint64(e.cfg.Store.MaxStateBytes()); size > limit {
		return nil, fmt.Errorf("%s show: %w: the saved plan holds %d bytes of values, more than %d, the largest state Lava stores: it is not read",
			e.cfg.Name, engine.ErrEvaluationLimit, size, limit)
	}
	var shown *tfjson.Plan
	err = r.step(ctx, "show", e.cfg.Timeouts.Show, func(ctx context.Context) error {
		var err error
		shown, err = r.tf.ShowPlanFile(ctx, PlanFile)
		return err
	})
	return shown, err
}

// priorState reads serial and lineage from the "tfstate" entry of a saved plan (a zip file).
// It reports false for a plan made without a prior state.
func priorState(plan []byte) (state.Header, bool) {
	zr, err := zip.NewReader(bytes.NewReader(plan), int64(len(plan)))
	if err != nil {
		return state.Header{}, false
	}
	for _, f := range zr.File {
		if f.Name != "tfstate" {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return state.Header{}, false
		}
		defer rc.Close()
		b, err := io.ReadAll(io.LimitReader(rc, maxArtifactBytes))
		if err != nil {
			return state.Header{}, false
		}
		h, err := state.ParseHeader(b)
		return h, err == nil
	}
	return state.Header{}, false
}

// extractLockFile writes the saved plan's dependency lock file into the workspace, so init
// installs exactly the planned provider versions, and returns it (nil when the plan has none).
func extractLockFile(plan []byte, dir string) ([]byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(plan), int64(len(plan)))
	if err != nil {
		return nil, fmt.Errorf("read plan file: %w", err)
	}
	for _, f := range zr.File {
		if f.Name != lockFile {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		b, err := io.ReadAll(io.LimitReader(rc, 1<<20))
		if err != nil {
			return nil, err
		}
		return b, os.WriteFile(filepath.Join(dir, lockFile), b, 0o600)
	}
	return nil, nil
}

// providerVersions reads the installed provider versions from the dependency lock file.
func providerVersions(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", lockFile, err)
	}
	l, err := providers.ParseLock(b)
	if err != nil {
		return nil, err
	}
	return l.Versions(), nil
}

// Apply implements [engine.Engine]: it checks the state's serial and lineage against the plan,
// rebuilds a fresh workspace from the artifact store (rendered JSON, plan file, its dependency
// lock file), inits, and applies exactly the saved plan file.
func (e *Engine) Apply(ctx context.Context, req engine.ApplyRequest) (*engine.ApplyResult, error) {
	p := req.Plan
	if p == nil {
		return nil, fmt.Errorf("%s apply: no plan", e.cfg.Name)
	}
	if err := p.Target.Key.Validate(); err != nil {
		return nil, err
	}
	// The object's lock is held to the end: the CLI runs in the object's run directory.
	// Recovering an orphaned run's state first makes a plan made before it stale.
	o, err := e.openObject(ctx, p.Target.Key, req.Holder)
	if err != nil {
		return nil, err
	}
	defer o.unlock()
	if err := e.checkFresh(ctx, p); err != nil {
		return nil, err
	}
	res := &engine.ApplyResult{PlanID: p.PlanID, Summary: p.Summary}
	if p.HasChanges {
		_, secrets, err := e.stateOf(ctx, p.Target.Key)
		if err != nil {
			return nil, err
		}
		r, err := e.newRun("apply", p.Target.Key, req.Holder, append(secrets, req.Redact...), req.Credentials, o)
		if err != nil {
			return nil, err
		}
		defer r.close()
		ws, err := e.prepare(ctx, r, p.Target)
		if err != nil {
			return nil, err
		}
		planBytes, err := e.getArtifact(ctx, p.PlanDigest, "plan file")
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(r.dir, PlanFile), planBytes, 0o600); err != nil {
			return nil, fmt.Errorf("%s apply: workspace: %w", e.cfg.Name, err)
		}
		if ws.lock, err = extractLockFile(planBytes, r.dir); err != nil {
			return nil, fmt.Errorf("%s apply: %w", e.cfg.Name, err)
		}
		if err := e.init(ctx, r, ws); err != nil {
			return nil, err
		}
		// terraform-exec's Apply would start the CLI with a parent-death signal: see runMutating.
		err = r.step(ctx, "apply", e.cfg.Timeouts.Apply, func(sctx context.Context) error {
			return r.runMutating(ctx, sctx, o, "apply", r.holder, p.StateDigest, "apply", "-json", "-no-color", "-auto-approve", "-input=false",
				"-lock-timeout="+e.cfg.LockTimeout.String(), "-lock=true", "-parallelism=10", "-refresh=true", PlanFile)
		})
		if errors.Is(err, engine.ErrPlanStale) {
			// The CLI's own check caught a change between our check and its lock.
			return nil, e.staleError(ctx, p, err)
		}
		if err != nil {
			return nil, err
		}
	}
	rec, body, err := e.cfg.Store.Body(ctx, p.Target.Key)
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return nil, err
	}
	res.StateSerial, res.StateLineage, res.StateDigest = rec.Serial, rec.Lineage, rec.Digest
	res.Outputs = &engine.Outputs{Values: map[string]json.RawMessage{}, Sensitive: map[string]json.RawMessage{}}
	if body != nil {
		if res.Outputs, err = engine.OutputsFromState(body); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// checkFresh refuses a plan whose state moved on.
func (e *Engine) checkFresh(ctx context.Context, p *engine.PlanRecord) error {
	rec, err := e.cfg.Store.Get(ctx, p.Target.Key)
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return err
	}
	if stale := engine.Stale(p, rec); stale != nil {
		return stale
	}
	return nil
}

func (e *Engine) staleError(ctx context.Context, p *engine.PlanRecord, cause error) error {
	if err := e.checkFresh(ctx, p); err != nil {
		return err
	}
	return cause
}

// Destroy implements [engine.Engine]: init and `destroy -auto-approve` against the state.
func (e *Engine) Destroy(ctx context.Context, req engine.DestroyRequest) (*engine.DestroyResult, error) {
	if err := req.Key.Validate(); err != nil {
		return nil, err
	}
	o, err := e.openObject(ctx, req.Key, req.Holder)
	if err != nil {
		return nil, err
	}
	defer o.unlock()
	rec, body, err := e.cfg.Store.Body(ctx, req.Key)
	if errors.Is(err, state.ErrNotFound) {
		return &engine.DestroyResult{StateSerial: rec.Serial, StateLineage: rec.Lineage}, nil
	}
	if err != nil {
		return nil, err
	}
	n := countInstances(body)
	var secrets []string
	if o, err := engine.OutputsFromState(body); err == nil {
		secrets = o.SensitiveStrings()
	}
	r, err := e.newRun("destroy", req.Key, req.Holder, append(secrets, req.Redact...), req.Credentials, o)
	if err != nil {
		return nil, err
	}
	defer r.close()
	ws, err := e.prepare(ctx, r, req.Target)
	if err != nil {
		return nil, err
	}
	if err := e.init(ctx, r, ws); err != nil {
		return nil, err
	}
	if err := e.checkFiles(ctx, r, ws, req.Target); err != nil {
		return nil, err
	}
	if err := e.recordLock(ctx, r, ws); err != nil {
		return nil, err
	}
	if err := r.step(ctx, "destroy", e.cfg.Timeouts.Destroy, func(sctx context.Context) error {
		return r.runMutating(ctx, sctx, o, "destroy", r.holder, rec.Digest, "destroy", "-json", "-no-color", "-auto-approve", "-input=false",
			"-lock-timeout="+e.cfg.LockTimeout.String(), "-lock=true", "-parallelism=10", "-refresh=true")
	}); err != nil {
		return nil, err
	}
	after, err := e.cfg.Store.Get(ctx, req.Key)
	if err != nil {
		return nil, err
	}
	return &engine.DestroyResult{Destroyed: n, StateSerial: after.Serial, StateLineage: after.Lineage}, nil
}

// countInstances counts managed resource instances in a state v4 body (0 for a body that is
// not JSON).
func countInstances(body []byte) int {
	addrs, _ := state.ManagedInstances(body)
	return len(addrs)
}

// Outputs implements [engine.Engine] from the stored state (no CLI run).
func (e *Engine) Outputs(ctx context.Context, key state.Key) (*engine.Outputs, error) {
	_, body, err := e.cfg.Store.Body(ctx, key)
	if err != nil {
		return nil, err
	}
	return engine.OutputsFromState(body)
}
