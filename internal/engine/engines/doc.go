// Package engines builds the set of engines a Lava process offers over one durable state
// store: the state store over the lava-state bucket and the artifact store (engine/state,
// internal/platform/bus), the embedded engine (engine/embedded, always), the tofu and terraform
// CLI engines (engine/tofu, when their binary is given) and the loopback Terraform http state
// backend those CLIs read and write state through (bounded in connections and time,
// internal/platform/httpserver). The applier and drift build their engines
// with [Open]; a test builds the same set the same way.
//
// [Host] is the rest of what the applier and drift share, declared once: their options embed
// it and register its one flag set (--holder, the engines' flags, --no-kube, the Kubernetes API
// rate limit, --impersonate and the other identity flags, the providers' credential flags),
// and [Host.Deps] builds, beside the engines the service opened, the replica's holder name, the
// Kubernetes client, the impersonating clients and the provider credentials ([Deps]) the same
// way for both.
package engines
