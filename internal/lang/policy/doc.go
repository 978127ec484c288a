// Package policy is the tenant policy gate: the rules a rendered architecture must satisfy
// before any engine plans it (docs/security.md, "Engines"). A LavaArchitecture's author is a
// tenant; the engines run in Lava's processes, so the gate refuses what would run code or read
// files there: provisioner and connection blocks, module blocks with remote sources or with
// local sources outside the modules bundled in the document (whose bodies it holds to the same
// rules as the root: docs/design/0017-modules-and-bundled-sources.md), the
// terraform_remote_state and external data sources (and hashicorp/local's file-reading ones),
// filesystem functions anywhere in a ${} (found with hcl/v2's template parser), file paths
// outside the admin's fileWriteRoots and fileReadRoots (the file model, [FileAttribute]: a
// name rule plus [KnownFileAttributes]; the engines apply it again with the provider schemas,
// docs/design/0022-file-access-from-schemas.md), provider sources outside an allow-list or
// outside the registry address grammar, and more resources than a limit.
//
// The platform admin sets a [Config]: cluster-wide settings with per-namespace overrides that
// relax or tighten them (docs/design/0010-tenant-policy.md). [Config.For] gives a namespace's
// effective [Policy]; [Check] applies it to an evaluated [arch.Architecture] and its rendered
// JSON. The synth service, `lava validate` and `lava up` share this one checker.
package policy
