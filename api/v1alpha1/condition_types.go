package v1alpha1

// Condition types of a LavaArchitecture's status.conditions ([]metav1.Condition, one per type).
//
// Polarity: a "normal-true" condition is True when things are as they should be; an
// "abnormal-true" condition is True when something needs attention and False (or absent)
// otherwise. Every condition carries observedGeneration, the generation it was computed for,
// and its lastTransitionTime moves only when its status flips.
//
// Ready, Reconciling and Stalled follow kstatus (sigs.k8s.io/cli-utils/pkg/kstatus), so Flux
// and Argo CD health checks read a LavaArchitecture without a custom script: Ready is True only
// in phase Applied for the current generation; Reconciling is True while work is in progress
// (including a retry that will come); Stalled is True when a failure will not be retried until
// the spec changes.
const (
	// ConditionSynthesized (normal-true): the source of observedGeneration rendered to
	// Terraform JSON. False with ReasonSynthesisFailed, ReasonSourceUnsupported or
	// ReasonGateRejected.
	ConditionSynthesized = "Synthesized"

	// ConditionGated (normal-true): the bindings satisfied spec.gate. Absent when no gate is
	// configured. False with ReasonGateRejected.
	ConditionGated = "Gated"

	// ConditionPlanned (normal-true): a plan exists for the rendered JSON (status.plan). False
	// with ReasonPlanFailed or ReasonStepTimeout.
	ConditionPlanned = "Planned"

	// ConditionApplied (normal-true): the last plan was applied. False with ReasonApplyFailed,
	// ReasonProviderUnavailable or ReasonStepTimeout.
	ConditionApplied = "Applied"

	// ConditionDrifted (abnormal-true): the last drift scan found differences between the
	// infrastructure and the last apply. The reason names the severity handling
	// (ReasonDriftDetected, ReasonReconverging); False with ReasonNoDrift.
	ConditionDrifted = "Drifted"

	// ConditionDependenciesReady (normal-true): every BlocksOn dependency (spec.dependsOn and
	// LavaArchitectureDependency objects) reached its required phase and the spec.sourceRef
	// source (a dependency too) has a ready artifact. Absent without dependencies and source.
	// False with ReasonDependencyNotReady (the message names what it waits for),
	// ReasonDependencyCycle, ReasonSourceNotFound, ReasonSourceNotReady,
	// ReasonCrossNamespaceRefRefused, or ReasonBindingSourceNotFound (a spec.bindingsFrom
	// source is missing; spec.bindingsFrom outputsRef entries are dependencies too).
	ConditionDependenciesReady = "DependenciesReady"

	// ConditionSuspended (abnormal-true): spec.suspend is set; no new work is published.
	ConditionSuspended = "Suspended"

	// ConditionAwaitingApproval (abnormal-true): a plan waits for spec.approvePlan to name its
	// id (the message names it).
	ConditionAwaitingApproval = "AwaitingApproval"

	// ConditionReady (normal-true, kstatus): phase Applied and observedGeneration current.
	ConditionReady = "Ready"

	// ConditionReconciling (abnormal-true, kstatus): work for observedGeneration is in
	// progress, a retry is scheduled (ReasonProgressingWithRetry) or the generation waits for
	// a dependency (ReasonDependencyNotReady); False while suspended (ReasonSuspended).
	ConditionReconciling = "Reconciling"

	// ConditionStalled (abnormal-true, kstatus): a failure that will not be retried until the
	// spec changes, a dependency cycle, or drift the remediation policy does not correct (it
	// waits for a person). See docs/design/0006-suspend-and-kstatus.md.
	ConditionStalled = "Stalled"

	// ConditionDeletionBlocked (abnormal-true): the object is being deleted and its destroy
	// waits for the objects that consume it (spec.dependsOn, spec.bindingsFrom outputsRef,
	// LavaArchitectureDependency) to be gone first, at most the watcher's deletion wait
	// (ReasonConsumersExist; the message names them and the deadline). Absent when nothing
	// consumes the object; False with ReasonConsumersDestroyed, or ReasonDeletionWaitExpired
	// when the wait ran out and the destroy proceeded (the message names the consumers left).
	ConditionDeletionBlocked = "DeletionBlocked"

	// ConditionStateRegressed (abnormal-true): the state the current plan was made against
	// regressed since the last apply (no state, another lineage, an older serial, fewer
	// resources); reason ReasonStateRegressed, the message says what regressed. The plan has
	// an id of its own and needs its own approval whatever spec.approvePlan says
	// (docs/design/0025-lost-or-regressed-state.md). False with ReasonApplySucceeded once a
	// plan was applied again.
	ConditionStateRegressed = "StateRegressed"
)

// Condition reasons (CamelCase, as metav1.Condition requires). Failed events may carry other
// CamelCase reasons; these are the ones Lava's services use.
const (
	// ReasonProgressing: work for the generation is under way (Reconciling True, Ready False).
	ReasonProgressing = "Progressing"
	// ReasonProgressingWithRetry: a stage failed and will be retried (Reconciling True).
	ReasonProgressingWithRetry = "ProgressingWithRetry"
	// ReasonSucceeded: Ready True, or a condition cleared after success.
	ReasonSucceeded = "Succeeded"

	// ReasonSynthesisSucceeded: the source rendered.
	ReasonSynthesisSucceeded = "SynthesisSucceeded"
	// ReasonSynthesisFailed: the source did not parse or evaluate.
	ReasonSynthesisFailed = "SynthesisFailed"
	// ReasonSourceUnsupported: the source kind cannot be resolved (e.g. an unknown bundled name).
	ReasonSourceUnsupported = "SourceUnsupported"
	// ReasonSourceNotFound: the Flux source spec.sourceRef names does not exist, or the API
	// server does not serve its kind (Flux's source-controller is not installed);
	// DependenciesReady False, nothing is published until it appears (the watcher watches
	// the sources).
	ReasonSourceNotFound = "SourceNotFound"
	// ReasonSourceNotReady: the Flux source exists but has no artifact or is not Ready (the
	// message carries its Ready condition's message); DependenciesReady False until it is.
	ReasonSourceNotReady = "SourceNotReady"
	// ReasonSourceFetchFailed: synth could not fetch the source's artifact, its digest did not
	// match status.artifact.digest, or spec.path is not a file in it (Failed at stage
	// synthesis; a download error is retried, the others wait for a new revision or spec).
	ReasonSourceFetchFailed = "SourceFetchFailed"
	// ReasonGatePassed: the bindings satisfied the gate.
	ReasonGatePassed = "GatePassed"
	// ReasonGateRejected: the bindings failed the gate.
	ReasonGateRejected = "GateRejected"
	// ReasonPolicyRejected: the rendered architecture breaks the tenant policy (a provisioner,
	// a filesystem function, a provider outside the allow-list, ...; docs/security.md,
	// "Engines"), or the policy document cannot be read. From synth the message has
	// file:line:col; from the applier (stage plan) it names the resource, attribute and roots of
	// a provider file path the engine refused with the provider schemas
	// (docs/design/0022-file-access-from-schemas.md).
	ReasonPolicyRejected = "PolicyRejected"
	// ReasonProviderChecksumMismatch: a provider package's h1: hash is none of those the
	// object's dependency lock records for its version (recorded on first use; docs/security.md,
	// "Engines"), or a downloaded archive does not match the registry's signed SHA256SUMS or the
	// network mirror's hashes: the provider was not installed or started. Not retried.
	ReasonProviderChecksumMismatch = "ProviderChecksumMismatch"
	// ReasonProviderSignatureInvalid: a provider release's SHA256SUMS carries no valid OpenPGP
	// signature by a key its registry lists: the provider was not installed. Not retried.
	ReasonProviderSignatureInvalid = "ProviderSignatureInvalid"
	// ReasonProviderVersionNotFound: the registry or network mirror has the provider, but in no
	// version that meets the required_providers constraint for this platform; the message lists
	// the versions offered. Not retried (change the constraint).
	ReasonProviderVersionNotFound = "ProviderVersionNotFound"
	// ReasonProviderRegistryUnavailable: the provider registry or network mirror did not answer
	// (refused, TLS failure, HTTP 5xx, malformed answer); the message names the URL. Retried.
	ReasonProviderRegistryUnavailable = "ProviderRegistryUnavailable"
	// ReasonRBACForbidden: the identity the object acts with (its ServiceAccount, impersonated;
	// docs/security.md, "Kubernetes RBAC") may not read a ConfigMap or Secret of
	// spec.bindingsFrom or write the outputs Secret. The message names the ServiceAccount, the
	// verb and the object, never a value.
	ReasonRBACForbidden = "RBACForbidden"
	// ReasonServiceAccountRequired: the object names no spec.serviceAccountName, the
	// installation has no default ServiceAccount and does not allow Lava's own identity.
	ReasonServiceAccountRequired = "ServiceAccountRequired"
	// ReasonOutputsSecretNotOwned: the Secret "<name>-lava-outputs" exists and is not owned by
	// this LavaArchitecture (no ownerReference with its UID): the applier never overwrites it
	// (docs/security.md, "Kubernetes RBAC"). Rename the object or remove the Secret.
	ReasonOutputsSecretNotOwned = "OutputsSecretNotOwned"

	// ReasonPlanSucceeded: a plan was computed.
	ReasonPlanSucceeded = "PlanSucceeded"
	// ReasonPlanFailed: planning failed.
	ReasonPlanFailed = "PlanFailed"
	// ReasonApprovalRequired: the plan waits for approval (AwaitingApproval True).
	ReasonApprovalRequired = "ApprovalRequired"
	// ReasonApproved: no approval is pending (AwaitingApproval False).
	ReasonApproved = "Approved"

	// ReasonApplySucceeded: the plan was applied.
	ReasonApplySucceeded = "ApplySucceeded"
	// ReasonApplyFailed: applying failed.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonProviderUnavailable: a provider the architecture needs is not installed.
	ReasonProviderUnavailable = "ProviderUnavailable"
	// ReasonEngineUnavailable: the engine spec.engine names is not offered by the applier
	// (its CLI binary is not configured).
	ReasonEngineUnavailable = "EngineUnavailable"
	// ReasonPlanStale: the state changed since the plan was made; it is planned again.
	ReasonPlanStale = "PlanStale"
	// ReasonStepTimeout: an engine step (a plan, apply or destroy) ran past its timeout (the
	// applier's --plan-timeout, --apply-timeout, --destroy-timeout), such as a provider call
	// to an endpoint that never answers; the message names the step and the timeout (Failed,
	// retryable). An apply or destroy stopped so keeps what it did in the state.
	ReasonStepTimeout = "StepTimeout"
	// ReasonLocked: a stage found the resource's state locked by a live holder (Failed,
	// retryable). viggy retries the same attempt after a backoff without spending the retry
	// budget; a lock whose holder's lease is gone is taken over at once (docs/operations.md).
	ReasonLocked = "Locked"
	// ReasonPlanDenied: a plan rule of the namespace (the policy document's planRules)
	// denied the plan; nothing was applied (a Failed that is not retried; the message names the
	// rules and the addresses).
	ReasonPlanDenied = "PlanDenied"
	// ReasonPlanSuperseded: a newer generation replaced the plan (a Failed that is no
	// anomaly).
	ReasonPlanSuperseded = "PlanSuperseded"
	// ReasonRetriesExhausted: a stage failed viggy's maximum number of attempts; it stops
	// retrying (Stalled True).
	ReasonRetriesExhausted = "RetriesExhausted"
	// ReasonStalled: the resource made no progress (a PhaseChanged reason; Stalled True).
	ReasonStalled = "Stalled"

	// ReasonDriftDetected: drift found and recorded or held (Drifted True).
	ReasonDriftDetected = "DriftDetected"
	// ReasonReconverging: drift being corrected by a re-apply (Drifted True, Reconciling True).
	ReasonReconverging = "Reconverging"
	// ReasonNoDrift: the infrastructure matches the last apply (Drifted False).
	ReasonNoDrift = "NoDrift"

	// ReasonFinalizing: the object is being deleted.
	ReasonFinalizing = "Finalizing"
	// ReasonDestroyed: the infrastructure was destroyed (or orphaned); the finalizer goes next.
	ReasonDestroyed = "Destroyed"
	// ReasonDestroyFailed: destroying failed; the finalizer stays.
	ReasonDestroyFailed = "DestroyFailed"

	// ReasonSuspended: spec.suspend is true (Suspended True).
	ReasonSuspended = "Suspended"
	// ReasonResumed: spec.suspend is false again (Suspended False).
	ReasonResumed = "Resumed"

	// ReasonDependencyNotReady: a dependency has not reached its phase (DependenciesReady
	// False; the message names it).
	ReasonDependencyNotReady = "DependencyNotReady"
	// ReasonDependencyCycle: the dependencies form a cycle (DependenciesReady False; the message
	// lists it).
	ReasonDependencyCycle = "DependencyCycle"

	// ReasonConsumersExist: a deletion waits for the objects that consume the object
	// (DeletionBlocked True).
	ReasonConsumersExist = "ConsumersExist"

	// ReasonConsumersDestroyed: the objects a deletion waited for are gone (DeletionBlocked
	// False); the destroy proceeds.
	ReasonConsumersDestroyed = "ConsumersDestroyed"

	// ReasonDeletionWaitExpired: a deletion waited for its consumers as long as the watcher's
	// deletion wait allows and proceeds although they remain (DeletionBlocked False).
	ReasonDeletionWaitExpired = "DeletionWaitExpired"
	// ReasonCrossNamespaceRefRefused: a spec.dependsOn entry, spec.sourceRef or a
	// LavaArchitectureDependency crosses a namespace and the installation refuses such
	// references (the default; the watcher's --allow-cross-namespace-refs and the chart value
	// tenancy.allowCrossNamespaceRefs allow them); DependenciesReady False, the message names
	// each reference and nothing about its target.
	ReasonCrossNamespaceRefRefused = "CrossNamespaceRefRefused"
	// ReasonBindingSourceNotFound: a ConfigMap, Secret or LavaArchitecture named by
	// spec.bindingsFrom does not exist (DependenciesReady False, the message names it); nothing
	// new is rendered until it exists again.
	ReasonBindingSourceNotFound = "BindingSourceNotFound"
	// ReasonDependenciesSatisfied: every dependency reached its phase (DependenciesReady True).
	ReasonDependenciesSatisfied = "DependenciesSatisfied"

	// ReasonStateRegressed: the state is gone, or has fewer resources, an older serial or
	// another lineage than the last apply recorded (StateRegressed True). The plan against it
	// has an id of its own and needs its own approval, under approvePlan auto too.
	ReasonStateRegressed = "StateRegressed"
	// ReasonStateOrphaned: the state under this object's name was left by a deleted object
	// with deletionPolicy Orphan (Failed, not retried): the new object does not plan against
	// it until `lava state adopt NAMESPACE/NAME` (docs/operations.md).
	ReasonStateOrphaned = "StateOrphaned"
	// ReasonCreateInterrupted: an earlier apply of the embedded engine asked a provider to
	// create an object and died before saving the result, and the provider cannot look the
	// object up by a resource identity (Failed, not retried, raised as an anomaly): the object
	// may exist, so Lava does not create it again until `lava state forget-intent NAMESPACE/NAME
	// ADDRESS` (docs/operations.md, docs/design/0021).
	ReasonCreateInterrupted = "CreateInterrupted"
	// ReasonArtifactQuotaExceeded: the render would take its namespace past the bytes of
	// rendered Terraform JSON it may store in the shared artifact store within the collection
	// window (synth's --artifact-quota-bytes; Failed, retried: the message says when the
	// oldest render counted leaves the window).
	ReasonArtifactQuotaExceeded = "ArtifactQuotaExceeded"
	// ReasonOrphanLimitReached: the object's deletionPolicy is Orphan and its namespace
	// already keeps the most orphaned states the applier allows (--max-orphaned-states-per-
	// namespace): the deletion waits (Failed at stage DESTROY, retried; the finalizer stays)
	// until an orphaned state is adopted (`lava state adopt`) or the object's deletionPolicy
	// is changed to Destroy.
	ReasonOrphanLimitReached = "OrphanLimitReached"
	// ReasonSpecTooLarge: the object's ResourceObserved event (its spec mirror: the inline
	// source and the bindings) is larger than the bus takes (the NATS server's max_payload), so
	// the watcher cannot hand it to the pipeline (Failed, not retried until the spec changes;
	// the message gives the event's size, how far it is over and the limit).
	ReasonSpecTooLarge = "SpecTooLarge"
)
