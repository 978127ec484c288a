// Package tlisp reads and evaluates Lava's architecture dialect of tatara-lisp (.tlisp files):
// the reader of UPSTREAM.md section 1.1, the deflava-architecture evaluator of sections 1.3 to
// 1.7 and the deflava-interface reader of section 4.1, with a file:line:col position on every
// node and every diagnostic.
//
// The package imports only the standard library and internal/arch. Evaluation is pure (no I/O,
// clock or randomness), bounded (see [MaxSourceBytes], [MaxDepth], [MaxResources]) and never
// panics across its API: an internal failure becomes a [Diagnostic].
package tlisp
