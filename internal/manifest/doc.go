// Package manifest reads LavaArchitecture manifests: multi-document YAML (or JSON) files, each
// document decoded with its positions, and checked against the LavaArchitecture CRD as the API
// server admits it. It is the one manifest reader of `lava up` (internal/up's file source),
// `lava validate` and `lava render` (cmd/lava).
//
// # Decoding
//
// [Decode] splits a file into its documents ([Document]): an empty document is skipped, one of
// another kind is returned with its kind and apiVersion (the CLI warns, lava up ignores it), and
// a LavaArchitecture is decoded strictly (an unknown field is an error) into its Go type, with
// metadata.namespace defaulted to "default" and status and identity (uid, generation,
// resourceVersion) cleared. [Parse] and [Reader.Read] build lava up's [Manifest]s on it: a
// file's first problem makes the whole file a [FileError], so a half-saved file never deletes
// what it held; a namespace/name that documents of two files define is a FileError of each of
// those documents, and neither is returned.
//
// # Reading files
//
// [ReadFile] reads regular files only, of at most [MaxFileBytes] (1 MiB; the size is checked
// before reading, and no more than the limit is read). A [Reader] keeps what it read of each
// file and reads a file again only when its size, mode, times, inode or device changed (lava
// up's file source checks its files every second).
//
// # Validation
//
// [Validate] checks a document as the API server does on create, from the CRD that
// controller-gen generated (config/crd, embedded; no hand-written copy of its rules, so a marker
// changed in api/v1alpha1 and regenerated changes what lava up and lava validate accept):
// metadata with k8s.io/apimachinery's ValidateObjectMeta (a DNS-1123 subdomain name, a DNS-1123
// label namespace, labels, annotations, finalizers); then, on a copy with the schema's defaults
// applied (structural defaulting), k8s.io/apiextensions-apiserver's openAPIV3Schema validator
// (types, enums, patterns, lengths, required fields, item counts), the list-type invariants and,
// unless one of those errors blocks them as it blocks the API server (a missing or unsupported
// value, a value too long, too many items, a wrong type), the CEL rules
// (x-kubernetes-validations) with the API server's cost limits.
//
// What is validated is the object as decoded into its Go type (its JSON encoding), the object
// lava up runs and the services read: a YAML 1.1 "yes" in a boolean field or an unquoted number
// in a string field reads as the Go type decoded it, and an empty optional string is unset. The
// object itself is not defaulted: what the file does not set stays empty, and the services read
// empty as the CRD's default.
//
// # Errors and positions
//
// Every problem is a [PosError] at the YAML node it is about ([FieldNode]: the key of the
// deepest field of the error's path that exists in the file), formatted by [FileError] as
// "file:line:col: message". A field error reads "path: message", the API server's field path
// and message worded for a terminal (wording.go: "metadata.name: required", "spec.engine:
// unsupported value "x": want embedded, tofu or terraform", `spec.approvePlan: "x y" must match
// PATTERN`); a CEL rule's message is the CRD's own with the path said once, and four of them say
// more from the object (how many source kinds are set, which way spec.path and spec.sourceRef
// disagree, the driftInterval given). A document's problems come in document order.
//
// # Inline sources
//
// [InlineMapper] maps a position inside spec.source.inline (as the synth service reports it,
// "inline:LINE:COL") back to the manifest file, and [MapInlineText] rewrites such positions in
// a message, so a diagnostic points into the file the user edits.
package manifest
