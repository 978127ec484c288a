// Package arch is the typed Architecture model that Lava synthesizes Terraform JSON from: the
// Go form of upstream lava-core's Architecture (docs/dialect.md section 2.2), plus the typed
// Interface that gates bindings (section 4.1).
//
// The evaluator (internal/lang/tlisp) builds these values from a deflava-architecture form; the
// renderer (internal/lang/render) turns them into Terraform JSON configuration syntax; the gate
// (internal/lang/gate) validates bindings against an [Interface]. Ordered maps ([Map]) keep source
// order, because Terraform JSON is emitted in insertion order.
//
// The package imports only the standard library.
package arch
