// Package tlisp reads and evaluates Lava's architecture dialect of tatara-lisp (.tlisp files):
// the reader, the deflava-architecture evaluator and the deflava-interface reader, behaving as
// upstream lava-eval's do, with a file:line:col position on every node and every diagnostic.
//
// The package imports only the standard library and internal/lang/arch. Evaluation is pure (no I/O,
// clock or randomness), bounded (see [MaxSourceBytes], [MaxDepth], [MaxResources], [MaxValues], [MaxRecordFields],
// [MaxIterations], [MaxInterpolatedBytes]) and never panics across its API: an internal failure
// becomes a [Diagnostic].
//
// Diagnostics carry a [Pos] (file, 1-based line, 1-based column in characters, byte offset)
// and use upstream lava-eval's wording where it has one, followed by what was
// expected. Errors are accumulated up to [MaxDiagnostics]; a call returns no result when any
// diagnostic is an error.
//
// Entry points: [EvalArchitecture] (source plus bindings to an arch.Architecture; a
// deflava-import form only gets a warning, it is never composed), [ReadInterfaces]
// (deflava-interface forms), [DeclaredInputs] (the :inputs entries) and [Parse] (the forms).
package tlisp
