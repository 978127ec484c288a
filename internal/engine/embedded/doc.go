// Package embedded is Lava's default engine: it plans, applies and destroys Terraform JSON
// configurations in process, with no Terraform or OpenTofu binary, by speaking the Terraform
// provider plugin protocol (versions 5 and 6, gRPC, hashicorp/go-plugin) to provider binaries
// found in a directory laid out like OpenTofu's filesystem mirror.
//
// # Protocol
//
// The tfplugin5 and tfplugin6 subpackages are generated from this directory's own buf module
// (proto/, the client subset of the published protocol 5.9/6.9, field numbers as published). [Client]
// hides the version differences; values cross the wire as MessagePack encoded by go-cty from
// the cty types this package derives from the provider's schema.
//
// # Semantics
//
// Planning follows Terraform core: refresh (ReadResource) the prior state after upgrading it
// (UpgradeResourceState), propose the configuration merged with prior computed values, ask the
// provider (PlanResourceChange), replace when a changed path requires it. References
// ("${type.name.attr}") order the work; a reference to a value not yet known is unknown until
// apply, where every resource is planned again with its dependencies' new values before
// ApplyResourceChange. The built-in terraform_data resource needs no provider.
//
// # State
//
// State is Terraform state format version 4 JSON, so tofu and terraform can read what this
// engine writes and the other way round; it is saved after every resource, so a failure
// mid-apply loses nothing already created. A create whose result dies with the process before
// that save is covered by a create intent written into the state record first (address and,
// from providers of protocol 5.9/6.9, the planned resource identity): the next operation finds
// the object again by identity (ImportResourceState, ReadResource) or fails with
// engine.ErrCreateInterrupted rather than create it twice (recover.go,
// docs/design/0021-embedded-create-interrupted-by-a-dead-applier.md).
//
// Sensitive values (attributes the schema marks sensitive, sensitive variables and
// sensitive()) are never logged, are redacted from errors and drift findings, and make an
// output that shows them sensitive. As in OpenTofu, count and for_each refuse a sensitive value,
// and a function that fails over one does not show it (hideSensitiveErrors, every function).
// Provider processes' own log output is discarded for the same reason.
//
// # Use
//
// [New] returns an [Engine] (the engine.Engine interface) over the state store and artifact
// store; it keeps provider processes warm in a [Pool] until [Engine.Close]. Each provider
// process gets the parent-death signal (internal/platform/childproc), so a service that is
// killed without closing its engine leaves none running. A provider package of the mirror
// starts only as the mirror held it when the pool was made (providers.Pins). A
// [ProcessBudget] ([Options.MaxProcesses], default [DefaultMaxProcesses], or one shared by the
// engines of a process) bounds the provider processes running at once across every operation,
// leased or warm: an operation takes its share, one process per provider configuration it may
// use, before its first provider starts, waiting first in, first out until its context ends,
// and never waits while it holds one; one namespace's operations hold at most half the budget; a new process past the budget first stops the least
// recently used idle ones; an operation using more configurations than the budget fails with
// engine.ErrEvaluationLimit (docs/design/0043-provider-process-budget.md). With
// [Options.FileAccess] every plan and drift scan first holds the configuration's file paths
// and import ids to the tenant policy's roots with the providers' schemas
// (engine.FileAccess, docs/design/0022-file-access-from-schemas.md). [Runner] is the
// same machinery without the stores (configuration and state values in, state out).
//
// # Time
//
// Each operation runs under its step timeout (Options.Timeouts, engine.Timeouts: a plan and a
// drift scan by Plan, an apply by Apply, a destroy by Destroy). At the timeout a plan's
// provider calls are cancelled; an apply's or destroy's provider is asked to stop
// (StopProvider), as on cancellation, so what it did is saved, and a call that ignores the stop
// is abandoned engine.InterruptGrace later, its create intent kept ([stopOnCancel]). The
// providers of an operation that ended so are stopped, not kept warm. The error is a
// *engine.StepTimeoutError naming the step and the timeout; docs/embedded-engine.md, "Step
// timeouts".
//
// # Expressions
//
// The configuration is parsed with hcl/v2's JSON syntax ([ParseConfig]); each expression is
// evaluated in an hcl.EvalContext holding only what it refers to (its Variables()), with
// [Functions]: OpenTofu's functions without filesystem or network effects, from go-cty's
// stdlib, hcl's ext packages, go-cty-yaml and small wrappers; the filesystem functions
// ([FilesystemFunctions]) fail with a clear error.
//
// Every plan and apply evaluates under a budget (limits.go): one value at most
// [MaxValueElements] elements and [MaxValueBytes] of text, the operation [EvalElements]
// and [EvalBytes], bcrypt at most [MaxBcryptCost], every function call and for-expression
// iteration checking the operation's context. The operation's function table guards each
// function (an estimate before it runs, the result checked after), and each parsed template
// is instrumented (for expressions, constructors, function arguments and template parts
// checked as they are evaluated). A breach is a [LimitError] (engine.ErrEvaluationLimit) at
// the expression's position; docs/embedded-engine.md, "Evaluation limits".
//
// # Limits
//
// Resources, data sources, providers (with aliases), variables (defaults only), locals and
// outputs; modules bundled in the rendered document (engine.BundleKey: count, for_each,
// nesting, variables, outputs; state addresses with module paths as tofu writes them);
// count, for_each, depends_on; lifecycle create_before_destroy, prevent_destroy
// ([PreventDestroyError]), ignore_changes (paths and all), replace_triggered_by,
// preconditions and postconditions; import blocks (ImportResourceState, then plan); moved
// blocks for resources, instances, module calls and module instances; removed blocks for
// resources and module calls; check blocks (failures are warnings: [Plan.Checks], the log,
// the state's check_results). Remote module sources, provisioners and provider-defined
// functions are refused with a clear error;
// required_providers version constraints (hashicorp/go-version) pick the version, which the
// object's dependency lock then pins; providers come from the mirror directory or, with
// [Options.Installer], from a registry or network mirror (package providers).
// Deposed objects (left by an interrupted create-before-destroy replacement) are deleted by
// the next apply, as Terraform does. docs/embedded-engine.md lists all of it with the reasons.
package embedded
