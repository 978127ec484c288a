// Package gate validates a binding bag against a typed [arch.Interface] (a deflava-interface),
// exactly as upstream lava-schema's validate_bag and lava-types' validators do (docs/dialect.md
// section 4), and checks that an interface agrees with the architecture it gates.
//
// # The pass/fail rule
//
// [Validate] checks the bindings only (never the architecture's defaults, resources or
// outputs) and accumulates every error, in this order:
//
//  1. each interface input that is required, has no default and is absent from the bag:
//     "missing required input `NAME`" ([MissingRequired]), in declaration order;
//  2. when no input of the interface is loose (:any or :dynamic), each bag key the interface
//     does not declare: "unknown input `NAME` (no loose-fields slot declared)" ([UnknownField]);
//  3. each declared key that is present is type-checked: "type error on input `NAME`: CAUSE"
//     ([TypeMismatch], the cause a [TypeError]).
//
// Steps 2 and 3 walk the bag as upstream builds it: scalar bindings sorted by key, then list
// bindings sorted by key, then record-list bindings sorted by key (a key bound several ways is
// taken once, with the evaluator's precedence: scalar, list, record list). A list is projected
// to its comma-joined string, and a list-of field splits that string on commas again (the empty
// string is the empty list), so a list element that contains a comma counts as several.
// The rejection summary is "interface `IFACE` rejected COUNT field(s): FIRST" ([Rejected]).
//
// Record-list bindings, which upstream's gate never sees (so it reports a required record
// input as missing), count as present; a loose field accepts them, a list-of field of :any,
// :dynamic or :string checks only their row count, and any other type rejects them.
//
// # Better than upstream
//
// [CheckArchitecture] compares the interface with the inputs the architecture declares: a
// required interface input without a default that the architecture does not declare is an
// error (no binding could ever reach it), other disagreements are warnings.
//
// The package imports only the standard library and internal/lang/arch.
package gate
