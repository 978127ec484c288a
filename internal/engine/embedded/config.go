package embedded

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/providers"
	"github.com/lava-operator/lava/internal/lang/hclnest"
)

// configFilename names the rendered configuration in diagnostics ("main.tf.json:3,17").
const configFilename = "main.tf.json"

// Config is a parsed Terraform JSON configuration (hashicorp/hcl/v2/json): providers,
// variables, locals, resources, data sources, outputs, import blocks.
type Config struct {
	// Providers maps "local" or "local.alias" to the provider block's body.
	Providers map[string]hcl.Body
	// providerHash digests the configuration's provider blocks (the provider pool's key).
	providerHash string
	// Resources are the managed resources and data sources, ordered by address.
	Resources []*ResourceConfig
	// Locals are the local values' expressions.
	Locals map[string]hcl.Expression
	// Variables are the input variables by name.
	Variables map[string]*VariableConfig
	// Outputs are the output blocks by name.
	Outputs map[string]*OutputConfig
	// Requirements are terraform.required_providers by local name.
	Requirements map[string]ProviderRequirement
	// Moves are the moved blocks; Removed the removed blocks by resource address.
	Moves   []Move
	Removed map[string]*RemovedConfig
	// Imports are the import blocks, by target address.
	Imports []*ImportConfig
	// Modules are the module calls by name; Checks the check blocks by name.
	Modules map[string]*ModuleCall
	Checks  []*CheckConfig
	// Dir is the module's directory in the bundle ("" for the root, "modules/net").
	Dir string
	// root is the module instance tree of a flattened configuration ([flatten]); nil for
	// a parsed one.
	root *modScope
	// protected are resource addresses with prevent_destroy from the configuration a
	// destroy was asked with (its resources are not planned).
	protected map[string]bool
	// doc is the rendered document the configuration was parsed from (by the engine, which
	// checks its file paths: [engine.FileAccess]); nil for one parsed elsewhere.
	doc []byte
}

// OutputConfig is one output block.
type OutputConfig struct {
	Value         hcl.Expression
	Sensitive     bool
	Preconditions []*CheckRule
}

// VariableConfig is one variable block. Values come from Default only (the embedded engine
// takes no -var input).
type VariableConfig struct {
	Name string
	// Type is the type constraint (cty.DynamicPseudoType when absent); Defaults its
	// optional attributes' defaults.
	Type     cty.Type
	Defaults *typeexpr.Defaults
	// Default is the default value (cty.NilVal when absent).
	Default     cty.Value
	Sensitive   bool
	Nullable    bool
	Validations []*CheckRule
}

// CheckRule is a precondition, postcondition or variable validation.
type CheckRule struct {
	Condition, ErrorMessage hcl.Expression
}

// Move is a moved block between two addresses of the same kind: resources
// ("terraform_data.a" to "module.m.terraform_data.b"), resource instances
// ("terraform_data.a[0]" to `terraform_data.a["k"]`) or module calls and instances
// ("module.a" to "module.b", "module.a[0]" to `module.a["k"]`). Data sources are not moved,
// as in Terraform.
type Move struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// RemovedConfig is a removed block: the resource or module call (From, no instance keys, as
// tofu requires), gone from the configuration, leaves the state; with Destroy (lifecycle {
// destroy = true }) its objects are destroyed, otherwise they are kept and only forgotten.
type RemovedConfig struct {
	From    string
	Destroy bool
}

// ImportConfig is one import block: the object with ID becomes To's state.
type ImportConfig struct {
	// To is the target resource instance address ("local_file.a", `x.y["k"]`).
	To string
	// Res is To's resource address; Key its instance key.
	Res string
	Key instanceKey
	ID  hcl.Expression
}

// ResourceConfig is one resource or data block.
type ResourceConfig struct {
	// Mode is "managed" or "data".
	Mode       string
	Type, Name string
	// Body is the block's arguments and nested blocks, meta-arguments removed.
	Body hcl.Body
	// Count and ForEach are the meta-arguments' expressions (nil when absent).
	Count, ForEach hcl.Expression
	// ProviderKey is the provider configuration it uses: "local" or "local.alias".
	ProviderKey string
	// DependsOn are explicit dependencies (configuration addresses).
	DependsOn []string
	// CreateBeforeDestroy is lifecycle.create_before_destroy.
	CreateBeforeDestroy bool
	// PreventDestroy is lifecycle.prevent_destroy: a plan that destroys or replaces an
	// instance fails.
	PreventDestroy bool
	// IgnoreChanges are the lifecycle.ignore_changes paths; IgnoreAll is ignore_changes = all.
	IgnoreChanges []cty.Path
	IgnoreAll     bool
	// ReplaceTriggeredBy are lifecycle.replace_triggered_by's references.
	ReplaceTriggeredBy []hcl.Expression
	// Preconditions and Postconditions are the lifecycle's condition blocks.
	Preconditions, Postconditions []*CheckRule
	// refs are every reference in the block, meta-arguments included.
	refs []hcl.Traversal
	// Module is the module instance holding the resource in a flattened configuration
	// (`module.a["k"].module.b`; "" for the root); scope is that instance.
	Module string
	scope  *modScope
}

// Address is "type.name" or "data.type.name", after the module instance path when the
// resource is in a module ("module.a[0].type.name").
func (r *ResourceConfig) Address() string {
	a := r.Type + "." + r.Name
	if r.Mode == "data" {
		a = "data." + a
	}
	if r.Module != "" {
		return r.Module + "." + a
	}
	return a
}

// ProviderLocalName is the provider's local name ("local" for "local.alias").
func (r *ResourceConfig) ProviderLocalName() string {
	n, _, _ := strings.Cut(r.ProviderKey, ".")
	return n
}

var rootSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: "terraform"},
	{Type: "provider", LabelNames: []string{"name"}},
	{Type: "variable", LabelNames: []string{"name"}},
	{Type: "locals"},
	{Type: "output", LabelNames: []string{"name"}},
	{Type: "resource", LabelNames: []string{"type", "name"}},
	{Type: "data", LabelNames: []string{"type", "name"}},
	{Type: "import"},
	{Type: "module", LabelNames: []string{"name"}},
	{Type: "moved"},
	{Type: "removed"},
	{Type: "check", LabelNames: []string{"name"}},
}}

// rootOnlyBlocks are the blocks the embedded engine takes only in the root module, with the
// reason it refuses them in a module.
var rootOnlyBlocks = map[string]string{
	"provider": "configure providers in the root module (modules inherit them)",
	"import":   "import blocks belong in the root module (as in tofu)",
	"moved":    "the embedded engine takes moved blocks only in the root module (name the module's addresses from there)",
	"removed":  "the embedded engine takes removed blocks only in the root module (name the module's addresses from there)",
}

// ParseConfig parses rendered Terraform JSON with hcl/v2's JSON syntax, with the modules
// bundled in it ([engine.BundleKey]). Unknown top-level keys are errors, as are the blocks the
// embedded engine does not support (the error names the block and the reason). Errors carry
// the JSON's line:col ("main.tf.json:3,17"; "modules/net/main.tf.json:2,5" in a module).
func ParseConfig(rendered []byte) (*Config, error) {
	bundle, err := engine.ReadBundle(rendered)
	if err != nil {
		return nil, err
	}
	cfg, err := parseModule(rendered, "", bundle, nil)
	if err != nil {
		return nil, err
	}
	cfg.providerHash = providerHash(rendered)
	return cfg, nil
}

// parseModule parses one module's document; dir is its directory in the bundle ("" for the
// root), stack the directories of the modules calling it (a module calling itself is an
// error).
func parseModule(doc []byte, dir string, bundle map[string][]byte, stack []string) (*Config, error) {
	filename := configFilename
	if dir != "" {
		filename = dir + "/" + configFilename
	}
	if err := checkDocument(doc, filename); err != nil {
		return nil, err
	}
	f, diags := hcljson.Parse(doc, filename)
	if diags.HasErrors() {
		return nil, diagError("parse terraform json", diags)
	}
	content, diags := f.Body.Content(rootSchema)
	if diags.HasErrors() {
		return nil, diagError("parse terraform json", diags)
	}
	cfg := &Config{Providers: map[string]hcl.Body{}, Locals: map[string]hcl.Expression{},
		Variables: map[string]*VariableConfig{}, Outputs: map[string]*OutputConfig{}, Dir: dir}
	for _, blk := range content.Blocks {
		if why, ok := rootOnlyBlocks[blk.Type]; ok && dir != "" {
			return nil, fmt.Errorf("%s: %s block in module %s: %s", rangeText(blk.DefRange), blk.Type, dir, why)
		}
		var err error
		switch blk.Type {
		case "terraform":
			err = cfg.parseTerraform(blk)
		case "provider":
			err = cfg.parseProvider(blk)
		case "variable":
			err = cfg.parseVariable(blk)
		case "locals":
			attrs, diags := blk.Body.JustAttributes()
			if diags.HasErrors() {
				return nil, diagError("locals", diags)
			}
			for name, a := range attrs {
				if _, dup := cfg.Locals[name]; dup {
					return nil, fmt.Errorf("%s: local.%s declared twice", rangeText(a.NameRange), name)
				}
				cfg.Locals[name] = a.Expr
			}
		case "output":
			err = cfg.parseOutput(blk)
		case "resource", "data":
			mode := "managed"
			if blk.Type == "data" {
				mode = "data"
			}
			var rc *ResourceConfig
			if rc, err = parseResource(mode, blk); err == nil {
				cfg.Resources = append(cfg.Resources, rc)
			}
		case "import":
			err = cfg.parseImport(blk)
		case "moved":
			err = cfg.parseMoved(blk)
		case "removed":
			err = cfg.parseRemoved(blk)
		case "module":
			err = cfg.parseModuleCall(blk, bundle, append(stack, dir))
		case "check":
			err = cfg.parseCheck(blk)
		}
		if err != nil {
			return nil, err
		}
	}
	sort.Slice(cfg.Resources, func(i, j int) bool { return cfg.Resources[i].Address() < cfg.Resources[j].Address() })
	seen := map[string]bool{}
	for _, rc := range cfg.Resources {
		if seen[rc.Address()] {
			return nil, fmt.Errorf("%s declared twice", rc.Address())
		}
		seen[rc.Address()] = true
	}
	for _, m := range cfg.Moves {
		// Whole root resources are checked here; addresses in modules and instances when
		// the configuration is expanded ([flatten]).
		if strings.HasPrefix(m.From, "module.") || strings.HasPrefix(m.To, "module.") || strings.Contains(m.From+m.To, "[") {
			continue
		}
		if seen[m.From] {
			return nil, fmt.Errorf("moved: %s is still declared: a moved block's from must no longer be in the configuration", m.From)
		}
		if !seen[m.To] {
			return nil, fmt.Errorf("moved: %s is not declared: a moved block's to must be in the configuration", m.To)
		}
	}
	for from := range cfg.Removed {
		if seen[from] {
			return nil, fmt.Errorf("removed: %s is still declared: remove its resource block too", from)
		}
		if name, ok := strings.CutPrefix(from, "module."); ok && !strings.Contains(name, ".") && cfg.Modules[name] != nil {
			return nil, fmt.Errorf("removed: %s is still declared: remove its module block too", from)
		}
	}
	return cfg, nil
}

// providerHash digests the "provider" section of the document: the provider pool reuses a
// configured provider process only for the same configuration.
func providerHash(rendered []byte) string {
	var doc struct {
		Provider json.RawMessage `json:"provider"`
	}
	_ = json.Unmarshal(rendered, &doc)
	sum := sha256.Sum256(doc.Provider)
	return hex.EncodeToString(sum[:])
}

// ProviderRequirement is one entry of terraform.required_providers.
type ProviderRequirement struct {
	// Source is the provider's source address ("hashicorp/local"; "" for the default).
	Source string
	// Version is the version constraint ("~> 1.4"; "" for any).
	Version string
}

var terraformSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "required_providers"}}}

// parseTerraform reads required_providers (source and version constraints); the rest of the
// terraform block (backend, required_version) belongs to the engines and is ignored.
func (c *Config) parseTerraform(blk *hcl.Block) error {
	content, _, diags := blk.Body.PartialContent(terraformSchema)
	if diags.HasErrors() {
		return diagError("terraform", diags)
	}
	for _, rp := range content.Blocks {
		attrs, diags := rp.Body.JustAttributes()
		if diags.HasErrors() {
			return diagError("terraform.required_providers", diags)
		}
		for name, a := range attrs {
			v, diags := a.Expr.Value(nil)
			if diags.HasErrors() {
				return diagError("terraform.required_providers."+name, diags)
			}
			var req ProviderRequirement
			switch {
			case v.Type() == cty.String && !v.IsNull():
				req.Version = v.AsString()
			case v.Type().IsObjectType() && !v.IsNull():
				for _, k := range []string{"source", "version"} {
					if !v.Type().HasAttribute(k) {
						continue
					}
					x := v.GetAttr(k)
					if x.Type() != cty.String || x.IsNull() {
						return fmt.Errorf("terraform.required_providers.%s.%s: want a string", name, k)
					}
					if k == "source" {
						req.Source = x.AsString()
					} else {
						req.Version = x.AsString()
					}
				}
			default:
				return fmt.Errorf("terraform.required_providers.%s: want an object with source and version", name)
			}
			if req.Version != "" {
				if _, err := providers.ParseConstraint(req.Version); err != nil {
					return fmt.Errorf("terraform.required_providers.%s.version: %q: %w", name, req.Version, err)
				}
			}
			if c.Requirements == nil {
				c.Requirements = map[string]ProviderRequirement{}
			}
			c.Requirements[name] = req
		}
	}
	return nil
}

var providerSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "alias"}, {Name: "version"}}}

func (c *Config) parseProvider(blk *hcl.Block) error {
	content, rest, diags := blk.Body.PartialContent(providerSchema)
	if diags.HasErrors() {
		return diagError("provider "+blk.Labels[0], diags)
	}
	key := blk.Labels[0]
	if a, ok := content.Attributes["alias"]; ok {
		alias, err := staticString(a.Expr)
		if err != nil {
			return fmt.Errorf("provider %s: alias: %w", key, err)
		}
		key += "." + alias
	}
	if _, dup := c.Providers[key]; dup {
		return fmt.Errorf("provider %q configured twice", key)
	}
	c.Providers[key] = rest
	return nil
}

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "type"}, {Name: "default"}, {Name: "description"},
		{Name: "sensitive"}, {Name: "nullable"}, {Name: "ephemeral"}},
	Blocks: []hcl.BlockHeaderSchema{{Type: "validation"}},
}

func (c *Config) parseVariable(blk *hcl.Block) error {
	name := blk.Labels[0]
	where := "var." + name
	content, diags := blk.Body.Content(variableSchema)
	if diags.HasErrors() {
		return diagError(where, diags)
	}
	v := &VariableConfig{Name: name, Type: cty.DynamicPseudoType, Nullable: true}
	if a, ok := content.Attributes["type"]; ok {
		x := typeExpr(a.Expr)
		if sx, ok := x.(hclsyntax.Expression); ok {
			if p := hclnest.TypeExpressionProblemDefaults(sx); p != "" {
				// hcl evaluates optional()'s defaults itself, outside the evaluation limits.
				return fmt.Errorf("%s: type: %w: %s", where, engine.ErrEvaluationLimit, p)
			}
		}
		ty, defaults, diags := typeexpr.TypeConstraintWithDefaults(x)
		if diags.HasErrors() {
			return diagError(where+": type", diags)
		}
		v.Type, v.Defaults = ty, defaults
	}
	for _, flag := range []struct {
		name string
		into *bool
	}{{"sensitive", &v.Sensitive}, {"nullable", &v.Nullable}} {
		if a, ok := content.Attributes[flag.name]; ok {
			b, err := staticBool(a.Expr)
			if err != nil {
				return fmt.Errorf("%s: %s: %w", where, flag.name, err)
			}
			*flag.into = b
		}
	}
	if a, ok := content.Attributes["default"]; ok {
		d, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			return diagError(where+": default", diags)
		}
		// Converted while the configuration is read, where no budget runs: a set of numbers
		// that hash alike or a tuple of mixed types costs the square of its elements.
		if e, _, _ := valueSize(d, MaxDefaultElements+1, MaxValueBytes+1); e > MaxDefaultElements {
			return fmt.Errorf("%s: default: %w: more than %d elements", where, engine.ErrEvaluationLimit, MaxDefaultElements)
		}
		if v.Defaults != nil {
			d = v.Defaults.Apply(d)
		}
		cd, err := convert.Convert(d, v.Type)
		if err != nil {
			return fmt.Errorf("%s: default: want %s: %w", where, v.Type.FriendlyName(), err)
		}
		v.Default = cd
	}
	for _, vb := range content.Blocks {
		r, err := parseCheckRule(vb, where+": validation")
		if err != nil {
			return err
		}
		v.Validations = append(v.Validations, r)
	}
	c.Variables[name] = v
	return nil
}

// typeExpr turns a JSON string holding a type expression ("list(string)") into the native
// syntax expression typeexpr reads; other expressions pass through.
func typeExpr(e hcl.Expression) hcl.Expression {
	v, diags := e.Value(nil)
	if diags.HasErrors() || v.Type() != cty.String || v.IsNull() {
		return e
	}
	x, diags := hclsyntaxParseExpression(v.AsString(), e.Range())
	if diags.HasErrors() {
		return e
	}
	return x
}

var checkRuleSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "condition", Required: true}, {Name: "error_message", Required: true}}}

func parseCheckRule(blk *hcl.Block, where string) (*CheckRule, error) {
	content, diags := blk.Body.Content(checkRuleSchema)
	if diags.HasErrors() {
		return nil, diagError(where, diags)
	}
	return &CheckRule{Condition: content.Attributes["condition"].Expr, ErrorMessage: content.Attributes["error_message"].Expr}, nil
}

var outputSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "value", Required: true}, {Name: "sensitive"},
		{Name: "description"}, {Name: "depends_on"}, {Name: "ephemeral"}},
	Blocks: []hcl.BlockHeaderSchema{{Type: "precondition"}},
}

func (c *Config) parseOutput(blk *hcl.Block) error {
	name := blk.Labels[0]
	where := "output " + name
	content, diags := blk.Body.Content(outputSchema)
	if diags.HasErrors() {
		return diagError(where, diags)
	}
	o := &OutputConfig{Value: content.Attributes["value"].Expr}
	if a, ok := content.Attributes["sensitive"]; ok {
		b, err := staticBool(a.Expr)
		if err != nil {
			return fmt.Errorf("%s: sensitive: %w", where, err)
		}
		o.Sensitive = b
	}
	for _, pb := range content.Blocks {
		r, err := parseCheckRule(pb, where+": precondition")
		if err != nil {
			return err
		}
		o.Preconditions = append(o.Preconditions, r)
	}
	c.Outputs[name] = o
	return nil
}

var movedSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "from", Required: true}, {Name: "to", Required: true}}}

// addrAttr reads an attribute holding a moved or removed block's address ([parseAbsAddr]).
func addrAttr(a *hcl.Attribute, what string) (absAddr, error) {
	tr, diags := hcl.AbsTraversalForExpr(a.Expr)
	if diags.HasErrors() {
		return absAddr{}, diagError(what, diags)
	}
	ad, err := parseAbsAddr(tr)
	if err != nil {
		return absAddr{}, fmt.Errorf("%s: %s: %w", rangeText(a.Range), what, err)
	}
	if strings.HasPrefix(ad.Res, "data.") {
		return absAddr{}, fmt.Errorf("%s: %s: %s: data sources are not moved or removed", rangeText(a.Range), what, ad)
	}
	return ad, nil
}

func (c *Config) parseMoved(blk *hcl.Block) error {
	content, diags := blk.Body.Content(movedSchema)
	if diags.HasErrors() {
		return diagError("moved", diags)
	}
	from, err := addrAttr(content.Attributes["from"], "moved: from")
	if err != nil {
		return err
	}
	to, err := addrAttr(content.Attributes["to"], "moved: to")
	if err != nil {
		return err
	}
	if (from.Res == "") != (to.Res == "") {
		return fmt.Errorf("moved: %s to %s: a move is between two resources or two modules", from, to)
	}
	if from.Res != "" {
		ft, _, _ := strings.Cut(from.Res, ".")
		tt, _, _ := strings.Cut(to.Res, ".")
		if ft != tt {
			return fmt.Errorf("moved: %s to %s: a move keeps the resource type", from, to)
		}
	}
	if from.String() == to.String() {
		return fmt.Errorf("moved: %s to itself", from)
	}
	c.Moves = append(c.Moves, Move{From: from.String(), To: to.String()})
	return nil
}

var (
	removedSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "from", Required: true}},
		Blocks: []hcl.BlockHeaderSchema{{Type: "lifecycle"}, {Type: "provisioner", LabelNames: []string{"type"}}, {Type: "connection"}}}
	removedLifecycleSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "destroy"}}}
)

func (c *Config) parseRemoved(blk *hcl.Block) error {
	content, diags := blk.Body.Content(removedSchema)
	if diags.HasErrors() {
		return diagError("removed", diags)
	}
	fa := content.Attributes["from"]
	ad, err := addrAttr(fa, "removed: from")
	if err != nil {
		return err
	}
	if ad.hasKeys() {
		// tofu: "Resource instance address with keys is not allowed".
		return fmt.Errorf("%s: removed: from: %s: a removed block names a resource or a module without instance keys (as in tofu)", rangeText(fa.Range), ad)
	}
	from := ad.String()
	r := &RemovedConfig{From: from}
	for _, b := range content.Blocks {
		if b.Type != "lifecycle" {
			return fmt.Errorf("removed %s: %s blocks are not supported by the embedded engine (provisioners run commands on the operator's host)", from, b.Type)
		}
		lc, diags := b.Body.Content(removedLifecycleSchema)
		if diags.HasErrors() {
			return diagError("removed "+from+": lifecycle", diags)
		}
		if a, ok := lc.Attributes["destroy"]; ok {
			if r.Destroy, err = staticBool(a.Expr); err != nil {
				return fmt.Errorf("removed %s: lifecycle.destroy: %w", from, err)
			}
		}
	}
	if c.Removed == nil {
		c.Removed = map[string]*RemovedConfig{}
	}
	c.Removed[from] = r
	return nil
}

var importSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "to", Required: true}, {Name: "id", Required: true}, {Name: "provider"}, {Name: "for_each"}}}

func (c *Config) parseImport(blk *hcl.Block) error {
	content, diags := blk.Body.Content(importSchema)
	if diags.HasErrors() {
		return diagError("import", diags)
	}
	if _, ok := content.Attributes["for_each"]; ok {
		return fmt.Errorf("%s: import: for_each is not supported by the embedded engine", rangeText(blk.DefRange))
	}
	to := content.Attributes["to"]
	tr, diags := hcl.AbsTraversalForExpr(to.Expr)
	if diags.HasErrors() {
		return diagError("import: to", diags)
	}
	res, key, err := traversalInstance(tr)
	if err != nil {
		return fmt.Errorf("%s: import: to: %w", rangeText(to.Range), err)
	}
	c.Imports = append(c.Imports, &ImportConfig{To: res + keyString(key), Res: res, Key: key, ID: content.Attributes["id"].Expr})
	return nil
}

// traversalInstance reads a resource instance address (type.name, type.name[0],
// type.name["k"], data.type.name...) from a traversal.
func traversalInstance(tr hcl.Traversal) (string, instanceKey, error) {
	var names []string
	var key instanceKey
	for i, st := range tr {
		switch s := st.(type) {
		case hcl.TraverseRoot:
			names = append(names, s.Name)
		case hcl.TraverseAttr:
			names = append(names, s.Name)
		case hcl.TraverseIndex:
			if i != len(tr)-1 {
				return "", nil, fmt.Errorf("an index must be the last step of %s", traversalText(tr))
			}
			switch {
			case s.Key.Type() == cty.String:
				key = s.Key.AsString()
			case s.Key.Type() == cty.Number:
				n, _ := s.Key.AsBigFloat().Int64()
				key = n
			default:
				return "", nil, fmt.Errorf("bad index in %s", traversalText(tr))
			}
		default:
			return "", nil, fmt.Errorf("%s is not a resource address", traversalText(tr))
		}
	}
	want := 2
	if len(names) > 0 && names[0] == "data" {
		want = 3
	}
	if len(names) != want {
		return "", nil, fmt.Errorf("%s is not a resource instance address", traversalText(tr))
	}
	return strings.Join(names, "."), key, nil
}

var resourceMetaSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "count"}, {Name: "for_each"}, {Name: "provider"}, {Name: "depends_on"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "lifecycle"}, {Type: "connection"}, {Type: "provisioner", LabelNames: []string{"type"}}},
}

var lifecycleSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "create_before_destroy"}, {Name: "prevent_destroy"},
		{Name: "ignore_changes"}, {Name: "replace_triggered_by"}},
	Blocks: []hcl.BlockHeaderSchema{{Type: "precondition"}, {Type: "postcondition"}},
}

// validName reports whether s is a valid Terraform identifier (type or resource name).
func validName(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentStart(s[i]) && s[i] != '-' && (s[i] < '0' || s[i] > '9') {
			return false
		}
	}
	return true
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func parseResource(mode string, blk *hcl.Block) (*ResourceConfig, error) {
	typ, name := blk.Labels[0], blk.Labels[1]
	rc := &ResourceConfig{Mode: mode, Type: typ, Name: name}
	addr := rc.Address()
	if !validName(typ) || !validName(name) {
		return nil, fmt.Errorf("%s: invalid resource address: a type and name start with a letter or underscore and hold only letters, digits, underscores and dashes", addr)
	}
	prov, _, _ := strings.Cut(typ, "_")
	rc.ProviderKey = prov
	content, rest, diags := blk.Body.PartialContent(resourceMetaSchema)
	if diags.HasErrors() {
		return nil, diagError(addr, diags)
	}
	rc.Body = rest
	if a, ok := content.Attributes["count"]; ok {
		rc.Count = a.Expr
	}
	if a, ok := content.Attributes["for_each"]; ok {
		rc.ForEach = a.Expr
	}
	if rc.Count != nil && rc.ForEach != nil {
		return nil, fmt.Errorf("%s: count and for_each cannot both be set", addr)
	}
	if a, ok := content.Attributes["provider"]; ok {
		tr, diags := hcl.AbsTraversalForExpr(a.Expr)
		if diags.HasErrors() {
			return nil, diagError(addr+": provider", diags)
		}
		rc.ProviderKey = traversalText(tr)
	}
	if a, ok := content.Attributes["depends_on"]; ok {
		trs, err := traversalList(a.Expr)
		if err != nil {
			return nil, fmt.Errorf("%s: depends_on: %w", addr, err)
		}
		for _, tr := range trs {
			rc.DependsOn = append(rc.DependsOn, stripIndex(traversalText(tr)))
		}
	}
	for _, b := range content.Blocks {
		switch b.Type {
		case "connection", "provisioner":
			return nil, fmt.Errorf("%s: %s blocks are not supported by the embedded engine (provisioners run commands on the operator's host)", addr, b.Type)
		case "lifecycle":
			if err := rc.parseLifecycle(b); err != nil {
				return nil, err
			}
		}
	}
	if mode == "data" && (rc.CreateBeforeDestroy || rc.PreventDestroy || rc.IgnoreAll || len(rc.IgnoreChanges) > 0 || len(rc.ReplaceTriggeredBy) > 0) {
		return nil, fmt.Errorf("%s: a data source's lifecycle takes only precondition and postcondition", addr)
	}
	refs, err := bodyTraversals(rc.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	rc.refs = refs
	for _, e := range []hcl.Expression{rc.Count, rc.ForEach} {
		if e != nil {
			rc.refs = append(rc.refs, e.Variables()...)
		}
	}
	for _, e := range rc.ReplaceTriggeredBy {
		rc.refs = append(rc.refs, e.Variables()...)
	}
	for _, r := range rc.Preconditions {
		rc.refs = append(rc.refs, r.Condition.Variables()...)
		rc.refs = append(rc.refs, r.ErrorMessage.Variables()...)
	}
	for _, r := range rc.Postconditions {
		rc.refs = append(rc.refs, withoutSelf(r.Condition.Variables())...)
		rc.refs = append(rc.refs, withoutSelf(r.ErrorMessage.Variables())...)
	}
	return rc, nil
}

func withoutSelf(trs []hcl.Traversal) []hcl.Traversal {
	var out []hcl.Traversal
	for _, t := range trs {
		if t.RootName() != "self" {
			out = append(out, t)
		}
	}
	return out
}

func (rc *ResourceConfig) parseLifecycle(b *hcl.Block) error {
	addr := rc.Address()
	lc, diags := b.Body.Content(lifecycleSchema)
	if diags.HasErrors() {
		return diagError(addr+": lifecycle", diags)
	}
	for _, flag := range []struct {
		name string
		into *bool
	}{{"create_before_destroy", &rc.CreateBeforeDestroy}, {"prevent_destroy", &rc.PreventDestroy}} {
		if a, ok := lc.Attributes[flag.name]; ok {
			v, err := staticBool(a.Expr)
			if err != nil {
				return fmt.Errorf("%s: lifecycle.%s: %w", addr, flag.name, err)
			}
			*flag.into = v
		}
	}
	if a, ok := lc.Attributes["ignore_changes"]; ok {
		if kw := hcl.ExprAsKeyword(a.Expr); kw == "all" {
			rc.IgnoreAll = true
		} else {
			exprs, diags := hcl.ExprList(a.Expr)
			if diags.HasErrors() {
				return diagError(addr+": lifecycle.ignore_changes", diags)
			}
			for _, e := range exprs {
				tr, diags := hcl.RelTraversalForExpr(e)
				if diags.HasErrors() {
					return diagError(addr+": lifecycle.ignore_changes", diags)
				}
				p, err := traversalPath(tr)
				if err != nil {
					return fmt.Errorf("%s: lifecycle.ignore_changes: %w", addr, err)
				}
				rc.IgnoreChanges = append(rc.IgnoreChanges, p)
			}
		}
	}
	if a, ok := lc.Attributes["replace_triggered_by"]; ok {
		exprs, diags := hcl.ExprList(a.Expr)
		if diags.HasErrors() {
			return diagError(addr+": lifecycle.replace_triggered_by", diags)
		}
		for _, e := range exprs {
			// In JSON each element is a string holding a reference: read it as an expression.
			x, err := jsonStringExpr(e)
			if err != nil {
				return fmt.Errorf("%s: lifecycle.replace_triggered_by: %w", addr, err)
			}
			// A reference, as Terraform requires (a resource, an instance, an attribute): an
			// expression here would be evaluated on every plan.
			if sx, ok := x.(hclsyntax.Expression); ok {
				if p := hclnest.ReferenceProblem(sx); p != "" {
					return fmt.Errorf("%s: lifecycle.replace_triggered_by: %w: want a reference to a resource, an instance or its attribute, got %s", addr, engine.ErrEvaluationLimit, p)
				}
			}
			rc.ReplaceTriggeredBy = append(rc.ReplaceTriggeredBy, x)
		}
	}
	for _, cb := range lc.Blocks {
		r, err := parseCheckRule(cb, addr+": "+cb.Type)
		if err != nil {
			return err
		}
		if cb.Type == "precondition" {
			rc.Preconditions = append(rc.Preconditions, r)
		} else {
			rc.Postconditions = append(rc.Postconditions, r)
		}
	}
	return nil
}

// traversalPath turns a relative traversal (ignore_changes' "tags", "tags[\"a\"]") into a
// cty path.
func traversalPath(tr hcl.Traversal) (cty.Path, error) {
	var p cty.Path
	for _, st := range tr {
		switch s := st.(type) {
		case hcl.TraverseRoot:
			p = p.GetAttr(s.Name)
		case hcl.TraverseAttr:
			p = p.GetAttr(s.Name)
		case hcl.TraverseIndex:
			p = p.Index(s.Key)
		default:
			return nil, fmt.Errorf("%s is not an attribute path", traversalText(tr))
		}
	}
	return p, nil
}

// traversalList reads a list of references (depends_on).
func traversalList(e hcl.Expression) ([]hcl.Traversal, error) {
	exprs, diags := hcl.ExprList(e)
	if diags.HasErrors() {
		return nil, diagError("", diags)
	}
	var out []hcl.Traversal
	for _, x := range exprs {
		tr, diags := hcl.AbsTraversalForExpr(x)
		if diags.HasErrors() {
			return nil, diagError("", diags)
		}
		out = append(out, tr)
	}
	return out, nil
}

// bodyTraversals returns every reference in a body without a schema: in JSON every property
// is an expression, and nested objects and arrays are walked.
func bodyTraversals(b hcl.Body) ([]hcl.Traversal, error) {
	attrs, diags := b.JustAttributes()
	if diags.HasErrors() {
		return nil, diagError("", diags)
	}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []hcl.Traversal
	for _, n := range names {
		out = append(out, attrs[n].Expr.Variables()...)
	}
	return out, nil
}

// staticBool evaluates a literal boolean (lifecycle flags, sensitive).
func staticBool(e hcl.Expression) (bool, error) {
	v, diags := e.Value(nil)
	if diags.HasErrors() {
		return false, diagError("", diags)
	}
	bv, err := convert.Convert(v, cty.Bool)
	if err != nil || bv.IsNull() || !bv.IsKnown() {
		return false, fmt.Errorf("want a literal true or false")
	}
	return bv.True(), nil
}

func staticString(e hcl.Expression) (string, error) {
	v, diags := e.Value(nil)
	if diags.HasErrors() {
		return "", diagError("", diags)
	}
	if v.Type() != cty.String || v.IsNull() {
		return "", fmt.Errorf("want a literal string")
	}
	return v.AsString(), nil
}

// decodeBlock decodes a block body into a value of the block's implied type, evaluating its
// expressions in ctx. Absent attributes are null; absent list, set and map blocks are empty.
// Errors name where and the attribute path ("local_file.a.content: ...").
func decodeBlock(b *Block, body hcl.Body, ctx *hcl.EvalContext, where string) (cty.Value, error) {
	content, diags := body.Content(b.bodySchema())
	if diags.HasErrors() {
		return cty.NilVal, diagError(where, diags)
	}
	vals := make(map[string]cty.Value, len(b.Attributes)+len(b.BlockTypes))
	for name, a := range b.Attributes {
		ty := a.ImpliedType()
		attr, ok := content.Attributes[name]
		if !ok {
			vals[name] = cty.NullVal(ty)
			continue
		}
		v, diags := exprValue(attr.Expr, ctx)
		if diags.HasErrors() {
			return cty.NilVal, diagError(where+"."+name, diags)
		}
		if b := budgetOf(ctx); b != nil {
			// The schema's type converts the value as a function's parameter does: a string
			// to a number through math/big, a tuple to a collection pairwise.
			var err error
			if v, err = b.convertible(where+"."+name, v, a.configType()); err != nil {
				return cty.NilVal, err
			}
		}
		cv, err := convert.Convert(v, a.configType())
		if err == nil && !cv.Type().Equals(ty) {
			cv, err = convert.Convert(cv, ty)
		}
		if err != nil {
			return cty.NilVal, fmt.Errorf("%s.%s: want %s: %s", where, name, ty.FriendlyName(), convertErrText(v, err))
		}
		vals[name] = cv
	}
	blocks := map[string][]*hcl.Block{}
	for _, blk := range content.Blocks {
		blocks[blk.Type] = append(blocks[blk.Type], blk)
	}
	for name, nb := range b.BlockTypes {
		v, err := decodeNested(nb, blocks[name], ctx, where+"."+name)
		if err != nil {
			return cty.NilVal, err
		}
		vals[name] = v
	}
	return cty.ObjectVal(vals), nil
}

// bodySchema is the hcl schema of a block: its attributes and nested block types (map
// blocks take one label).
func (b *Block) bodySchema() *hcl.BodySchema {
	s := &hcl.BodySchema{}
	for name := range b.Attributes {
		s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: name})
	}
	for name, nb := range b.BlockTypes {
		h := hcl.BlockHeaderSchema{Type: name}
		if nb.Nesting == NestingMap {
			h.LabelNames = []string{"key"}
		}
		s.Blocks = append(s.Blocks, h)
	}
	sort.Slice(s.Attributes, func(i, j int) bool { return s.Attributes[i].Name < s.Attributes[j].Name })
	sort.Slice(s.Blocks, func(i, j int) bool { return s.Blocks[i].Type < s.Blocks[j].Type })
	return s
}

func decodeNested(nb *NestedBlock, items []*hcl.Block, ctx *hcl.EvalContext, where string) (cty.Value, error) {
	ety := nb.Block.ImpliedType()
	switch nb.Nesting {
	case NestingSingle, NestingGroup:
		if len(items) > 1 {
			return cty.NilVal, fmt.Errorf("%s: at most one block allowed", where)
		}
		if len(items) == 0 {
			if nb.Nesting == NestingGroup {
				return decodeBlock(&nb.Block, hcl.EmptyBody(), ctx, where)
			}
			return cty.NullVal(ety), nil
		}
		return decodeBlock(&nb.Block, items[0].Body, ctx, where)
	case NestingList, NestingSet:
		var vals []cty.Value
		for i, it := range items {
			v, err := decodeBlock(&nb.Block, it.Body, ctx, fmt.Sprintf("%s[%d]", where, i))
			if err != nil {
				return cty.NilVal, err
			}
			vals = append(vals, v)
		}
		if nb.Nesting == NestingList {
			if len(vals) == 0 {
				return cty.ListValEmpty(ety), nil
			}
			return cty.ListVal(vals), nil
		}
		if len(vals) == 0 {
			return cty.SetValEmpty(ety), nil
		}
		return cty.SetVal(vals), nil
	case NestingMap:
		vals := map[string]cty.Value{}
		for _, it := range items {
			label := it.Labels[0]
			v, err := decodeBlock(&nb.Block, it.Body, ctx, fmt.Sprintf("%s[%q]", where, label))
			if err != nil {
				return cty.NilVal, err
			}
			vals[label] = v
		}
		if len(vals) == 0 {
			return cty.MapValEmpty(ety), nil
		}
		return cty.MapVal(vals), nil
	}
	return cty.NilVal, fmt.Errorf("%s: unsupported nesting mode %d", where, nb.Nesting)
}

// diagError turns hcl diagnostics into one error: "where: summary: detail (main.tf.json:3,17)".
func diagError(where string, diags hcl.Diagnostics) error {
	var parts []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		s := d.Summary
		if d.Detail != "" {
			s += ": " + strings.TrimSuffix(d.Detail, ".")
		}
		if d.Subject != nil {
			s += " (" + rangeText(*d.Subject) + ")"
		}
		parts = append(parts, s)
	}
	msg := strings.Join(parts, "; ")
	if where != "" {
		msg = where + ": " + msg
	}
	for _, d := range diags {
		if err := stopOf(d); err != nil {
			return &stopDiagError{msg: msg, err: err}
		}
	}
	return fmt.Errorf("%s", msg)
}

// stopDiagError is diagError's error for diagnostics that report a stopped evaluation: the
// diagnostics' text, matching the error that stopped it (a [LimitError], and so
// [engine.ErrEvaluationLimit], or the operation context's).
type stopDiagError struct {
	msg string
	err error
}

func (e *stopDiagError) Error() string { return e.msg }
func (e *stopDiagError) Unwrap() error { return e.err }

// rangeText is "main.tf.json:LINE,COL".
func rangeText(r hcl.Range) string {
	return fmt.Sprintf("%s:%d,%d", r.Filename, r.Start.Line, r.Start.Column)
}

// convertErrText is a conversion error's message with its path, if any.
// When v (the value converted) holds a sensitive value, the text is [sensitiveDetail]: go-cty's
// conversion errors name the map keys and values on their path ("element \"KEY\": string
// required").
func convertErrText(v cty.Value, err error) string {
	if hasMarkDeep(v, sensitiveMark) || hasMarkDeep(v, attributeSensitiveMark) {
		return sensitiveDetail
	}
	if pe, ok := err.(cty.PathError); ok && len(pe.Path) > 0 {
		return pathString(pe.Path) + ": " + pe.Error()
	}
	return err.Error()
}

// traversalText renders a traversal as Terraform writes it ("aws.west", `x.y["k"]`).
func traversalText(tr hcl.Traversal) string {
	var b strings.Builder
	for _, st := range tr {
		switch s := st.(type) {
		case hcl.TraverseRoot:
			b.WriteString(s.Name)
		case hcl.TraverseAttr:
			b.WriteString("." + s.Name)
		case hcl.TraverseIndex:
			if s.Key.Type() == cty.String {
				fmt.Fprintf(&b, "[%q]", s.Key.AsString())
			} else if s.Key.Type() == cty.Number {
				b.WriteString("[" + s.Key.AsBigFloat().Text('f', -1) + "]")
			}
		case hcl.TraverseSplat:
			b.WriteString("[*]")
		}
	}
	return b.String()
}

// maxDocumentDepth bounds how deeply a Terraform JSON document nests (hcl/v2/json's parser
// recurses once per level): far above what a rendered architecture reaches (tlisp.MaxDepth
// levels of value inside a few levels of blocks).
const maxDocumentDepth = 1024

// checkDocument refuses what hcl must not read: a document [checkNesting] refuses, then one of
// more than hclnest.MaxSequences template sequences (engine.ErrEvaluationLimit).
func checkDocument(doc []byte, filename string) error {
	if err := checkNesting(doc, filename); err != nil {
		return err
	}
	if err := hclnest.SequencesError(doc); err != nil {
		return fmt.Errorf("%s: %w: %w", filename, engine.ErrEvaluationLimit, err)
	}
	return nil
}

// checkNesting reads doc's tokens with encoding/json's decoder (which does not recurse) and
// refuses a document that nests deeper than maxDocumentDepth, and a string whose template
// hclnest refuses: hcl/v2/json parses every string's template itself (on Value and Variables),
// where Lava cannot check it first. The error carries filename:line,col as diagError does.
// A document that is not JSON is left to hcl/v2/json, which reports it.
func checkNesting(doc []byte, filename string) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	depth := 0
	pos := hcl.InitialPos // advanced along doc as the tokens are read
	for {
		off := int(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		switch tok := tok.(type) {
		case json.Delim:
			if tok == '[' || tok == '{' {
				depth++
			} else {
				depth--
			}
			if depth > maxDocumentDepth {
				pos = advance(doc, pos, int(dec.InputOffset())-1)
				return fmt.Errorf("%s:%d,%d: the document nests more than %d levels deep", filename, pos.Line, pos.Column, maxDocumentDepth)
			}
		case string:
			if !strings.Contains(tok, "${") && !strings.Contains(tok, "%{") {
				continue
			}
			for off < len(doc) && doc[off] != '"' {
				off++ // the separators and spaces before the string
			}
			pos = advance(doc, pos, off+1)
			if diags := hclnest.Check([]byte(tok), true, filename, pos); diags.HasErrors() {
				return diagError("parse terraform json", diags)
			}
		}
	}
}

// advance returns the position of byte offset to in doc, counting from from (at or before
// it): lines and columns as hcl counts them (a column is a character).
func advance(doc []byte, from hcl.Pos, to int) hcl.Pos {
	for i := from.Byte; i < to && i < len(doc); {
		r, size := utf8.DecodeRune(doc[i:])
		if r == '\n' {
			from.Line, from.Column = from.Line+1, 1
		} else {
			from.Column++
		}
		i += size
		from.Byte = i
	}
	return from
}
