package arch

// Architecture is an evaluated deflava-architecture: everything Terraform JSON is rendered
// from. Resources and DataSources keep source order (loop expansion in list order).
type Architecture struct {
	// Name is the architecture's symbol ("anonymous" when the form has none).
	Name        string
	Resources   []Resource
	DataSources []Resource
	// Outputs maps an output name (verbatim, e.g. "vpc-id") to its value.
	Outputs   Map
	Providers []ProviderRef
	// Locals maps a local name (dashes already turned into underscores) to its value.
	Locals  Map
	Imports []Import
	// Modules are the :modules calls, in source order.
	Modules []ModuleCall
	// Variables, Moves, Removed and Checks are the :variables, :moved, :removed and :checks
	// entries, in source order.
	Variables []Variable
	Moves     []Move
	Removed   []Removed
	Checks    []Check
	// Bundle maps a bundled module directory ("modules/net") to that module's main.tf.json:
	// the module directories shipped with a bundled architecture that Modules (transitively)
	// call. The renderer fills it from the catalog and emits it under the document's "//"
	// property (docs/design/0017-modules-and-bundled-sources.md); the evaluator never sets it.
	Bundle map[string][]byte
	// Pos is where the deflava-architecture form starts (zero when built in code); KeyPos
	// optionally gives the position of an output or local by "output.NAME" or "local.NAME".
	// Diagnostics about what has no position of its own (the policy gate's) use them.
	Pos    Pos
	KeyPos map[string]Pos
	// Secret names, as "output.NAME" or "local.NAME", the outputs and locals whose value
	// interpolates a secret binding; SensitiveOutputs the outputs the source marks
	// (sensitive VALUE). The renderer marks an output sensitive when either holds or when it
	// references a resource, data source or local that derives from a secret binding.
	Secret           map[string]bool
	SensitiveOutputs map[string]bool
}

// Resource is one resource or data source block.
type Resource struct {
	// Type is the Terraform type, dashes turned into underscores ("aws_vpc").
	Type string
	// Name is the Terraform resource name after interpolation and sanitizing.
	Name string
	// Attributes in source order; keys already turned from kebab to snake case.
	Attributes Map
	// DependsOn lists explicit dependencies; rendered as "type.name" strings.
	DependsOn []ResourceRef
	// Provider, when set, selects a provider configuration (rendered "name.alias").
	Provider *ProviderRef
	// Count, when set, is rendered as the count meta-argument. At most one of Count and
	// ForEach is set.
	Count *int64
	// ForEach, when set, is rendered as the for_each meta-argument.
	ForEach *Map
	// Pos is where the resource form starts in the source (zero when built in code).
	Pos Pos
	// Secret tells that an attribute (or the for_each) interpolates a secret binding.
	Secret bool
}

// Address returns "type.name".
func (r *Resource) Address() string { return r.Type + "." + r.Name }

// ProviderRef is a provider configuration from :providers.
type ProviderRef struct {
	// Source is the registry source ("hashicorp/aws"); never rendered into the synthesized
	// JSON, but engines use it for required_providers.
	Source string
	// Name is the provider's local name, verbatim ("aws").
	Name string
	// Version is the version constraint (":version \"~> 6.0\"", "" for any); never rendered
	// into the synthesized JSON, like Source: synth passes it on with the source, and both
	// engines install only a version that meets it. The catalog tests validate against the
	// schema of the version it admits.
	Version string
	// Alias is the optional alias ("" when absent).
	Alias string
	// Config holds the other settings, keys turned from kebab to snake case.
	Config Map
	// Pos is where the provider form starts (zero when built in code).
	Pos Pos
}

// ModuleCall is a module block from :modules.
type ModuleCall struct {
	// Name is the call's name, verbatim (module.NAME).
	Name string
	// Source is the module's source: a local path ("./modules/net") names a module directory
	// bundled with the architecture; anything else is remote (which the tenant policy refuses
	// by default).
	Source string
	// Arguments are the module's input variables in source order; keys turned from kebab to
	// snake case.
	Arguments Map
	// Pos is where the module form starts (zero when built in code).
	Pos Pos
	// Secret tells that an argument interpolates a secret binding.
	Secret bool
}

// Import is a Terraform import block: To is the resource address, ID the provider's id.
type Import struct {
	To string
	ID string
}

// Variable is a Terraform variable block from :variables. Its value is always Default: the
// engines take no other input, so a variable names a value the engine checks (Type, every
// Validation) at plan. Default is a literal: no reference, no secret binding.
type Variable struct {
	// Name is the variable's name, verbatim (var.NAME).
	Name string
	// Type is the type constraint as Terraform writes it ("string", "list(string)"); "" when
	// absent.
	Type string
	// Default is the value, rendered as a JSON literal (the engines read a variable's default
	// in Terraform JSON without template interpretation).
	Default     Value
	Description string
	// Validations are the validation rules, in source order.
	Validations []Rule
	// Pos is where the variable form starts (zero when built in code).
	Pos Pos
}

// Rule is a check block's assert or a variable's validation: Condition is a Terraform
// expression written as a template ("${...}"), ErrorMessage a template.
type Rule struct {
	Condition, ErrorMessage Value
}

// Check is a Terraform check block from :checks: its assertions are evaluated at plan and
// apply, and a failed one is a warning, never an error.
type Check struct {
	// Name is the check's name, verbatim (check.NAME).
	Name    string
	Asserts []Rule
	// Pos is where the check form starts (zero when built in code).
	Pos Pos
}

// Move is a Terraform moved block: the object From named in the state is To's from now on
// ("terraform_data.a" to "terraform_data.b", "module.a" to "module.b").
type Move struct {
	From, To string
}

// Removed is a Terraform removed block: From (a resource or module call address, no
// instance keys) leaves the state; its objects are destroyed only when Destroy is set.
type Removed struct {
	From    string
	Destroy bool
}
