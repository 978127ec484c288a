// Package synth is the synth service's logic (docs/architecture.md section 2): it consumes ResourceObserved
// (durable consumer "synth" on LAVA_RESOURCES) and synth-stage RetryRequested commands, drops
// generations older than its watermark, resolves the source (inline text, a bundled catalog
// name, or spec.path in the Flux artifact the watcher resolved for spec.sourceRef, fetched,
// digest-verified and cached by [synthesis.ArtifactCache]); that render step, shared with the
// applier's speculative plans, is internal/pipeline/synthesis ([synthesis.Renderer]): it gathers the bindings (scalar, list,
// record, and bindingsFrom ConfigMaps and Secrets read with its own read-only client), runs the
// gate and renders with internal/lang/render (a bundled architecture's module directories
// embedded in the document's "//", docs/design/0017-modules-and-bundled-sources.md), applies
// the tenant policy, stores the Terraform JSON in the artifact store (within the namespace's
// [bus.ArtifactQuota]: bytes stored within the collection window) and
// publishes Synthesized, or Failed with reason SynthesisFailed, GateRejected, PolicyRejected,
// SourceUnsupported, SourceNotReady, SourceFetchFailed or ArtifactQuotaExceeded and a
// file:line:col message where there is a source position (a pipeline.Failure: terminal,
// retryable, or waiting for a binding source to appear).
//
// Values that come from Secrets never leave the process: they enter the RenderRecord's
// bindingsDigest only through a BLAKE3 keyed with the installation's bindings key, and they are
// redacted from every diagnostic, Failed message and log line.
//
// Synth takes no per-resource lease: its effect is a pure function of the event (plus the
// bound objects it reads), so two replicas rendering one resource publish the same facts, and
// the applier's lease and watermark order what happens next. Holding the shared lease would
// only make synth wait for an apply of the same resource.
//
// Every event it publishes has a deterministic event_id (the cause's event_id as trigger), so a
// redelivered ResourceObserved publishes the same facts again and JetStream stores them once.
// [Service.RenderHandler] serves RenderService (a preview: nothing stored, nothing published).
package synth
