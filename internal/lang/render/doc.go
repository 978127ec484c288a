// Package render turns a typed Architecture into Terraform JSON configuration syntax and
// identifies each render with a RenderRecord whose digests are BLAKE3 over RFC 8785 canonical
// JSON (docs/design/0001-json-emission-and-digests.md), so they do not depend on emission order.
//
// Emission keeps insertion order (lava-eval 0.2's behaviour): top-level keys provider, locals,
// resource, data, output, import; resource types in first-appearance order and names in source
// order. [Synthesize] wires source resolution, the gate, evaluation and rendering together.
//
// Bindings are data: [EscapeBindings] escapes every value before evaluation, and renders a
// value that came from a Secret as `${sensitive("VALUE")}` ([SensitiveTemplate]), so the engines
// carry OpenTofu's sensitive mark through everything computed from it
// (docs/design/0020-secret-values-marked-sensitive.md).
package render
