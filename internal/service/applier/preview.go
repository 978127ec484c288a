package applier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"connectrpc.com/connect"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/gen/lava/v1/lavav1connect"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/pipeline/synthesis"
	"github.com/lava-operator/lava/internal/platform/httpserver"
	"github.com/lava-operator/lava/internal/platform/rpcauth"
)

// previewHolder names a speculative plan where a holder is recorded (logs, the state lock it
// never takes).
const previewHolder = "lava-preview"

// PlanServer implements lavav1connect.PlanServiceHandler: speculative plans
// (docs/design/0039-speculative-plans.md). A preview renders the spec with synth's [synthesis.Renderer]
// (the same bindings, gate and tenant policy as synth's pipeline renders) and plans it with the
// applier's own steps (credentials, orphaned and regressed state, the engine's plan with a
// review body, the namespace's plan rules), so its plan id is the one the object gets when
// the spec is applied with `spec.approvePlan: <id>` and nothing else changed. It writes no
// state and no record, takes no lease and no state lock, and publishes nothing.
type PlanServer struct {
	s *Service
	r synthesis.Renderer
	// slots bounds the previews running at once (each is a plan: providers start and refresh),
	// perNamespace those of one namespace and perUser those of one caller, so one tenant cannot
	// hold every slot, not with several namespaces either.
	slots        chan struct{}
	perNamespace *httpserver.Counter
	perUser      *httpserver.Counter
}

// previewHook, set only by tests, is called by each preview once it holds its slots.
var previewHook func(namespace, name string)

// PreviewVerb is the verb a PlanService caller needs on lavaarchitectures in the request's
// namespace (internal/platform/rpcauth): update, since a preview shows the plan against an
// object's state, which only who may change the object may see.
const PreviewVerb = "update"

// DefaultMaxPreviews is the speculative plans an applier runs at once when not configured
// (--max-previews); one more is refused with Unavailable, never queued.
const DefaultMaxPreviews = 2

// DefaultMaxPreviewsPerNamespace is the speculative plans of one namespace an applier runs at
// once when not configured (--max-previews-per-namespace); one more is refused with
// ResourceExhausted, never queued.
const DefaultMaxPreviewsPerNamespace = 1

// DefaultMaxPreviewsPerUser is the speculative plans one caller (the authenticated user, e.g.
// a CI pipeline's ServiceAccount) runs at once on an applier when not configured
// (--max-previews-per-user); one more is refused with ResourceExhausted, never queued.
const DefaultMaxPreviewsPerUser = 1

// PreviewLimits bounds the speculative plans an applier runs at once: Total in all (0:
// [DefaultMaxPreviews]), PerNamespace of one namespace (0: [DefaultMaxPreviewsPerNamespace])
// and PerUser of one caller (0: [DefaultMaxPreviewsPerUser]).
type PreviewLimits struct {
	Total, PerNamespace, PerUser int
}

var _ lavav1connect.PlanServiceHandler = PlanServer{}

// NewPlanHandler returns the connect path and handler of PlanService ("/lava.v1.PlanService/")
// planning with s and rendering with r, within limits, to mount on the applier's connect
// listener.
func NewPlanHandler(s *Service, r synthesis.Renderer, limits PreviewLimits, opts ...connect.HandlerOption) (string, http.Handler) {
	if r.Who == "" {
		r.Who = "the applier"
	}
	maxPreviews := limits.Total
	if maxPreviews <= 0 {
		maxPreviews = DefaultMaxPreviews
	}
	perNamespace := limits.PerNamespace
	if perNamespace <= 0 {
		perNamespace = DefaultMaxPreviewsPerNamespace
	}
	perUser := limits.PerUser
	if perUser <= 0 {
		perUser = DefaultMaxPreviewsPerUser
	}
	return lavav1connect.NewPlanServiceHandler(PlanServer{s: s, r: r, slots: make(chan struct{}, maxPreviews),
		perNamespace: httpserver.NewCounter(perNamespace), perUser: httpserver.NewCounter(perUser)}, opts...)
}

// Preview renders and plans req's spec against the state of req's namespace and name. A spec
// that does not render, that the tenant policy refuses, whose identity or credentials cannot
// be read or whose plan fails comes back with a reason, a message and the diagnostics, and no
// plan id. Errors: InvalidArgument (no name, no spec, a spec.sourceRef), FailedPrecondition
// (an interrupted apply awaits recovery, an engine this applier does not run), Unavailable
// (the state, the artifact store, the policy document or the API server cannot be read now,
// or the applier runs its maximum of previews), ResourceExhausted (the namespace, or the
// caller, runs its maximum of previews).
func (p PlanServer) Preview(ctx context.Context, req *connect.Request[lavav1.PreviewRequest]) (*connect.Response[lavav1.PreviewResponse], error) {
	m := req.Msg
	key := state.Key{Namespace: m.GetNamespace(), Name: m.GetName()}
	if err := key.Validate(); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	spec := m.GetSpec()
	switch {
	case spec == nil || spec.GetSource().GetKind() == nil:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("spec with a source is required"))
	case spec.GetSource().GetFlux() != nil:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("a spec.sourceRef cannot be previewed: give the file of the revision to plan as spec.source.inline (lava plan --speculative --source-file FILE)"))
	}
	if !p.perNamespace.Acquire(key.Namespace) {
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("namespace %s runs its maximum of speculative plans on this applier; retry later", key.Namespace))
	}
	defer p.perNamespace.Release(key.Namespace)
	caller, _ := rpcauth.UserFrom(ctx)
	if !p.perUser.Acquire(caller.Name) {
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%s runs its maximum of speculative plans on this applier; retry later", caller.Name))
	}
	defer p.perUser.Release(caller.Name)
	select {
	case p.slots <- struct{}{}:
		defer func() { <-p.slots }()
	default:
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("this applier runs its maximum of %d speculative plans; retry later", cap(p.slots)))
	}
	if previewHook != nil {
		previewHook(key.Namespace, key.Name)
	}
	p.s.cfg.Logger.Info("speculative plan requested", "resource", key.String(), "caller", caller.Name, "engine", pipeline.EngineName(spec.GetEngine()))
	rd, fail, err := p.r.Render(ctx, spec, key.Namespace)
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	red := engine.NewRedactor(rd.Secrets...)
	resp := &lavav1.PreviewResponse{Diagnostics: synthesis.Diagnostics(rd.Diags)}
	for _, d := range resp.Diagnostics {
		d.Message = red.Redact(d.Message)
	}
	if fail != nil {
		resp.Reason, resp.Message = fail.Reason, redactThenCut(red, fail.Message)
		return connect.NewResponse(resp), nil
	}
	// Nothing of a preview is stored: the engine plans the render in memory under the digest
	// synth would store it at, so the plan id is the one the pipeline plans.
	in := input{engine: pipeline.EngineName(spec.GetEngine()), artifactDigest: p.r.Digest(rd), rendered: rd.Out.JSON,
		terraformJSONDigest: rd.Out.Record.TerraformJSONDigest, bindingsDigest: rd.Out.Record.BindingsDigest,
		approve: v1alpha1.ApprovePlanManual, manual: true, speculative: true, providers: requirements(rd.Providers())}
	if err := p.plan(ctx, key, spec, in, resp); err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

// plan runs the applier's steps of a plan on in for key, as the object with spec, and fills
// resp with the plan or the reason it has none. The error is a connect error.
func (p PlanServer) plan(ctx context.Context, key state.Key, spec *lavav1.ArchitectureSpec, in input, resp *lavav1.PreviewResponse) error {
	eng := p.s.cfg.Engines[in.engine]
	if eng == nil {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("engine %q is not available in this applier", in.engine))
	}
	rec, _, err := p.s.recs.load(ctx, key.Namespace, key.Name)
	if err != nil {
		return connect.NewError(connect.CodeUnavailable, err)
	}
	// The record's uid is the live object's (none before its first event, nor after it was
	// deleted): a state an orphaning object left is refused to it, as to the object itself.
	uid := rec.UID
	if rec.Deleted {
		uid = ""
	}
	w := &work{s: p.s, rec: rec, ns: key.Namespace, name: key.Name, holder: previewHolder,
		cause: &lavav1.Envelope{Resource: &lavav1.ResourceRef{Namespace: key.Namespace, Name: key.Name, Uid: uid}},
		obs:   &lavav1.ResourceObserved{Spec: spec}, obsRead: true,
		log: p.s.cfg.Logger.With("resource", key.String(), "preview", true)}
	// The plan shows the live object's state, which holds the values of the Secrets the live
	// object binds, whatever the previewed spec binds: both are redacted.
	live := &work{s: p.s, ns: key.Namespace, name: key.Name, log: w.log}
	w.redact = append(w.secrets(ctx), live.secrets(ctx)...)
	for _, check := range w.planChecks() {
		f, err := check(ctx)
		if err != nil {
			return connect.NewError(connect.CodeUnavailable, err)
		}
		if f != nil {
			resp.Reason, resp.Message = f.Reason, redactThenCut(w.redactor(ctx), f.Message)
			return nil
		}
	}
	in.regressed, in.regressedFrom, err = w.regression(ctx)
	if err != nil {
		return connect.NewError(connect.CodeUnavailable, err)
	}
	rules, err := w.planRules()
	if err != nil {
		return connect.NewError(connect.CodeUnavailable, err)
	}
	plan, err := w.plan(ctx, eng, in, true)
	switch {
	case errors.Is(err, engine.ErrRecoveryPending):
		return connect.NewError(connect.CodeFailedPrecondition, errors.New(redactThenCut(w.redactor(ctx), err.Error())))
	case err != nil:
		f := w.classify(ctx, lavav1.Stage_STAGE_PLAN, err)
		resp.Reason, resp.Message = f.Reason, f.Message
		return nil
	}
	verdict, err := w.verdict(ctx, plan, in, rules)
	if err != nil {
		return connect.NewError(connect.CodeUnavailable, err)
	}
	if len(verdict.Matches) > 0 {
		plan.Policy = &verdict
	}
	if resp.ReviewBody, err = w.reviewBody(ctx, plan); err != nil {
		return connect.NewError(connect.CodeUnavailable, err)
	}
	if resp.PlanRecord, err = json.Marshal(plan); err != nil {
		return connect.NewError(connect.CodeInternal, err)
	}
	resp.PlanId, resp.Verdict = plan.PlanID, string(verdict.Verdict)
	return nil
}
