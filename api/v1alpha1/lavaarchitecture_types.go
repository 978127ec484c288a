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
// are PascalCase strings; package internal/service/phase holds the transition table between them.
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
// +kubebuilder:validation:XValidation:rule="!(has(self.remediation) && has(self.remediationPolicyRef))",message="spec.remediation and spec.remediationPolicyRef are mutually exclusive: set at most one",fieldPath=".remediationPolicyRef"
// +kubebuilder:validation:XValidation:rule="!has(self.remediation) || !((has(self.remediation.cosmetic) && self.remediation.cosmetic == 'Escalate') || (has(self.remediation.functional) && self.remediation.functional == 'Escalate') || (has(self.remediation.critical) && self.remediation.critical == 'Escalate'))",message="spec.remediation: Escalate needs an escalation ladder; use spec.remediationPolicyRef to a RemediationPolicy with spec.escalation.tiers",fieldPath=".remediation"
type LavaArchitectureSpec struct {
	// source is where the architecture comes from: exactly one of inline, name or url.
	// +required
	Source Source `json:"source"`

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
	// object's data starts a new render (docs/design/live-bindings-bindings-and-outputs.md).
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
}

// Source is where an architecture comes from, upstream's flat shape: exactly one of inline,
// name or url (url with rev and path).
//
// +kubebuilder:validation:XValidation:rule="(has(self.inline) ? 1 : 0) + (has(self.name) ? 1 : 0) + (has(self.url) ? 1 : 0) == 1",message="spec.source: exactly one of spec.source.inline, spec.source.name or spec.source.url must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.url) || (has(self.rev) && has(self.path))",message="spec.source.url requires spec.source.rev and spec.source.path"
// +kubebuilder:validation:XValidation:rule="has(self.url) || !(has(self.rev) || has(self.path))",message="spec.source.rev and spec.source.path are only valid with spec.source.url"
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

	// url is a git repository holding the architecture; needs rev and path.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url,omitempty"`

	// rev is the git revision (commit, tag or branch) of url.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Rev string `json:"rev,omitempty"`

	// path is the .tlisp file inside the repository at rev.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Path string `json:"path,omitempty"`
}

// SourceKind names which field of [Source] is set.
// +kubebuilder:validation:Enum=inline;name;url
type SourceKind string

// The source kinds.
const (
	// SourceKindInline is spec.source.inline.
	SourceKindInline SourceKind = "inline"
	// SourceKindName is spec.source.name (a bundled architecture).
	SourceKindName SourceKind = "name"
	// SourceKindURL is spec.source.url with rev and path.
	SourceKindURL SourceKind = "url"
)

// Kind reports which source field is set, in upstream's precedence (inline, name, url), or ""
// when none is. Admission guarantees exactly one on objects read from the API server.
func (s Source) Kind() SourceKind {
	switch {
	case s.Inline != "":
		return SourceKindInline
	case s.Name != "":
		return SourceKindName
	case s.URL != "":
		return SourceKindURL
	}
	return ""
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
// internal/service/phase and patches the status subresource only when it changed.
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

	// lastAppliedAt is when the last apply finished.
	// +optional
	LastAppliedAt *metav1.Time `json:"lastAppliedAt,omitempty"`

	// receipt is the head of this object's receipt chain.
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

// PlanSummary summarizes a plan: its id and the number of resources to add, change and
// destroy.
type PlanSummary struct {
	// id is the plan id: BLAKE3 over the render digest, bindings digest, engine and provider
	// versions and the state serial and lineage. spec.approvePlan names it to approve it.
	// +optional
	ID string `json:"id,omitempty"`

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
