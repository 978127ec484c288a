// Package state keeps Terraform state durably for the tofu and terraform engines: the state
// body (Terraform state format v4 JSON) in the content-addressed artifact store, and per
// resource a small record in the JetStream KV bucket "lava-state" (serial, lineage, body
// digest and the lock), updated with compare-and-set on KV revisions. [Handler] serves it to
// the Terraform CLI as an `http` backend (GET/POST state, LOCK/UNLOCK).
//
// State is never deleted because a spec changed: the only removal is [Store.Forget], called
// after a successful destroy, and it keeps a history key. The only write that may change a
// state's lineage or move its serial backwards is an operator's: [Store.Restore] (`lava state
// restore NS/NAME`) after a state was lost or regressed out of band, and [Store.Push] (`lava
// state push NS/NAME FILE`) of a state file, which replaces a lineage or an older serial only
// when forced. Both keep the record they replace under a history key of their own
// (docs/design/0025-lost-or-regressed-state.md, docs/design/0035-state-pull-and-push.md).
package state
