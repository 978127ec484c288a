// Package docs checks that the documentation names only what the repository holds: every
// repository path in docs/*.md, docs/design/*.md, README.md, bench/README.md,
// examples/README.md and services/*/README.md resolves (tests without a build tag, run by
// `go test ./...`).
//
// A path is a word starting with internal/, cmd/, api/, config/, deploy/, hack/, test/, bench/,
// services/, docs/, examples/ or proto/, in backticks, in a fenced block or in prose, and every
// relative Markdown link target (resolved from the document's directory). Accepted forms:
//
//   - a file or directory: internal/pipeline/reduce.go, internal/engine/embedded/;
//   - a Go package pattern: ./internal/service/drift/...;
//   - a file with a line (internal/up/up.go:42) or a function or method it declares
//     (internal/up/up.go:Run);
//   - a package with a symbol it declares: internal/pipeline.Reduce, api/v1alpha1.Phase.String;
//   - a design note by number: docs/design/0019;
//   - a glob or an upper-case placeholder segment, which must match at least one path:
//     services/*/README.md, internal/lang/catalog/architectures/NAME.tlisp.
//
// `deploy/NAME` on a line running kubectl is a Kubernetes resource, not a path.
package docs
