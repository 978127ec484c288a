// Package synthesis is the render step of synth's pipeline, shared by the services that render
// an object's spec: synth's consumer (internal/service/synth) and the applier's speculative
// plans (PlanService, docs/design/0039-speculative-plans.md). [Renderer.Render] resolves the
// source (inline, bundled, or spec.path of the Flux artifact the watcher resolved, fetched,
// digest-verified and cached by [ArtifactCache]), reads spec.bindingsFrom in order (ConfigMaps,
// Secrets and producers' outputs, as the object's ServiceAccount when impersonation is
// configured; a refusal is a RBACForbidden failure naming who and what, never a value),
// applies spec.bindings over them, renders with internal/lang/render and holds the result to
// the tenant policy of the namespace ([CheckPolicy]); [Renderer.Store] puts the Terraform JSON
// into the artifact store, keyed with the installation's bindings key when it holds Secret
// values (docs/security.md, "Rendering"). A failure is a pipeline.Failure with the condition
// reason synth publishes (SynthesisFailed, GateRejected, PolicyRejected, SourceUnsupported,
// SourceNotReady, SourceFetchFailed, RBACForbidden, ServiceAccountRequired); an error is
// transient. The values of bound Secrets come back in [Rendered].Secrets for the caller to
// redact from every text the render causes.
package synthesis
