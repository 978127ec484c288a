package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Engine names the engine that plans and applies a LavaArchitecture's Terraform JSON
// (docs/architecture.md section 5).
// +kubebuilder:validation:Enum=embedded;tofu;terraform
type Engine string

// The engines.
const (
	// EngineEmbedded is the in-process engine speaking the Terraform provider protocol (default).
	EngineEmbedded Engine = "embedded"
	// EngineTofu shells out to OpenTofu.
	EngineTofu Engine = "tofu"
	// EngineTerraform shells out to HashiCorp Terraform.
	EngineTerraform Engine = "terraform"
)

// DeletionPolicy says what happens to the real infrastructure when its LavaArchitecture is
// deleted.
// +kubebuilder:validation:Enum=Destroy;Orphan
type DeletionPolicy string

// The deletion policies.
const (
	// DeletionPolicyDestroy destroys every resource the architecture manages (default).
	DeletionPolicyDestroy DeletionPolicy = "Destroy"
	// DeletionPolicyOrphan leaves the infrastructure and its state in place.
	DeletionPolicyOrphan DeletionPolicy = "Orphan"
)

// Plan approval values of [LavaArchitectureSpec.ApprovePlan]; any other value is a plan id.
const (
	// ApprovePlanAuto applies every plan without waiting (default).
	ApprovePlanAuto = "auto"
	// ApprovePlanManual applies no plan until spec.approvePlan names its id.
	ApprovePlanManual = "manual"
)

// DefaultDriftInterval is spec.driftInterval when unset: 5 minutes, written as metav1.Duration
// prints it ("5m0s") so that a typed client round-trip does not change the spec (and the generation).
const DefaultDriftInterval = "5m0s"

// Phase is where a LavaArchitecture is in its lifecycle (docs/dialect.md section 5.4). The values
// are PascalCase strings; package internal/pipeline holds the transition table between them.
type Phase string

// The phases. The zero value "" means no event has been folded into the status yet and is read
// as [PhasePending].
const (
	// PhasePending: a generation was observed; synthesis has not finished.
	PhasePending Phase = "Pending"
	// PhaseSynthesized: the source rendered to Terraform JSON and passed its gate.
	PhaseSynthesized Phase = "Synthesized"
	// PhasePlanned: a plan exists for the rendered JSON (and may await approval).
	PhasePlanned Phase = "Planned"
	// PhaseApplied: the plan was applied and the infrastructure matches the spec.
	PhaseApplied Phase = "Applied"
	// PhaseDrifted: drift was found and is recorded or held (not being corrected).
	PhaseDrifted Phase = "Drifted"
	// PhaseReconverging: drift is being corrected by a re-apply.
	PhaseReconverging Phase = "Reconverging"
	// PhaseFinalizing: the object is being deleted; destroy (or orphaning) is in progress.
	PhaseFinalizing Phase = "Finalizing"
	// PhaseFailed: a stage failed; see the Ready and Stalled conditions for why and whether a
	// retry will come.
	PhaseFailed Phase = "Failed"
)

// LavaArchitecture is a piece of infrastructure described by a tatara-lisp architecture and its
// bindings, synthesized to Terraform JSON and applied by one of Lava's engines.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lava
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Ready condition status"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,description="Lifecycle phase"
// +kubebuilder:printcolumn:name="Engine",type=string,JSONPath=`.spec.engine`,description="Engine that plans and applies"
// +kubebuilder:printcolumn:name="Resources",type=integer,JSONPath=`.status.render.resourceCount`,description="Resources in the last render"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,description="Ready condition message",priority=0
// +kubebuilder:validation:XValidation:rule="!has(self.spec.dependsOn) || self.spec.dependsOn.all(d, d.name != self.metadata.name || has(d.__namespace__))",message="spec.dependsOn must not name the LavaArchitecture itself",fieldPath=".spec.dependsOn"
type LavaArchitecture struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired infrastructure.
	// +required
	Spec LavaArchitectureSpec `json:"spec"`

	// status is what Lava observed and did, written only by the watcher.
	// +optional
	Status LavaArchitectureStatus `json:"status,omitempty"`
}

// LavaArchitectureSpec is the desired state: upstream's fields (source, bindings, gate,
// engine) plus Lava's additive ones.
//
// +kubebuilder:validation:XValidation:rule="has(self.source) != has(self.sourceRef)",message="spec: exactly one of spec.source and spec.sourceRef must be set",fieldPath=".sourceRef"
// +kubebuilder:validation:XValidation:rule="has(self.sourceRef) == has(self.path)",message="spec.path is required with spec.sourceRef and only valid with it",fieldPath=".path"
// +kubebuilder:validation:XValidation:rule="!(has(self.remediation) && has(self.remediationPolicyRef))",message="spec.remediation and spec.remediationPolicyRef are mutually exclusive: set at most one",fieldPath=".remediationPolicyRef"
// +kubebuilder:validation:XValidation:rule="!has(self.remediation) || !((has(self.remediation.cosmetic) && self.remediation.cosmetic == 'Escalate') || (has(self.remediation.functional) && self.remediation.functional == 'Escalate') || (has(self.remediation.critical) && self.remediation.critical == 'Escalate'))",message="spec.remediation: Escalate needs an escalation ladder; use spec.remediationPolicyRef to a RemediationPolicy with spec.escalation.tiers",fieldPath=".remediation"
type LavaArchitectureSpec struct {
	// source is where the architecture comes from: inline text or a bundled name. Exactly one
	// of source and sourceRef is set.
	// +optional
	Source Source `json:"source,omitzero"`

	// sourceRef names a Flux source (source.toolkit.fluxcd.io/v1 GitRepository, OCIRepository
	// or Bucket) whose artifact holds the architecture at spec.path. Each new artifact revision
	// is a new render and plan (docs/design/0013-flux-sources.md).
	// +optional
	SourceRef *SourceReference `json:"sourceRef,omitempty"`

	// path is the .tlisp file inside the sourceRef's artifact, relative to its root
	// ("infra/vpc.tlisp"); only with sourceRef.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(s, s == '..')",message="spec.path must be relative to the artifact's root and must not contain '..'"
	Path string `json:"path,omitempty"`

	// bindings are scalar input bindings, name to value. They override every bindingsFrom
	// entry.
	// +optional
	Bindings map[string]string `json:"bindings,omitempty"`

	// listBindings are list-valued input bindings, name to a list of strings.
	// +optional
	ListBindings map[string][]string `json:"listBindings,omitempty"`

	// recordBindings are record-list input bindings (for record loops), name to a list of rows,
	// each row a map of field name to value.
	// +optional
	RecordBindings map[string][]map[string]string `json:"recordBindings,omitempty"`

	// bindingsFrom reads scalar bindings from ConfigMaps, Secrets and other LavaArchitectures'
	// outputs in the object's namespace. Without a key every key of the object becomes a
	// binding; with a key only that one. Later entries override earlier ones. Secret values
	// and sensitive outputs never appear in status, events or logs. A change of a referenced
	// object's data starts a new render (docs/design/0016-live-bindings-and-outputs.md).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	BindingsFrom []BindingsSource `json:"bindingsFrom,omitempty"`

	// gate names a bundled typed Interface the bindings must satisfy before rendering.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Gate string `json:"gate,omitempty"`

	// engine plans and applies the rendered Terraform JSON: embedded, tofu or terraform.
	// +optional
	// +kubebuilder:default=embedded
	Engine Engine `json:"engine,omitempty"`

	// driftInterval is how often drift is scanned after an apply, as a Go duration string
	// ("5m", "1h30m"). Default 5m, minimum 30s. Scans are jittered.
	// +optional
	// +kubebuilder:default="5m0s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s')",message="spec.driftInterval must be at least 30s"
	DriftInterval *metav1.Duration `json:"driftInterval,omitempty"`

	// suspend stops Lava from starting new work for this object (condition Suspended). Work in
	// flight finishes; deletion still proceeds.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// deletionPolicy says what deleting this object does to the infrastructure: Destroy
	// (default) or Orphan.
	// +optional
	// +kubebuilder:default=Destroy
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// remediation is the action per drift severity. Mutually exclusive with
	// remediationPolicyRef; without either the default policy applies (cosmetic Alert,
	// functional AutoCorrect, critical RequireApproval).
	// +optional
	Remediation *DriftRemediation `json:"remediation,omitempty"`

	// remediationPolicyRef names a RemediationPolicy in the object's namespace.
	// +optional
	RemediationPolicyRef *LocalObjectReference `json:"remediationPolicyRef,omitempty"`

	// dependsOn lists other LavaArchitectures and the phase each must reach before this one is
	// synthesized.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	DependsOn []Dependency `json:"dependsOn,omitempty"`

	// approvePlan is "auto" (default: apply every plan), "manual" (apply nothing until
	// approved) or the id of the plan to apply (status.plan.id).
	// +optional
	// +kubebuilder:default=auto
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._:-]*$`
	ApprovePlan string `json:"approvePlan,omitempty"`

	// serviceAccountName is the ServiceAccount, in the object's namespace, that synth and the
	// applier impersonate to read spec.bindingsFrom and to write the outputs Secret, so the
	// tenant's own RBAC decides what the object may reach (docs/security.md, "Kubernetes
	// RBAC"). Empty: the installation's --default-service-account, else Lava's own identity
	// when the admin allows it.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// providerEnvFrom gives the object's providers (and tofu) environment variables from
	// Secrets in the object's namespace, read as the object's ServiceAccount (so its RBAC
	// decides): every key of the Secret, or only key. Keys must be variable names; PATH, HOME,
	// TMPDIR, TF_* and the workload-identity variables are Lava's. The values never appear in
	// status, events or logs (docs/security.md, "Engines").
	// +optional
	// +kubebuilder:validation:MaxItems=16
	ProviderEnvFrom []ProviderEnvSource `json:"providerEnvFrom,omitempty"`
}

// ProviderEnvSource is one source of provider environment variables.
type ProviderEnvSource struct {
	// secretRef names the Secret (and optionally one key of it).
	// +required
	SecretRef ObjectKeyReference `json:"secretRef"`
}

// Source is where an architecture comes from, upstream's flat shape: exactly one of inline or
// name. (Upstream's url, rev and path are not offered: a git repository is read through a Flux
// GitRepository named by spec.sourceRef.)
//
// +kubebuilder:validation:XValidation:rule="(has(self.inline) ? 1 : 0) + (has(self.name) ? 1 : 0) == 1",message="spec.source: exactly one of spec.source.inline or spec.source.name must be set (a git repository: spec.sourceRef to a Flux GitRepository)"
type Source struct {
	// inline is tatara-lisp source text holding one deflava-architecture form.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=262144
	Inline string `json:"inline,omitempty"`

	// name is the name of a bundled architecture (`lava catalog`).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

// SourceKind names where a render's source came from.
// +kubebuilder:validation:Enum=inline;name;sourceRef
type SourceKind string

// The source kinds.
const (
	// SourceKindInline is spec.source.inline.
	SourceKindInline SourceKind = "inline"
	// SourceKindName is spec.source.name (a bundled architecture).
	SourceKindName SourceKind = "name"
	// SourceKindSourceRef is spec.sourceRef with spec.path (a Flux source's artifact).
	SourceKindSourceRef SourceKind = "sourceRef"
)

// Kind reports which source field is set, in upstream's precedence (inline, name), or "" when
// none is. [LavaArchitectureSpec.SourceKind] also knows spec.sourceRef.
func (s Source) Kind() SourceKind {
	switch {
	case s.Inline != "":
		return SourceKindInline
	case s.Name != "":
		return SourceKindName
	}
	return ""
}

// SourceKind reports where the spec's architecture comes from: spec.source's kind, else
// [SourceKindSourceRef] when spec.sourceRef is set, else "".
func (s LavaArchitectureSpec) SourceKind() SourceKind {
	if k := s.Source.Kind(); k != "" {
		return k
	}
	if s.SourceRef != nil {
		return SourceKindSourceRef
	}
	return ""
}

// The Flux source kinds spec.sourceRef may name (group source.toolkit.fluxcd.io, version v1).
const (
	// SourceRefGitRepository is a Flux GitRepository.
	SourceRefGitRepository = "GitRepository"
	// SourceRefOCIRepository is a Flux OCIRepository.
	SourceRefOCIRepository = "OCIRepository"
	// SourceRefBucket is a Flux Bucket.
	SourceRefBucket = "Bucket"
)

// SourceReference names a Flux source object whose artifact holds the architecture.
type SourceReference struct {
	// apiVersion of the source; only source.toolkit.fluxcd.io/v1 is served.
	// +optional
	// +kubebuilder:default="source.toolkit.fluxcd.io/v1"
	// +kubebuilder:validation:Enum="source.toolkit.fluxcd.io/v1"
	APIVersion string `json:"apiVersion,omitempty"`

	// kind of the source: GitRepository, OCIRepository or Bucket.
	// +required
	// +kubebuilder:validation:Enum=GitRepository;OCIRepository;Bucket
	Kind string `json:"kind"`

	// name of the source.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// namespace of the source; default the LavaArchitecture's own. Another namespace is
	// refused unless the installation allows cross-namespace references (watcher
	// --allow-cross-namespace-refs; docs/security.md).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// BindingsSource is one bindingsFrom entry: exactly one of configMapRef, secretRef or
// outputsRef.
//
// +kubebuilder:validation:XValidation:rule="(has(self.configMapRef) ? 1 : 0) + (has(self.secretRef) ? 1 : 0) + (has(self.outputsRef) ? 1 : 0) == 1",message="spec.bindingsFrom[]: exactly one of configMapRef, secretRef or outputsRef must be set"
type BindingsSource struct {
	// configMapRef reads bindings from a ConfigMap.
	// +optional
	ConfigMapRef *ObjectKeyReference `json:"configMapRef,omitempty"`

	// secretRef reads bindings from a Secret.
	// +optional
	SecretRef *ObjectKeyReference `json:"secretRef,omitempty"`

	// outputsRef reads bindings from the Terraform outputs of another LavaArchitecture in the
	// same namespace (there is no namespace field: a reference never crosses a namespace):
	// non-sensitive outputs from its status.outputs, sensitive ones from its outputs Secret.
	// It implies a dependsOn entry on that object with phase Applied.
	// +optional
	OutputsRef *ObjectKeyReference `json:"outputsRef,omitempty"`
}

// ObjectKeyReference names an object in the referring object's namespace and, optionally, one
// key of its data.
type ObjectKeyReference struct {
	// name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key of the object's data; empty means every key.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// LocalObjectReference names an object in the referring object's namespace.
type LocalObjectReference struct {
	// name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Dependency is one dependsOn entry: another LavaArchitecture and the phase it must reach.
type Dependency struct {
	// name of the LavaArchitecture depended on.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// namespace of the LavaArchitecture depended on; default the depending object's own.
	// Another namespace is refused unless the installation allows cross-namespace references
	// (watcher --allow-cross-namespace-refs; docs/security.md).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// phase the dependency must reach: Synthesized, Planned or Applied (default).
	// +optional
	// +kubebuilder:default=Applied
	// +kubebuilder:validation:Enum=Synthesized;Planned;Applied
	Phase Phase `json:"phase,omitempty"`
}

// LavaArchitectureStatus is what Lava observed and did. The watcher computes it with
// internal/pipeline and patches the status subresource only when it changed.
type LavaArchitectureStatus struct {
	// phase is the lifecycle phase.
	// +optional
	// +kubebuilder:validation:Enum=Pending;Synthesized;Planned;Applied;Drifted;Reconverging;Finalizing;Failed
	Phase Phase `json:"phase,omitempty"`

	// observedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are the latest observations: Synthesized, Gated, Planned, Applied, Drifted,
	// DependenciesReady, Suspended, AwaitingApproval and the kstatus Ready, Reconciling and
	// Stalled (condition_types.go).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// render records the last successful synthesis.
	// +optional
	Render *RenderRecord `json:"render,omitempty"`

	// plan summarizes the last plan.
	// +optional
	Plan *PlanSummary `json:"plan,omitempty"`

	// outputs are the non-sensitive Terraform outputs of the last apply, name to JSON value.
	// Sensitive outputs are only in the Secret named by outputsSecret.
	// +optional
	Outputs map[string]apiextensionsv1.JSON `json:"outputs,omitempty"`

	// outputsSecret names the Secret (`<name>-lava-outputs`) holding the sensitive outputs.
	// +optional
	OutputsSecret string `json:"outputsSecret,omitempty"`

	// lastAppliedRevision is the spec.sourceRef artifact revision of the last apply (the
	// render.sourceRevision that was applied); empty for other sources.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	LastAppliedRevision string `json:"lastAppliedRevision,omitempty"`

	// lastAppliedAt is when the last apply finished.
	// +optional
	LastAppliedAt *metav1.Time `json:"lastAppliedAt,omitempty"`

	// receipt is the head of this object's receipt chain as of the last status write: a new
	// head rides on the next status write and never causes one of its own, so the receipt of
	// the last transition (usually APPLIED) shows with the next change; `lava receipts show`
	// reads the chain itself.
	// +optional
	Receipt *ReceiptHead `json:"receipt,omitempty"`
}

// RenderRecord identifies a synthesis (docs/dialect.md section 2.5). Digests are lowercase hex
// BLAKE3-256 (64 characters); secret-backed bindings enter bindingsDigest through a keyed hash,
// so the digest reveals no secret.
type RenderRecord struct {
	// sourceKind is which spec.source field was rendered.
	// +optional
	SourceKind SourceKind `json:"sourceKind,omitempty"`

	// sourceDigest is BLAKE3 of the resolved source text.
	// +optional
	SourceDigest string `json:"sourceDigest,omitempty"`

	// sourceRevision is the revision of the spec.sourceRef artifact that was rendered, as the
	// Flux source reports it ("main@sha1:<commit>"); empty for other sources.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	SourceRevision string `json:"sourceRevision,omitempty"`

	// bindingsDigest is BLAKE3 of the canonical (RFC 8785) JSON of the effective bindings.
	// +optional
	BindingsDigest string `json:"bindingsDigest,omitempty"`

	// gate is the Interface the bindings passed; empty when none was configured.
	// +optional
	Gate string `json:"gate,omitempty"`

	// architectureName is the name in the deflava-architecture form.
	// +optional
	ArchitectureName string `json:"architectureName,omitempty"`

	// resourceCount is the number of resources in the rendered Terraform JSON.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ResourceCount int32 `json:"resourceCount"`

	// terraformJSONDigest is BLAKE3 of the RFC 8785 (JCS) form of the rendered Terraform JSON;
	// the artifact store holds the JSON under this digest.
	// +optional
	TerraformJSONDigest string `json:"terraformJSONDigest,omitempty"`

	// evaluatorVersion is the version of the tatara-lisp evaluator that rendered.
	// +optional
	EvaluatorVersion string `json:"evaluatorVersion,omitempty"`
}

// MaxStatusPlanResources bounds [PlanSummary.Resources]: a plan of any size keeps the status
// small; resourcesOmitted counts the rest, and `lava plan show NS/NAME` prints them all.
const MaxStatusPlanResources = 50

// PlanSummary summarizes a plan: its id, the number of resources to add, change and
// destroy, and the planned action per resource address.
type PlanSummary struct {
	// id is the plan id: BLAKE3 over the render digest, bindings digest, engine and provider
	// versions, the state serial, lineage and digest, and the planned action per resource
	// address (internal/engine.PlanID). spec.approvePlan names it to approve it
	// (`lava approve NS/NAME`).
	// +optional
	ID string `json:"id,omitempty"`

	// resources are the planned actions per resource address, in address order, no-ops
	// left out; at most 50 (MaxStatusPlanResources), resourcesOmitted counts the rest.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Resources []PlannedResource `json:"resources,omitempty"`

	// resourcesOmitted is the number of changing resources not listed in resources.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ResourcesOmitted int32 `json:"resourcesOmitted,omitempty"`

	// add is the number of resources to create.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Add int32 `json:"add,omitempty"`

	// change is the number of resources to update in place.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Change int32 `json:"change,omitempty"`

	// destroy is the number of resources to delete (a replace counts here and in add).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Destroy int32 `json:"destroy,omitempty"`
}

// PlannedResource is the planned action of one resource instance.
type PlannedResource struct {
	// address is the instance address ("local_file.a", "aws_subnet.s[0]").
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Address string `json:"address"`

	// action is what the plan does to it: create, update, delete, replace or read.
	// +required
	// +kubebuilder:validation:Enum=create;update;delete;replace;read
	Action string `json:"action"`
}

// ReceiptHead is the newest receipt of an object's chain (docs/architecture.md section 6).
type ReceiptHead struct {
	// sequence of the newest receipt, from 0.
	// +required
	// +kubebuilder:validation:Minimum=0
	Sequence int64 `json:"sequence"`

	// hash is the newest receipt's contentHash, lowercase hex.
	// +required
	// +kubebuilder:validation:MinLength=1
	Hash string `json:"hash"`
}

// LavaArchitectureList is a list of [LavaArchitecture].
//
// +kubebuilder:object:root=true
type LavaArchitectureList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LavaArchitecture `json:"items"`
}
