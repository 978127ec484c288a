// Package render turns a typed Architecture into Terraform JSON configuration syntax and
// identifies each render with a RenderRecord whose digests are BLAKE3 over RFC 8785 canonical
// JSON (docs/design/0001-json-emission-and-digests.md), so they do not depend on emission order.
//
// Emission keeps insertion order (lava-eval 0.2's behaviour): top-level keys provider, locals,
// resource, data, module, output, import, then "//" with the bundled modules; resource types
// in first-appearance order and names in source order. [Synthesize] wires source resolution,
// the gate, evaluation and rendering together.
//
// A bundled architecture's :modules calls with local sources bring its module directories
// along: [Synthesize] embeds exactly the directories the calls name, transitively
// (catalog.ModuleBundle), under the document's "//".lava_modules (bundle.Key), so the
// artifact stays one document with one digest; an inline or file source has no bundle, and a
// local module source there is an error at the call
// (docs/design/0017-modules-and-bundled-sources.md).
//
// Bindings are data: [EscapeBindings] escapes every value before evaluation, and renders a
// value that came from a Secret as `${sensitive("VALUE")}` ([SensitiveTemplate]), so the engines
// carry OpenTofu's sensitive mark through everything computed from it
// (docs/design/0020-secret-values-marked-sensitive.md).
package render
