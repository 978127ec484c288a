package synthesis

import (
	"context"
	"errors"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/lang/render"
	"github.com/lava-operator/lava/internal/lang/tlisp"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/identity"
)

// Renderer renders an object's spec as synth's pipeline does: the source (inline, bundled or
// a resolved Flux artifact), the bindings of spec.bindingsFrom read with the object's identity
// and spec.bindings over them, the gate, the rendering and the tenant policy. synth's
// consumer renders with it, and so does the applier's PlanService (a speculative plan renders
// exactly what synth would). Its fields are those of [Config] of the same names.
type Renderer struct {
	Kube        client.Reader
	Identities  *identity.Clients
	BindingsKey []byte
	Artifacts   *ArtifactCache
	Policy      *policy.File
	// Who names the reader in failure messages ("synth" when empty).
	Who string
}

func (r Renderer) who() string {
	if r.Who == "" {
		return "synth"
	}
	return r.Who
}

// Rendered is one render of a spec: its input, its output (nil when it failed) and every
// diagnostic, and the values of the Secrets it bound (to redact from any text it causes).
type Rendered struct {
	In      render.Input
	Out     *render.Output
	Diags   tlisp.Diagnostics
	Secrets []string
}

// Render renders spec for namespace ns. fail is the outcome when the spec does not render:
// a binding that cannot be read (its reason and message), a render with error diagnostics
// (SynthesisFailed, GateRejected or SourceUnsupported; the diagnostics are in Rendered.Diags)
// or the tenant policy's refusal (PolicyRejected, its violations appended to Rendered.Diags).
// err is transient (an API error reading a binding).
func (r Renderer) Render(ctx context.Context, spec *lavav1.ArchitectureSpec, ns string) (rd Rendered, fail *pipeline.Failure, err error) {
	in, secrets, fail, err := r.input(ctx, spec, ns)
	rd = Rendered{In: in, Secrets: secrets}
	if fail != nil || err != nil {
		return rd, fail, err
	}
	out, diags := render.Synthesize(in)
	rd.Diags = diags
	if out == nil {
		f := &pipeline.Failure{Reason: v1alpha1.ReasonSynthesisFailed, Message: DiagMessage(diags)}
		switch {
		case in.SourceKind == render.SourceName && !KnownSource(in.SourceName):
			f.Reason = v1alpha1.ReasonSourceUnsupported
		case GateRejected(in):
			f.Reason = v1alpha1.ReasonGateRejected
		}
		return rd, f, nil
	}
	if f := CheckPolicy(r.Policy, in, out, ns); f != nil {
		var violations tlisp.Diagnostics // a PolicyRejected failure's Err
		if errors.As(f, &violations) {
			rd.Diags = append(rd.Diags, violations...)
		}
		return rd, f, nil
	}
	rd.Out = out
	return rd, nil, nil
}

// Store puts the Terraform JSON of a successful render into the artifact store and returns its
// artifact digest: keyed with the bindings key when it holds Secret-bound values, so its name
// is keyed like its terraformJSONDigest (docs/security.md, "Rendering").
func (r Renderer) Store(ctx context.Context, art *bus.Artifacts, rd Rendered) (string, error) {
	if len(rd.In.SecretKeys) > 0 {
		return art.PutKeyed(ctx, strings.NewReader(string(rd.Out.JSON)), r.BindingsKey)
	}
	return art.Put(ctx, strings.NewReader(string(rd.Out.JSON)))
}

// Digest is the artifact digest [Renderer.Store] gives a successful render rd, without storing
// it (a speculative plan's, which is never stored).
func (r Renderer) Digest(rd Rendered) string {
	if len(rd.In.SecretKeys) > 0 {
		return bus.KeyedDigest(rd.Out.JSON, r.BindingsKey)
	}
	return bus.Digest(rd.Out.JSON)
}

// Providers lists the architecture's :providers of a successful render as requirements, in
// order, without repeating a local name (aliases share one requirement).
func (rd Rendered) Providers() []*lavav1.ProviderRequirement { return Providers(rd.Out) }
